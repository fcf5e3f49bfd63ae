"""Read file batches with Spark: csv, json/jsonl and parquet, with the malformed-record policy.

`read_files` is the entry: it locates the batch's files (through `stand_ins` when the
engine cannot be given a file as it is), reads them by format (`csv_files`, `json_files`,
`parquet_files`; each Spark read is a `part.Part`) and returns a `FileRead`, whose checks
(`malformed`) judge what the read left out. `with_provenance` adds each row's file hash
and batch id.

The JVM-free half (matching, hashing, header and key sniffing for `plan`) is
`hakiri.sources.files.inspect`; the parsing helpers both halves need live there.
pyspark is imported inside the functions that read.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.errors import SourceDataError, SourceUnreachable
from hakiri.sources.base import SourceFile
from hakiri.sources.files.csv_files import csv_parts
from hakiri.sources.files.inspect import has_records
from hakiri.sources.files.json_files import in_file_order, json_parts
from hakiri.sources.files.malformed import (
    PARSER_STOPPED,
    Check,
    engine_stopped,
    misshapen_records,
    raise_if_undecodable,
    refused_value,
)
from hakiri.sources.files.parquet_files import read_parquet
from hakiri.sources.files.part import FILE, PROVENANCE_COLUMNS, file_hash, quoted_col, spark_schema
from hakiri.sources.files.stand_ins import (
    GLOB_CHARS,
    Located,
    locate,
    plainly_named,
    reads_encoding,
    remove_copy,
    spark_charset,
    utf8_copy,
)
from hakiri.spark.engines import engine_of_session, support
from hakiri.spark.tally import tallies_in_process
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "PROVENANCE_COLUMNS",
    "FileRead",
    "read_files",
    "with_provenance",
]

# ---------------------------------------------------------------- reading with Spark
#
# hakiri.sources takes nothing from hakiri.spark but its engine table (which engine can count
# malformed records as they pass), and imports pyspark inside functions only:
# the caller passes the SparkSession in, and wraps the call in
# hakiri.spark.errors.spark_errors for the Spark failures this code does not
# foresee (I/O errors, a JVM that died).


@dataclass(frozen=True)
class FileRead:
    """One batch of files as a lazy DataFrame, and how to judge what reading it left out.

    The malformed-record accounting rides along the one pass that consumes the frame
    (Spark's observed metrics, or hakiri's tally): call `verify()` after that pass (the
    staging write). Keep the FileRead while its frame (or one made from it) is used: the
    UTF-8 copies an engine may read instead of the files go with it.
    """

    frame: DataFrame
    # No file of the batch holds a data record (a header-only CSV, `[]`, a 0-row Parquet file):
    # the frame has no rows, and its columns are the declared ones or none at all.
    empty: bool = False
    checks: tuple[Check, ...] = ()  # one per Spark read of the batch

    def verify(self) -> int:
        """The records left out under on_malformed = "drop" (0 under "fail"), once the frame was
        consumed. Raises SourceDataError for malformed records under "fail" (naming the file and
        line of the first), for bytes the encoding cannot decode and for a broken JSON array."""
        return sum(check.judge() for check in self.checks)

    def explain(self, exc: BaseException) -> SourceDataError | None:
        """For a pass over the frame that failed: the record an engine's parser stopped at
        (Sail's, at a CSV record of the wrong width or a line that is not JSON), by file and
        line, when that is why; else None."""
        if not any(PARSER_STOPPED.search(str(e)) for e in _chain(exc)):
            return None
        tallied = [check for check in self.checks if check.tally is not None]
        for check in tallied:
            found = misshapen_records(check.config, check.part)
            if found is not None:
                return found
        said = "\n".join(str(e) for e in _chain(exc))
        for check in tallied:  # a value the typed parser refused: the conversion's verdict
            refused = refused_value(check.config, check.part, said)
            if refused is not None:
                return refused
        return engine_stopped(tallied[0].config, tallied[0].part, exc) if tallied else None


def read_files(
    spark: SparkSession,
    project_root: Path,
    config: FilesConfig,
    files: Sequence[SourceFile],
    *,
    file_hashes: bool = False,
) -> FileRead:
    """Read exactly `files` (one batch) with Spark, as the source config declares.

    csv: `header`, `delimiter`, `encoding`, RFC 4180 quoting; the declared
    `columns` (every one must be in each file's header; other header columns are
    left out), else types inferred from all rows. json/jsonl: JSON Lines, except
    that a file starting with '[' is read as one array of records. parquet: as
    written, nanosecond timestamps included; declared `columns` are selected and cast.
    Column names are kept exactly as the files spell them.

    Malformed records (wrong number of CSV fields, a value that does not parse as
    its column's type, a line that is not a JSON object) fail the read under
    `on_malformed = "fail"`, with the file and line of the first one; under
    "drop" they are left out and counted. Both happen in the one pass that
    consumes the frame (an inferred CSV schema costs one more pass): the counts are
    Spark's observed metrics, judged by `FileRead.verify()` after that pass. Nothing
    is collected but counts.

    `file_hashes`: each row also gets its file's content hash as `_source_file_hash`, for
    an engine without input_file_name() (`with_provenance` uses that one): each file is
    read on its own there (CSV and declared JSON Lines always are; inferred JSON Lines and
    Parquet after the batch's one schema is found from all its files).

    Raises SourceDataError for a missing file, an unknown encoding, a declared
    column the file lacks and a declared type Spark does not know; `verify()`
    raises for malformed records under "fail" and bytes the encoding cannot decode.
    """
    if not files:
        raise ValueError("read_files needs at least one file")
    observed = _observes(spark)
    tallied = not observed and tallies_in_process(spark)
    root = Path(os.path.abspath(project_root))
    located = [locate(root, file) for file in files]
    hashes = (
        {loc.path: f.content_hash for loc, f in zip(located, files, strict=True)}
        if file_hashes
        else None
    )
    if support(engine_of_session(spark), "glob_file_names").status != "works":
        located = [
            plainly_named(loc, root) if GLOB_CHARS.search(loc.path.as_posix()) else loc
            for loc in located
        ]
    transcoded = config.format != "parquet" and not reads_encoding(spark, config)
    if transcoded or config.format == "parquet":
        charset = "UTF-8" if transcoded else ""
    else:
        charset = spark_charset(spark, config)
    # A file without a data record adds no row, and its header or footer is no evidence of the
    # columns' types (inferred, a header-only CSV is all strings): it is left out of the read.
    located = [loc for loc in located if _has_records(config, loc)]
    if not located:
        return FileRead(_empty_frame(spark, config), empty=True)
    copies: list[Path] = []
    if transcoded:
        located = [utf8_copy(loc, config.encoding, copies, root) for loc in located]
    per_file = hashes is not None
    if config.format == "parquet":
        frame, part = read_parquet(spark, config, located, observed, per_file)
        if part is None:
            return FileRead(_with_file_hash(frame, located, hashes) if per_file else frame)
        check = Check(config, part, observed, tallied)
        return _judged_ahead(FileRead(check.frame(hashes), checks=(check,)), observed)

    if config.format == "csv":
        # A value Sail's typed parser refuses fails the read; under "fail" so does the batch.
        parser_typing = tallied and config.on_malformed == "fail"
        parts = csv_parts(spark, config, charset, located, observed, parser_typing)
    else:
        parts = json_parts(spark, config, charset, located, observed, per_file)
    checks = tuple(Check(config, part, observed, tallied) for part in parts)
    frames = [check.frame(hashes) for check in checks]
    frame = frames[0]
    for more in frames[1:]:
        frame = frame.unionByName(more, allowMissingColumns=True)
    if config.format != "csv" and config.columns is None:
        frame = in_file_order(config, located, frame)
    read = _judged_ahead(FileRead(frame, checks=checks), observed)
    for copy in copies:  # the engine reads them until the batch is done with its read
        weakref.finalize(read, remove_copy, copy)
    return read


def _with_file_hash(
    frame: DataFrame, located: Sequence[Located], hashes: Mapping[Path, str] | None
) -> DataFrame:
    """A frame whose rows carry their file's name in FILE: that file's hash instead."""
    assert hashes is not None
    data = [quoted_col(name) for name in frame.columns if name != FILE]
    return frame.select(*data, file_hash(located, hashes).alias(PROVENANCE_COLUMNS[0]))


def _observes(spark: SparkSession) -> bool:
    """Does the engine count malformed records as they pass (observed metrics, a corrupt-record
    column)? Apache Spark does; on Sail hakiri counts them itself (`Check`)."""
    return support(engine_of_session(spark), "malformed_fail").status == "works"


def _judged_ahead(read: FileRead, observed: bool) -> FileRead:
    """On an engine that can neither observe nor tally a part's counts as its rows pass: the
    verdict now, before any row is written (an aggregate of its own over the files), so a
    batch that must fail moves no data."""
    if not observed:
        for check in read.checks:
            if check.tally is None:
                check.judge()
    return read


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def with_provenance(
    frame: DataFrame, project_root: Path, files: Sequence[SourceFile], batch_id: str
) -> DataFrame:
    """The frame plus `_source_file_hash` (the content hash of the file each row came from)
    and `_hakiri_batch_id`; call it on the frame `read_files` returned, before any shuffle.

    One file: the hash is a literal. Several (a snapshot batch): each row's file is
    looked up by Spark's `input_file_name()` in a small path -> hash map.
    """
    from pyspark.sql import functions as F

    if PROVENANCE_COLUMNS[0] in frame.columns:  # the read named each row's file already
        return frame.withColumn(PROVENANCE_COLUMNS[1], F.lit(batch_id))
    if len(files) == 1:
        source_hash = F.lit(files[0].content_hash)
    else:
        root = Path(os.path.abspath(project_root))
        pairs = []
        for file in files:
            uri = locate(root, file).path.as_uri()
            pairs += [F.lit(uri), F.lit(file.content_hash)]
        source_hash = F.element_at(F.create_map(*pairs), F.input_file_name())
    return frame.withColumn(PROVENANCE_COLUMNS[0], source_hash).withColumn(
        PROVENANCE_COLUMNS[1], F.lit(batch_id)
    )


def _empty_frame(spark: SparkSession, config: FilesConfig) -> DataFrame:
    if config.columns is None:
        return spark.range(0).select()
    return spark.createDataFrame([], spark_schema(spark, list(config.columns.items())))


def _has_records(config: FilesConfig, loc: Located) -> bool:
    try:
        return has_records(config, loc.path, loc.shown)
    except SourceUnreachable as exc:
        # The bytes may not decode: name the line that has them, as a read would.
        if config.format != "parquet":
            raise_if_undecodable(config, [loc])
        raise SourceDataError(exc.reason, exc.hint) from None
