"""A PostgreSQL source with `cdc`: the tables' snapshot, then their changes from logical
decoding, for load mode cdc_mirror (`spec.modes.cdc_mirror`).

Batches per table, in order (the mode loads one at a time):

- `cdc-snapshot:<table>:<n>`: the table's rows, read after the slot exists. The slot is
  created (with the publication) by the first snapshot read; every row a snapshot reads is
  as it was at or after the slot's start, so applying the changes from that start brings
  the target to the source's state: a change the snapshot already holds writes the same
  row again. No exported snapshot has to stay open for the whole backfill, so a killed
  backfill resumes at its next batch.
- `cdc:<table>:<start>:<end>`: the changes committed in [start, end) of the WAL. The first
  range starts where the slot does, each next one where the last committed one ended, and
  ends where the server's WAL is flushed when it is planned. The range is the batch id,
  kept in the destination's ledger with the rows: a range is applied once. The tables
  planned together share the range's end (one look at the flushed WAL per planning), so
  the range is peeked and decoded once for all of them (`cdc.ranges.RangeEvents`): each
  table's read takes its share, or, for a range too large to hold in the hakiri process,
  an engine task of its own reads it.

Before it reads a range, a batch moves the slot to the lowest end every table of the
pipeline has committed (planned with it), so the server recycles WAL no table still
needs. A slot that is gone (dropped by hand) means changes were lost: the next plan takes
a new snapshot of every table.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hakiri.catalog.records import BatchStatus, NewBatch
from hakiri.errors import HakiriError, SourceChanged
from hakiri.sources.base import BatchRead, Reload, SourceObservation, TablePlan
from hakiri.sources.cdc.lag import CdcLag
from hakiri.sources.cdc.pgoutput import lsn_text
from hakiri.sources.cdc.ranges import IN_PROCESS_ENV, IN_PROCESS_LIMIT, RangeEvents
from hakiri.sources.cdc.slot import (
    advance_slot,
    check_logical_decoding,
    ensure_publication,
    ensure_slot,
    flushed_lsn,
    pending_changes,
    primary_key_of,
    slot_state,
)
from hakiri.sources.cdc.slot import (
    drop_slot as drop_replication_slot,
)
from hakiri.sources.postgres.inspect import inspect_postgres_table
from hakiri.sources.postgres.source import TableSource
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, SNAPSHOT_BATCH, UNCHANGED_COLUMN
from hakiri.spec.pipeline import CdcConfig, PipelineSpec, PostgresSourceConfig, TableSpec
from hakiri.spec.project import ProjectFile

if TYPE_CHECKING:
    from hakiri.catalog.records import Batch
    from hakiri.catalog.store import Catalog

__all__ = ["CdcSource", "cdc_names"]

_SNAPSHOT = SNAPSHOT_BATCH.rstrip(":")
_CHANGES = "cdc"


def cdc_names(spec: PipelineSpec, cdc: CdcConfig) -> tuple[str, str]:
    """(slot, publication): as configured, else hakiri_<pipeline id>."""
    default = "hakiri_" + "".join(c if c.isalnum() else "_" for c in spec.id.lower())
    return cdc.slot or default[:63], cdc.publication or default[:63]


class CdcSource(TableSource):
    """A PostgreSQL source read through its replication slot (the module doc); its
    connection, `from_spec` and `url` are the table source's."""

    def __init__(
        self,
        settings: ProjectFile,
        spec: PipelineSpec,
        config: PostgresSourceConfig,
        env: Mapping[str, str],
    ) -> None:
        super().__init__(settings, spec, config, env)
        assert config.cdc is not None
        self.slot, self.publication = cdc_names(spec, config.cdc)
        self._end: int | None = None  # the flushed WAL this planning's ranges end at
        self._ranges: RangeEvents | None = None  # the latest range's events, every table's

    def refresh(self) -> None:
        """Planning again looks at the flushed WAL again."""
        super().refresh()
        self._end = None

    def _planned_end(self) -> int:
        """Where the server's WAL is flushed, looked at once per planning: the tables planned
        together read the same range, peeked and decoded once for all of them."""
        if self._end is None:
            self._end = flushed_lsn(self.url)
        return self._end

    # ------------------------------------------------------------------ observing and planning

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None = None) -> SourceObservation:
        """The table as it is; its row estimate only while a snapshot is what loads next (once
        the slot exists, a batch holds the changes since, which `lag` counts)."""
        observed = inspect_postgres_table(self.url, self.config.schema_name, table.name, None, None)
        if slot_state(self.url, self.slot) is not None:
            return replace(observed, estimated_rows=None)
        return observed

    def plan_batches(self, table: TableSpec, catalog: Catalog) -> TablePlan:
        everything = catalog.batches(self.spec.id)
        mine = [b for b in everything if b.table_name == table.name]
        unfinished = [b for b in mine if b.status.unfinished]
        if unfinished:
            return TablePlan(notes=[f"{table.name}: {len(unfinished)} batch(es) to finish"])
        self._check_key(table.name)
        self._check_columns(table.name)
        snapshots = [b for b in mine if b.kind == _SNAPSHOT]
        state = slot_state(self.url, self.slot)
        if state is None:
            check_logical_decoding(self.url)  # before a snapshot whose read creates the slot
        if not snapshots or (state is None and _committed(snapshots)):
            # First, or the slot is gone (changes after its end were lost): a snapshot.
            return TablePlan(
                batches=[_snapshot_batch(table.name, len(snapshots))],
                planning=not snapshots,
            )
        if state is None:  # the snapshot is queued, and its read creates the slot
            return TablePlan()
        latest = _number(max(snapshots, key=_number))
        applied = _applied_end(mine, latest)
        confirmed = state.confirmed_flush
        if applied is not None and confirmed is not None and applied < confirmed:
            # A slot made anew: the changes between `applied` and its start are gone.
            return TablePlan(batches=[_snapshot_batch(table.name, len(snapshots))])
        start = applied or state.confirmed_flush
        assert start is not None
        end = self._planned_end()
        if end <= start:
            return TablePlan()
        release = self._release(everything)
        return TablePlan(batches=[_changes_batch(table.name, latest, start, end, release)])

    def _snapshots_loaded(self, everything: list[Batch]) -> bool:
        """Has every table's newest snapshot committed?"""
        for table in self.spec.table_specs():
            snapshots = [
                b for b in everything if b.table_name == table.name and b.kind == _SNAPSHOT
            ]
            if not snapshots or max(snapshots, key=_number).status is not BatchStatus.COMMITTED:
                return False
        return True

    def _release(self, everything: list[Batch]) -> int | None:
        """The lowest range end every table of the pipeline has committed; None while a
        table has none (it still needs the slot's changes from its start)."""
        ends = []
        for table in self.spec.table_specs():
            mine = [b for b in everything if b.table_name == table.name]
            snapshots = [b for b in mine if b.kind == _SNAPSHOT]
            if not snapshots:
                return None
            end = _applied_end(mine, _number(max(snapshots, key=_number)))
            if end is None:
                return None
            ends.append(end)
        return min(ends) if ends else None

    def _check_columns(self, table: str) -> None:
        """Columns whose WAL text hakiri cannot decode yet are refused before the snapshot."""
        from hakiri.spark.pg_reader import columns_of, spark_type

        found = [
            f"{name} ({kind})"
            for name, kind in columns_of(self.url, self.config.schema_name, table)
            if spark_type(kind).startswith(("array", "map", "struct"))
        ]
        if found:
            raise HakiriError(
                f"cdc_mirror cannot decode the changes of {self.config.schema_name}.{table}'s "
                f"column {', '.join(found)} yet",
                "mirror the table without it (a view is not decoded either), or load the "
                "table with mode upsert",
            )

    def _check_key(self, table: str) -> None:
        key = self.spec.load.upsert_key or []
        found = primary_key_of(self.url, self.config.schema_name, table)
        if sorted(found) != sorted(key):
            raise HakiriError(
                f"cdc_mirror applies the changes of {self.config.schema_name}.{table} by "
                f"upsert_key ({', '.join(key)}), and its primary key is "
                + (f"({', '.join(found)})" if found else "missing"),
                "set upsert_key to the table's primary key"
                if found
                else f"add one: ALTER TABLE {table} ADD PRIMARY KEY (…)",
            )

    def reloadable(
        self, table: TableSpec, committed: Sequence[Batch], upcoming: Sequence[Batch | NewBatch]
    ) -> Reload:
        """Nothing: the changes since the snapshot were read once from the slot, and the
        slot has moved past them. A new snapshot (after dropping the slot) starts over."""
        if not committed or any(b.kind == _SNAPSHOT for b in upcoming):
            return Reload()  # nothing loaded, or a new snapshot (after drop-slot) starts over
        return Reload(
            lost=(
                f"the changes mirrored into {table.name} since its snapshot were read once "
                "from the replication slot, which has moved on",
            ),
            hint=f"run `hakiri cdc drop-slot {self.spec.id}`: the next apply takes a new "
            "snapshot of every table",
        )

    def lag(self, catalog: Catalog, *, count_pending: bool = False) -> CdcLag:
        """How far the targets are behind the server's WAL (read-only); `count_pending`
        has the server decode the slot's WAL to count the changes not applied (plan)."""
        state = slot_state(self.url, self.slot)
        limit = self.config.cdc.max_lag_bytes if self.config.cdc else None
        if state is None:
            return CdcLag(slot=self.slot, slot_exists=False, max_lag_bytes=limit)
        flushed = flushed_lsn(self.url)
        retained = flushed - state.restart_lsn if state.restart_lsn is not None else None
        everything = catalog.batches(self.spec.id)
        applied = self._release(everything)
        planned = [
            b.created_at
            for b in everything
            if b.kind == _CHANGES and b.predicate and json.loads(b.predicate)["end"] == applied
        ]
        if applied is None and self._snapshots_loaded(everything):
            # Every table's snapshot is in and no range after it yet: the targets hold the
            # source as of the slot's start, the point its changes are read from.
            applied = state.confirmed_flush
            planned = [
                b.started_at or b.created_at
                for b in everything
                if b.kind == _SNAPSHOT and b.status is BatchStatus.COMMITTED
            ][-1:]
        if applied is None:
            return CdcLag(
                slot=self.slot, slot_exists=True, retained_bytes=retained, max_lag_bytes=limit
            )
        seconds = None
        if planned and planned[0] is not None:
            moment = planned[0] if planned[0].tzinfo else planned[0].replace(tzinfo=dt.UTC)
            seconds = max(0.0, (dt.datetime.now(dt.UTC) - moment).total_seconds())
        pending = (
            pending_changes(self.url, self.slot, self.publication, applied)
            if count_pending
            else None
        )
        return CdcLag(
            slot=self.slot,
            slot_exists=True,
            pending_changes=pending,
            applied_to=lsn_text(applied),
            behind_bytes=max(0, flushed - applied),
            behind_seconds=seconds,
            retained_bytes=retained,
            max_lag_bytes=limit,
        )

    def drop_slot(self, under: Callable[[Callable[[], bool]], bool]) -> bool:
        """Drop the slot (False: there was none), the drop run by `under` (which holds the
        pipeline's lease); refused while a server process reads it."""
        state = slot_state(self.url, self.slot)
        if state is None:
            return False
        if state.active_pid is not None:
            raise HakiriError(
                f"replication slot {self.slot} is in use by the server process {state.active_pid}",
                "stop what reads it first (an apply of this pipeline holds it only while it reads)",
            )
        return under(lambda: drop_replication_slot(self.url, self.slot))

    def cursor(self, table: TableSpec, bounds: Any = None) -> None:
        """No cursor column: the slot's WAL positions order the batches."""
        return None

    # ------------------------------------------------------------------ reading

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        from pyspark.sql import functions as F

        from hakiri.sources.cdc.changes import changes_frame, read_changes
        from hakiri.sources.postgres.reader import read_table
        from hakiri.sources.task_errors import task_error
        from hakiri.spark.pg_reader import columns_of, spark_type

        schema, name = self.config.schema_name, batch.table_name
        label = f"{schema}.{name}"
        if batch.kind == _SNAPSHOT:
            tables = [(schema, t.name) for t in self.spec.table_specs()]
            ensure_publication(self.url, self.publication, tables)
            ensure_slot(self.url, self.slot)
            frame = read_table(spark, self.url, self.config, name, None).select(
                "*",
                F.lit("u").alias(OP_COLUMN),
                F.lit(None).cast("string").alias(UNCHANGED_COLUMN),
            )
            return BatchRead(frame, label=f"{label} (snapshot)")
        if batch.kind != _CHANGES or not batch.predicate:
            raise HakiriError(
                f"batch {batch.batch_id} of {label} is neither a snapshot nor a WAL range",
                "run `hakiri apply` again: the planner makes one of them for each batch",
            )
        span = json.loads(batch.predicate)
        start, end, release = span["start"], span["end"], span.get("release")
        state = slot_state(self.url, self.slot)
        if state is None or (state.confirmed_flush or 0) > start:
            # The slot was dropped (or made anew) since the range was planned: the changes
            # from `start` are gone from the WAL it keeps. Never applied as if complete: the
            # batch ends superseded and the table is planned again, as a new snapshot.
            raise SourceChanged(
                f"{label}: replication slot {self.slot} no longer holds the changes from "
                f"{lsn_text(start)}; a new snapshot of the table is taken",
                status="superseded",
            )
        ensure_slot(self.url, self.slot)  # refuses a slot another consumer holds
        if release is not None:
            advance_slot(self.url, self.slot, release)
        key = self.spec.load.upsert_key or []
        columns = [(c, spark_type(kind)) for c, kind in columns_of(self.url, schema, name)]
        events = self._range_events().of((schema, name), start, end)
        if events is None:  # too large to hold here: an engine task reads this table's share
            frame = read_changes(
                spark,
                self.url,
                self.slot,
                self.publication,
                (schema, name),
                (start, end),
                columns,
                key,
            )
        else:
            frame = changes_frame(spark, events, columns, key)
        shown = f"{label} (changes {lsn_text(start)} to {lsn_text(end)})"
        return BatchRead(frame, label=shown, explain=task_error)

    def _range_events(self) -> RangeEvents:
        """The holder of the latest range's events, for every table of the pipeline (their
        columns as they are now, which the snapshot and every range read the same way), up
        to IN_PROCESS_LIMIT events a range or HAKIRI_CDC_IN_PROCESS_EVENTS (0: every range
        is read by the tables' engine tasks)."""
        from hakiri.spark.pg_reader import columns_of

        if self._ranges is None:
            schema, key = self.config.schema_name, self.spec.load.upsert_key or []
            tables = {
                (schema, t.name): ([c for c, _ in columns_of(self.url, schema, t.name)], key)
                for t in self.spec.table_specs()
            }
            limit = self.env.get(IN_PROCESS_ENV, "").strip()
            self._ranges = RangeEvents(
                self.url,
                self.slot,
                self.publication,
                tables,
                int(limit) if limit.isdigit() else IN_PROCESS_LIMIT,
            )
        return self._ranges


