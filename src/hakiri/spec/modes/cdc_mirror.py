"""cdc_mirror: the target follows a PostgreSQL table's changes, read from logical decoding
(`sources.postgres.cdc_source`): a snapshot of the table first, then its inserts, updates and
deletes in commit order, by the table's primary key (`upsert_key`).

A batch is a range of the server's WAL (or a snapshot chunk). Its staged rows are the net
effect of the range's changes on each key, with two control columns that never reach the
target: `_hakiri_cdc_op` ('u': the key's row is this one; 'd': the key is gone) and
`_hakiri_cdc_unchanged` (a JSON list of the columns whose large values the WAL left out,
which keep the target's value). The range's end is the batch id, kept in the destination's
ledger with the rows, so a range is applied once whatever crashes. A snapshot batch
(`SNAPSHOT_BATCH`) replaces the target: the keys it lacks are deleted too."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from hakiri.spec.modes.base import LoadStrategy, ModeOptionError, Written, register_mode

if TYPE_CHECKING:
    from hakiri.spec.modes.base import LoadSpec, ModeWriter, PipelineSpec

OP_COLUMN = "_hakiri_cdc_op"
# A snapshot batch's id starts so: its rows are the whole table, so the target's rows
# whose key it lacks are deleted (they went while no change was being read).
SNAPSHOT_BATCH = "cdc-snapshot:"
UNCHANGED_COLUMN = "_hakiri_cdc_unchanged"
CDC_DOCS = "docs/cdc.md"


class CdcMirror(LoadStrategy):
    name = "cdc_mirror"
    summary = "mirror a PostgreSQL table's changes (logical decoding) by its primary key"
    needs = ("mirror",)
    required = (
        "upsert_key",
        "cdc_mirror applies each change by the table's primary key: name it in upsert_key",
    )
    options = ("upsert_key",)
    ordered = True  # WAL ranges apply in order, one at a time
    destructive = True
    control_columns: ClassVar[tuple[str, ...]] = (OP_COLUMN, UNCHANGED_COLUMN)
    empty_strings_as_null = False  # '' in the source is '' in the mirror

    def check_pipeline(self, spec: PipelineSpec) -> None:
        config = getattr(spec.source, "config", None)
        connector = getattr(spec.source, "connector", None)
        if connector == "postgres" and config.cdc is not None:
            return
        if connector == "files" and config.changes is not None:
            return
        raise ModeOptionError(
            "load mode cdc_mirror reads a change stream, and this pipeline's source has none",
            'use a postgres source with config.cdc = { slot = "…", publication = "…" }, or '
            f'files of change events (changes = "debezium"); see {CDC_DOCS}',
            at="source",
        )

    def merge_key(self, load: LoadSpec) -> list[str] | None:
        return list(load.upsert_key) if load.upsert_key else None

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        key = self.merge_key(load)
        assert key is not None  # required by the manifest
        return writer.mirror(key)


register_mode(CdcMirror())


def is_snapshot(batch_id: str) -> bool:
    return batch_id.startswith(SNAPSHOT_BATCH)
