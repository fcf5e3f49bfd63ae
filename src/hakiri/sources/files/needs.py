"""What a files source needs of the engine (`spark.engines.CAPABILITIES`): read by `plan`,
`validate` and `apply` before any data moves, and by the reader on the session it has."""

from __future__ import annotations

import codecs

from hakiri.spec.pipeline import FilesConfig, PipelineSpec

__all__ = ["engine_needs", "provenance_capability"]

_UTF8 = ("utf-8", "utf-8-sig", "ascii")


def provenance_capability(config: FilesConfig) -> str:
    """Which provenance capability a files source with several files in a batch needs."""
    inferred = config.format == "parquet" or (config.format != "csv" and config.columns is None)
    return "file_provenance_inferred" if inferred else "file_provenance"


def engine_needs(spec: PipelineSpec) -> list[str]:
    config = spec.source.config
    assert isinstance(config, FilesConfig)
    needed = []
    if config.provenance and spec.load.strategy.snapshot:
        needed.append(provenance_capability(config))
    if config.format != "parquet" and not _is_utf8(config.encoding):
        needed.append("text_encodings")
    if config.format != "parquet" and (config.date_format or config.timestamp_format):
        needed.append("datetime_formats")
    return needed


def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name in _UTF8
    except LookupError:
        return False  # an unknown codec: the reader names it