def _snapshot_batch(table: str, n: int) -> NewBatch:
    return NewBatch(f"{_SNAPSHOT}:{table}:{n}", table, _SNAPSHOT, predicate=json.dumps({"n": n}))


def _changes_batch(
    table: str, snapshot: int, start: int, end: int, release: int | None
) -> NewBatch:
    predicate = json.dumps(
        {"snapshot": snapshot, "start": start, "end": end, "release": release}, sort_keys=True
    )
    return NewBatch(
        f"{_CHANGES}:{table}:{lsn_text(start)}:{lsn_text(end)}",
        table,
        _CHANGES,
        predicate=predicate,
    )


def _number(snapshot: Batch) -> int:
    return int(json.loads(snapshot.predicate or "{}").get("n", 0))


def _applied_end(batches: list[Batch], snapshot: int) -> int | None:
    """The end of the last committed range read after snapshot number `snapshot`."""
    ends = [
        json.loads(b.predicate)["end"]
        for b in batches
        if b.kind == _CHANGES
        and b.predicate
        and b.status is BatchStatus.COMMITTED
        and json.loads(b.predicate).get("snapshot") == snapshot
    ]
    return max(ends) if ends else None


def _committed(snapshots: list[Batch]) -> bool:
    """Did a snapshot commit? (Then a missing slot was dropped after it.)"""
    return any(b.status is BatchStatus.COMMITTED for b in snapshots)
