"""An in-memory destination for the engine's fast tests: the commit protocol without a database.

`FakeDestination` keeps what a real destination keeps, as Python data: staging areas (a
batch's rows, staged and not yet visible), target tables, and a load ledger of committed
batch ids. Its commit is one atomic step: the new table and the ledger entry replace the old
ones together, between checkpoint('before_dest_commit') and checkpoint('after_dest_commit').
So a crash at any point is observable afterwards (a staging area left behind, a target
untouched, a batch in the ledger that the catalog never marked), as it is in PostgreSQL or
a Delta table. It offers the write primitives insert, replace and merge
(`spec.modes.ModeWriter`), so it loads append, truncate, upsert and any mode built on those
with their real semantics, and refuses every other mode with a LoadError naming it.

It types its columns as the destination kind it stands in for (`kind_of(kind).column_type`),
so the engine's schema guard decides as it would for that kind. The conformance suite
(tests/integration/destinations/test_conformance.py) runs it beside PostgreSQL and the
context store: the fake is only as good as that suite proves it faithful.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hakiri.destinations.base import (
    ChangeCount,
    Checkpoint,
    LoadRequest,
    LoadResult,
    QuarantinedRow,
    QuarantineTable,
    SchemaChange,
    StagedBatch,
    TargetColumn,
    TargetObservation,
)
from hakiri.destinations.commit_checks import duplicate_keys_error
from hakiri.destinations.gates import check_empty_source
from hakiri.destinations.kinds import kind_of
from hakiri.errors import HookError, LoadError
from hakiri.spec.hooks import RefreshMatViewHook, SqlHook
from hakiri.spec.modes import Written

__all__ = ["FakeDestination", "FakeTable"]

Row = dict[str, Any]
TableKey = tuple[str | None, str]  # (schema, table)
LedgerKey = tuple[str, str, str | None, str, str]  # project, pipeline, schema, table, batch


@dataclass
class FakeTable:
    columns: list[TargetColumn]
    rows: list[Row] = field(default_factory=list)
    primary_key: tuple[str, ...] = ()

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


@dataclass(frozen=True)
class _Staged:
    columns: tuple[TargetColumn, ...]
    rows: tuple[Row, ...]


class FakeDestination:
    """A `Destination` (hakiri.destinations.base) held in memory; see the module docstring."""

    # The write primitives (`spec.modes.ModeWriter`) it offers: the modes that need no other load.
    PRIMITIVES = frozenset({"insert", "replace", "merge"})

    def __init__(self, kind: str = "context") -> None:
        self.kind = kind
        self.tables: dict[TableKey, FakeTable] = {}
        self.staging: dict[str, _Staged] = {}
        self.ledger: dict[LedgerKey, int] = {}  # -> rows the batch loaded
        self.staged: list[str] = []  # batch ids, every time one was staged
        self.commits = 0  # atomic commits made (an already committed batch makes none)
        self._failures: list[BaseException] = []  # raised by the next commits, in order
        self._lock = threading.Lock()  # chunk workers commit from several threads

    # ------------------------------------------------------------------ for tests

    def fail_next_commit(self, error: BaseException) -> None:
        """The next commit of a batch not yet committed raises `error` before it changes
        anything, as a lost connection or a lock timeout would."""
        self._failures.append(error)

    def observe(self, table: str, schema: str | None = None) -> TargetObservation:
        """The target as `plan` would see it, had it inspected this destination."""
        found = self.tables.get((schema, table))
        if found is None:
            return TargetObservation(table, schema, exists=False)
        return TargetObservation(
            table, schema, True, tuple(found.columns), found.primary_key, (), len(found.rows)
        )

    def rows(self, table: str, schema: str | None = None) -> list[Row]:
        """The committed rows of a target, sorted by their values (None first)."""
        found = self.tables.get((schema, table))
        rows = [dict(r) for r in found.rows] if found else []
        return sorted(rows, key=lambda r: tuple((v is not None, str(v)) for v in r.values()))

    # ------------------------------------------------------------------ the protocol

    def stage_progress(self, request: LoadRequest) -> None:
        return None

    def stage(self, rows: Any, request: LoadRequest) -> StagedBatch:
        """Collect the rows that pass the rules (`rows` is a RuleCheck) into a staging area."""
        self._check_mode(request)
        if request.quarantine is not None or request.validators or request.replay_of:
            raise LoadError(
                "the fake destination keeps no quarantine, runs no dataset validators and "
                "replays nothing",
                "test those against PostgreSQL or the context store",
            )
        clean, _ = rows.split()
        columns = tuple(
            TargetColumn(f.name, self._column_type(f.dataType.simpleString()))
            for f in clean.schema.fields
        )
        collected = tuple(row.asDict() for row in clean.collect())
        name = f"_fake_stg_{uuid.uuid4().hex[:12]}"
        with self._lock:
            self.staging[name] = _Staged(columns, collected)
            self.staged.append(request.batch_id)
        return StagedBatch(
            batch_id=request.batch_id,
            staging_schema=request.target_schema,
            staging_table=name,
            rows=len(collected),
            columns=columns,
        )

    def commit(
        self, staged: StagedBatch, request: LoadRequest, checkpoint: Checkpoint
    ) -> LoadResult:
        with self._lock:
            try:
                if self._ledger_key(request) in self.ledger:
                    return LoadResult(rows_loaded=0, already_committed=True)
                if self._failures:
                    raise self._failures.pop(0)
                batch = self.staging.get(staged.staging_table)
                if batch is None:
                    raise LoadError(
                        f"the staging area {staged.staging_table} of batch {staged.batch_id} "
                        "is gone",
                        "run the load again: the batch is staged anew",
                    )
                self._check_mode(request)
                check_empty_source(request.load, len(batch.rows), self._qualified(request))
                before = self.tables.get(self._table_key(request))
                table, loaded, deleted = self._loaded(before, batch, request)
                checkpoint("before_dest_commit")
                # The commit: the target and the ledger change together, or neither does.
                self.tables[self._table_key(request)] = table
                self.ledger[self._ledger_key(request)] = loaded
                self.commits += 1
            finally:
                self.staging.pop(staged.staging_table, None)
        checkpoint("after_dest_commit")
        return LoadResult(rows_loaded=loaded, created_target=before is None, rows_deleted=deleted)

    def is_committed(self, request: LoadRequest) -> bool:
        return self._ledger_key(request) in self.ledger

    def forget_target(self, request: LoadRequest) -> None:
        with self._lock:
            target = self._ledger_key(request)[:4]
            for key in [k for k in self.ledger if k[:4] == target]:
                del self.ledger[key]

    def discard(self, staged: StagedBatch) -> None:
        with self._lock:
            self.staging.pop(staged.staging_table, None)

    def run_sql_hooks(
        self, slot: str, hooks: Sequence[SqlHook | RefreshMatViewHook], schema: str | None
    ) -> None:
        if hooks:
            raise HookError(
                f"{slot} hooks: the fake destination runs no SQL",
                "use webhook hooks in the engine's tests",
            )

    def quarantined(
        self,
        table: QuarantineTable,
        pipeline_id: str,
        *,
        run_id: str | None = None,
        limit: int = 50,
    ) -> list[QuarantinedRow] | None:
        return None  # it never has a quarantine table

    def target_columns(self, request: LoadRequest) -> tuple[TargetColumn, ...] | None:
        found = self.tables.get(self._table_key(request))
        return tuple(found.columns) if found else None

    def evolve(self, request: LoadRequest, change: SchemaChange) -> None:
        """Renames, then added columns (NULL in the rows there are), then new types; all of it
        or nothing, as one transaction would. The values keep their Python type."""
        if change.empty:
            return
        with self._lock:
            key = self._table_key(request)
            if key not in self.tables:
                raise LoadError(f"no target {self._qualified(request)} to evolve", "load it first")
            table = copy.deepcopy(self.tables[key])
            for old, new in change.rename:
                table.columns = [
                    TargetColumn(new, c.type, c.nullable) if c.name == old else c
                    for c in table.columns
                ]
                table.rows = [
                    {(new if k == old else k): v for k, v in r.items()} for r in table.rows
                ]
            for added in change.add:
                if added.name in table.column_names:
                    raise LoadError(
                        f"column {added.name} of {self._qualified(request)} already exists",
                        "plan again",
                    )
                table.columns.append(added)
                for row in table.rows:
                    row[added.name] = None
            retyped = {r.column: r.new_type for r in (*change.widen, *change.retype)}
            table.columns = [
                TargetColumn(c.name, retyped.get(c.name, c.type), c.nullable) for c in table.columns
            ]
            self.tables[key] = table

    def count_deletes(self, frame: Any, request: LoadRequest) -> tuple[int, int] | None:
        """(target rows whose upsert key the snapshot `frame` lacks, target rows); None without
        a target."""
        found = self.tables.get(self._table_key(request))
        if found is None:
            return None
        key = list(request.load.upsert_key or ())
        if not key:
            raise LoadError(
                f"load mode {request.load.mode.value}: the fake destination counts deletes of "
                "upsert only",
                "count deletes against PostgreSQL or the context store",
            )
        kept = {tuple(r[k] for k in key) for r in frame.select(*key).collect()}
        gone = sum(1 for r in found.rows if tuple(r.get(k) for k in key) not in kept)
        return gone, len(found.rows)

    def count_changes(self, frame: Any, request: LoadRequest) -> ChangeCount | None:
        """upsert only, in the driver (the fake's rows are in memory): batch rows inserted,
        updated, unchanged, and the deletes `count_deletes` counts."""
        found = self.tables.get(self._table_key(request))
        key = list(request.load.upsert_key or ())
        if found is None or not key:
            return None
        mine = {tuple(r.get(k) for k in key): r for r in found.rows}
        names = {c.name for c in found.columns}
        compared = [c for c in frame.columns if c in names and c not in key]
        insert = update = unchanged = 0
        for row in frame.collect():
            had = mine.get(tuple(row[k] for k in key))
            if had is None:
                insert += 1
            elif any(had.get(c) != row[c] for c in compared):
                update += 1
            else:
                unchanged += 1
        if not request.load.detects_deletes:
            return ChangeCount(insert, update, unchanged)
        gone, scoped = self.count_deletes(frame, request) or (0, 0)
        return ChangeCount(insert, update, unchanged, gone, scoped)

    def read_for_replay(
        self, spark: Any, table: QuarantineTable, request: LoadRequest, of_run: str
    ) -> Any:
        return None  # no quarantine table, so nothing to replay

    # ------------------------------------------------------------------ load modes

    def _loaded(
        self, before: FakeTable | None, batch: _Staged, request: LoadRequest
    ) -> tuple[FakeTable, int, int]:
        """The target as the load mode leaves it (a copy), rows loaded, rows deleted."""
        load = request.load
        if before is None:  # created from the staged columns, its key from upsert_key
            table = FakeTable(list(batch.columns), [], tuple(load.primary_key() or ()))
        else:
            table = copy.deepcopy(before)
        # An explicit column list: the columns in both; the target's others are NULL.
        shared = [c.name for c in batch.columns if c.name in table.column_names]
        incoming = [
            {name: row.get(name) if name in shared else None for name in table.column_names}
            for row in batch.rows
        ]
        written = load.strategy.write(load, _FakeWriter(self, table, incoming, request))
        return table, written.rows, written.deleted

    def _merged(
        self,
        table: FakeTable,
        incoming: list[Row],
        request: LoadRequest,
        key: Sequence[str],
        *,
        update: bool,
    ) -> FakeTable:
        missing = [k for k in key if k not in table.column_names]
        if missing:
            raise LoadError(
                f"upsert_key column(s) {', '.join(missing)} are not in the target "
                f"{self._qualified(request)}",
                "add them to the target, or change upsert_key",
            )
        if set(key) >= set(table.column_names):
            raise LoadError(
                f"upsert_key ({', '.join(key)}) covers every column of "
                f"{self._qualified(request)}: there is nothing to update",
                "leave at least one column out of upsert_key, or use append",
            )
        counts: dict[tuple[Any, ...], int] = {}
        for row in incoming:
            values = tuple(row[k] for k in key)
            counts[values] = counts.get(values, 0) + 1
        repeated = sorted(
            ((v, n) for v, n in counts.items() if n > 1), key=lambda item: str(item[0])
        )
        if repeated:
            raise duplicate_keys_error(key, repeated[:3], len(repeated), request.source_label)
        at = {tuple(r[k] for k in key): i for i, r in enumerate(table.rows)}
        for row in incoming:
            values = tuple(row[k] for k in key)
            if values in at:
                if update:
                    table.rows[at[values]] = row
            else:
                at[values] = len(table.rows)
                table.rows.append(row)
        return table

    # ------------------------------------------------------------------ helpers

    def _check_mode(self, request: LoadRequest) -> None:
        load = request.load
        if not set(load.strategy.needs) <= self.PRIMITIVES or load.deletes:
            mode = f"{load.mode}" + (f" with deletes = {load.deletes!r}" if load.deletes else "")
            raise LoadError(
                f"load mode {mode}: the fake destination writes by "
                f"{', '.join(sorted(self.PRIMITIVES))} only, without deletes",
                "test this mode against PostgreSQL or the context store",
            )

    def _column_type(self, spark_type: str) -> str:
        return kind_of(self.kind).column_type(spark_type) or spark_type

    @staticmethod
    def _table_key(request: LoadRequest) -> TableKey:
        return (request.target_schema, request.target_table)

    @staticmethod
    def _ledger_key(request: LoadRequest) -> LedgerKey:
        return (
            request.project,
            request.pipeline_id,
            request.target_schema,
            request.target_table,
            request.batch_id,
        )

    @staticmethod
    def _qualified(request: LoadRequest) -> str:
        return ".".join(filter(None, (request.target_schema, request.target_table)))


class _FakeWriter:
    """The fake's write primitives, on a copy of the target (`_loaded`); the others refuse."""

    def __init__(
        self, fake: FakeDestination, table: FakeTable, incoming: list[Row], request: LoadRequest
    ) -> None:
        self.fake, self.table, self.incoming, self.request = fake, table, incoming, request

    def insert(self) -> Written:
        self.table.rows.extend(self.incoming)
        return Written(len(self.incoming))

    def replace(self) -> Written:
        self.table.rows = list(self.incoming)
        return Written(len(self.incoming))

    def merge(self, key: Sequence[str], *, update: bool) -> Written:
        self.fake._merged(self.table, self.incoming, self.request, key, update=update)
        return Written(len(self.incoming))

    def __getattr__(self, primitive: str) -> Any:
        raise LoadError(
            f"the fake destination has no {primitive!r} write",
            "test this mode against PostgreSQL or the context store",
        )
