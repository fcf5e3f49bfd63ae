"""The catalog's API: one class, one SQL code path for SQLite and PostgreSQL.

    with Catalog.open(url, migrate=True) as catalog:     # apply, run, serve
        catalog.record_applied(...)
    with Catalog.open(url, migrate=False) as catalog:    # plan, status: never writes a schema
        catalog.pipeline_states()

Batch claims and pipeline leases live in `leases.py`, dialect differences in `db.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any

from sqlalchemy import Connection, Row, func, select, update
from sqlalchemy.exc import IntegrityError

from hakiri.catalog import migrate as migrations
from hakiri.catalog import schema as tables
from hakiri.catalog.db import Database, file_failure, parse_url, sqlite_path
from hakiri.catalog.leases import BatchClaims, PipelineLeases, batch_from_row, utcnow
from hakiri.catalog.records import (
    Alert,
    Batch,
    BatchCounts,
    BatchStatus,
    NewBatch,
    Phase,
    PipelineState,
    Retirement,
    Rewind,
    RunRecord,
    RunStatus,
    ScheduleFire,
    SchemaEvent,
    TargetMark,
    ViewDefinition,
    ViewRecord,
)
from hakiri.errors import CatalogError, CatalogOutdated
from hakiri.spec.interpolate import mask_url
from hakiri.spec.views import view_sql_hash

__all__ = ["Catalog"]

_CHUNK = 500  # rows or ids per statement: well under SQLite's bound-parameter limit
_QUEUED = tuple(s.value for s in BatchStatus if s.queued)
_RETIRED = tuple(s.value for s in BatchStatus if s.retired)


class Catalog(BatchClaims, PipelineLeases):
    """The control-plane store. Open with `Catalog.open`; use as a context manager."""

    def __init__(self, db: Database, *, initialized: bool, dialect: str | None = None) -> None:
        self._db = db
        self._initialized = initialized
        self._dialect = dialect or db.dialect

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, migrate: bool) -> Catalog:
        """Open the catalog at a SQLAlchemy URL.

        migrate=True (apply, run, serve): create it or upgrade it to this hakiri's schema,
        serialised across processes. migrate=False (plan, status): never write; a catalog
        that does not exist yet reads as empty (`initialized` False, no file created), one
        at another schema revision raises CatalogOutdated.
        """
        display = mask_url(url)
        parsed = parse_url(url, display)
        path = sqlite_path(parsed) if parsed.get_backend_name() == "sqlite" else None
        if path is not None and not migrate and not path.exists():
            return cls._empty(display, "sqlite")
        if path is not None and migrate:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise file_failure(display, exc) from exc
        db = Database.connect(parsed, display)
        try:
            if migrate:
                with db.migrating() as conn:
                    revision = migrations.current_revision(conn)
                    if revision != migrations.HEAD_REVISION:
                        _check_revision(revision, display, migrating=True)
                        migrations.upgrade(conn)
                return cls(db, initialized=True)
            revision = db.read(migrations.current_revision)
            if revision is None:
                db.close()
                return cls._empty(display, db.dialect)
            _check_revision(revision, display, migrating=False)
            return cls(db, initialized=True)
        except BaseException:
            db.close()
            raise

    @classmethod
    def _empty(cls, display: str, dialect: str) -> Catalog:
        """Stands in for a catalog that does not exist yet: private, in memory, at head, empty."""
        db = Database.memory(display)
        with db.migrating() as conn:
            migrations.upgrade(conn)
        return cls(db, initialized=False, dialect=dialect)

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql': the configured catalog's, even while it does not exist."""
        return self._dialect

    @property
    def initialized(self) -> bool:
        """False when the catalog did not exist and reads come from an empty stand-in."""
        return self._initialized

    @property
    def url_display(self) -> str:
        """The configured catalog URL with any password masked."""
        return self._db.display

    def ping(self) -> bool:
        """True when the catalog database answers a trivial query (serve's /readyz)."""
        try:
            self._db.read(lambda conn: conn.execute(select(1)).scalar())
        except Exception:
            return False
        return True

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- pipelines -----------------------------------------------------------

    def pipeline_states(self) -> dict[str, PipelineState]:
        rows = self._db.read(
            lambda conn: conn.execute(
                select(tables.pipelines).order_by(tables.pipelines.c.pipeline_id)
            ).all()
        )
        return {row.pipeline_id: _pipeline(row) for row in rows}

    def pipeline_state(self, pipeline_id: str) -> PipelineState | None:
        stmt = select(tables.pipelines).where(tables.pipelines.c.pipeline_id == pipeline_id)
        row = self._db.read(lambda conn: conn.execute(stmt).first())
        return None if row is None else _pipeline(row)

    def record_applied(
        self, pipeline_id: str, spec: dict[str, Any], spec_hash: str, phase: Phase
    ) -> None:
        """The spec as applied (placeholders unexpanded), its hash and phase."""
        now = utcnow()
        values = {
            "spec_hash": spec_hash,
            "applied_spec": spec,
            "phase": Phase(phase).value,
            "applied_at": now,
            "updated_at": now,
        }
        stmt = self._db.insert(tables.pipelines).values(pipeline_id=pipeline_id, **values)
        stmt = stmt.on_conflict_do_update(
            index_elements=[tables.pipelines.c.pipeline_id], set_=values
        )
        self._db.write(lambda conn: conn.execute(stmt))

    def set_phase(self, pipeline_id: str, phase: Phase) -> None:
        stmt = (
            update(tables.pipelines)
            .where(tables.pipelines.c.pipeline_id == pipeline_id)
            .values(phase=Phase(phase).value, updated_at=utcnow())
        )
        if self._db.write(lambda conn: conn.execute(stmt).rowcount) == 0:
            raise CatalogError(
                f"pipeline `{pipeline_id}` has never been applied to catalog {self.url_display}",
                "run `hakiri apply` for it first",
            )

    def retire(self, pipeline_id: str) -> None:
        """Mark the pipeline retired; its runs, cursors and batches are kept."""
        self.set_phase(pipeline_id, Phase.RETIRED)

    # -- runs ----------------------------------------------------------------

    def start_run(
        self,
        pipeline_id: str,
        *,
        run_id: str | None = None,
        trace_id: str | None = None,
        trigger: str | None = None,
    ) -> RunRecord:
        """Record a run as running. A `run_id` that `request_run` left pending starts that run
        (keeping its trigger); any other id is a new run."""
        now = utcnow()
        run_id = run_id or uuid.uuid4().hex
        t = tables.pipeline_run

        def work(conn: Connection) -> Row[Any]:
            started = conn.execute(
                update(t)
                .where(t.c.run_id == run_id, t.c.status == RunStatus.PENDING.value)
                .values(started_at=now, status=RunStatus.RUNNING.value, trace_id=trace_id)
            )
            if started.rowcount != 1:
                conn.execute(
                    t.insert().values(
                        run_id=run_id,
                        pipeline_id=pipeline_id,
                        started_at=now,
                        status=RunStatus.RUNNING.value,
                        trace_id=trace_id,
                        trigger=trigger,
                    )
                )
            return conn.execute(select(t).where(t.c.run_id == run_id)).one()

        return _run(self._db.write(work))

    def request_run(
        self, pipeline_id: str, *, trigger: str = "event", reason: str | None = None
    ) -> RunRecord:
        """A run asked for (an HTTP trigger), left pending until a serve replica starts it."""
        run = RunRecord(
            run_id=uuid.uuid4().hex,
            pipeline_id=pipeline_id,
            started_at=utcnow(),
            status=RunStatus.PENDING,
            trigger=trigger,
            trigger_reason=reason,
        )
        stmt = tables.pipeline_run.insert().values(
            run_id=run.run_id,
            pipeline_id=pipeline_id,
            started_at=run.started_at,
            status=run.status.value,
            trigger=trigger,
            trigger_reason=reason,
        )
        self._db.write(lambda conn: conn.execute(stmt))
        return run

    def pending_runs(self, pipeline_id: str | None = None) -> list[RunRecord]:
        """Requested runs not started yet, oldest first."""
        t = tables.pipeline_run
        stmt = (
            select(t)
            .where(t.c.status == RunStatus.PENDING.value)
            .order_by(t.c.started_at, t.c.run_id)
        )
        if pipeline_id is not None:
            stmt = stmt.where(t.c.pipeline_id == pipeline_id)
        return [_run(row) for row in self._db.read(lambda conn: conn.execute(stmt).all())]

    # -- schedules -----------------------------------------------------------

    def last_fire(self, pipeline_id: str) -> ScheduleFire | None:
        """The latest schedule slot fired for the pipeline, by any process."""
        t = tables.schedule_fires
        stmt = select(t).where(t.c.pipeline_id == pipeline_id)
        row = self._db.read(lambda conn: conn.execute(stmt).first())
        return (
            None
            if row is None
            else ScheduleFire(row.pipeline_id, row.slot, row.fired_at, row.holder, row.started_at)
        )

    def claim_fire(self, pipeline_id: str, slot: datetime, holder: str) -> bool:
        """Record `slot` as fired; True only for the one caller that moved the pipeline's last
        fire forward to it (a slot is fired once across replicas and restarts)."""
        t = tables.schedule_fires

        def work(conn: Connection) -> bool:
            now = utcnow()
            values = {"slot": slot, "fired_at": now, "holder": holder, "started_at": None}
            first = self._db.insert(t).values(pipeline_id=pipeline_id, **values)
            first = first.on_conflict_do_nothing(index_elements=[t.c.pipeline_id])
            if conn.execute(first.returning(t.c.pipeline_id)).first() is not None:
                return True
            later = update(t).where(t.c.pipeline_id == pipeline_id, t.c.slot < slot)
            return conn.execute(later.values(**values)).rowcount == 1

        return self._db.write(work)

    def fire_started(self, pipeline_id: str, slot: datetime, holder: str) -> None:
        """The run of the slot `holder` fired has started: no other replica takes it over."""
        t = tables.schedule_fires
        stmt = (
            update(t)
            .where(t.c.pipeline_id == pipeline_id, t.c.slot == slot, t.c.holder == holder)
            .values(started_at=utcnow())
        )
        self._db.write(lambda conn: conn.execute(stmt))

    def take_over_fire(self, pipeline_id: str, slot: datetime, dead: str, holder: str) -> bool:
        """Fire `slot` again as `holder`: `dead` won it and never started its run. True for the
        one replica that took it over."""
        t = tables.schedule_fires
        stmt = (
            update(t)
            .where(
                t.c.pipeline_id == pipeline_id,
                t.c.slot == slot,
                t.c.holder == dead,
                t.c.started_at.is_(None),
            )
            .values(holder=holder, fired_at=utcnow())
        )
        return self._db.write(lambda conn: conn.execute(stmt).rowcount == 1)

    def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        row_count: int | None = None,
        bytes: int | None = None,
        error_kind: str | None = None,
        error_msg: str | None = None,
        quality: dict[str, Any] | None = None,
    ) -> RunRecord:
        def work(conn: Connection) -> Row[Any] | None:
            conn.execute(
                update(tables.pipeline_run)
                .where(tables.pipeline_run.c.run_id == run_id)
                .values(
                    status=RunStatus(status).value,
                    ended_at=utcnow(),
                    row_count=row_count,
                    bytes=bytes,
                    error_kind=error_kind,
                    error_msg=error_msg,
                    quality=quality,
                )
            )
            return conn.execute(
                select(tables.pipeline_run).where(tables.pipeline_run.c.run_id == run_id)
            ).first()

        row = self._db.write(work)
        if row is None:
            raise CatalogError(
                f"no run `{run_id}` in catalog {self.url_display}",
                "finish only runs that start_run created",
            )
        return _run(row)

    def runs(self, pipeline_id: str | None = None, limit: int = 20) -> list[RunRecord]:
        """Newest first."""
        stmt = select(tables.pipeline_run).order_by(
            tables.pipeline_run.c.started_at.desc(), tables.pipeline_run.c.run_id.desc()
        )
        if pipeline_id is not None:
            stmt = stmt.where(tables.pipeline_run.c.pipeline_id == pipeline_id)
        rows = self._db.read(lambda conn: conn.execute(stmt.limit(limit)).all())
        return [_run(row) for row in rows]

    # -- cursors -------------------------------------------------------------

    def get_cursor(self, pipeline_id: str, table_name: str) -> dict[str, Any] | None:
        stmt = select(tables.pipeline_cursor.c.cursor_json).where(
            tables.pipeline_cursor.c.pipeline_id == pipeline_id,
            tables.pipeline_cursor.c.table_name == table_name,
        )
        return self._db.read(lambda conn: conn.execute(stmt).scalar_one_or_none())

    def set_cursor(self, pipeline_id: str, table_name: str, cursor: dict[str, Any]) -> None:
        """Replace the table's cursor (last write wins)."""
        stmt = self._cursor_upsert(pipeline_id, table_name, cursor)
        self._db.write(lambda conn: conn.execute(stmt))

    def _cursor_upsert(self, pipeline_id: str, table_name: str, cursor: dict[str, Any]) -> Any:
        values = {"cursor_json": cursor, "updated_at": utcnow()}
        stmt = self._db.insert(tables.pipeline_cursor).values(
            pipeline_id=pipeline_id, table_name=table_name, **values
        )
        return stmt.on_conflict_do_update(
            index_elements=[
                tables.pipeline_cursor.c.pipeline_id,
                tables.pipeline_cursor.c.table_name,
            ],
            set_=values,
        )

    def cursors(self, pipeline_id: str) -> dict[str, dict[str, Any]]:
        stmt = (
            select(tables.pipeline_cursor.c.table_name, tables.pipeline_cursor.c.cursor_json)
            .where(tables.pipeline_cursor.c.pipeline_id == pipeline_id)
            .order_by(tables.pipeline_cursor.c.table_name)
        )
        rows = self._db.read(lambda conn: conn.execute(stmt).all())
        return {row.table_name: row.cursor_json for row in rows}

    # -- batches (claims and their leases: leases.py) ------------------------

    def add_batches(
        self,
        pipeline_id: str,
        batches: Sequence[NewBatch],
        run_id: str | None = None,
        *,
        cursor: tuple[str, dict[str, Any]] | None = None,
        rewind: Rewind | None = None,
        retire: Sequence[Retirement] = (),
    ) -> int:
        """Persist batches before any data moves; ones already known are left as they are,
        except a superseded or gone one, which is queued again (its content is current again:
        a file changed back, or the same bytes turned up under another name).

        Returns how many were new or queued again. Claim order (seq) follows the order given
        here. `retire` ends queued batches (pending or failed) as superseded or gone first.
        `cursor` (table, cursor) and `rewind` are written in the same transaction, so a
        chunk plan and the cursor it was planned up to never disagree.
        """
        unique = list({b.batch_id: b for b in reversed(batches)}.values())[::-1]
        if not unique and cursor is None and rewind is None and not retire:
            return 0

        def work(conn: Connection) -> int:
            for retirement in retire:
                conn.execute(
                    update(tables.batches)
                    .where(
                        tables.batches.c.pipeline_id == pipeline_id,
                        tables.batches.c.batch_id == retirement.batch_id,
                        tables.batches.c.status.in_(_QUEUED),
                    )
                    .values(
                        status=retirement.status.value,
                        error=retirement.reason,
                        holder=None,
                        lease_expires_at=None,
                    )
                )
            if cursor is not None:
                conn.execute(self._cursor_upsert(pipeline_id, *cursor))
            if rewind is not None:
                conn.execute(
                    tables.backfill_rewinds.insert().values(
                        pipeline_id=rewind.pipeline_id,
                        table_name=rewind.table_name,
                        range_from=rewind.range_from,
                        range_to=rewind.range_to,
                        reason=rewind.reason,
                        generation=rewind.generation,
                        chunks=rewind.chunks,
                        created_at=utcnow(),
                    )
                )
            if not unique:
                return 0
            now = utcnow()
            last = conn.execute(
                select(func.max(tables.batches.c.seq)).where(
                    tables.batches.c.pipeline_id == pipeline_id
                )
            ).scalar_one()
            seq = (last or 0) + 1
            added = 0
            for chunk in _chunks(unique):
                rows = []
                for b in chunk:
                    rows.append(_new_batch_row(pipeline_id, b, seq, run_id, now))
                    seq += 1
                insert = self._db.insert(tables.batches).values(rows)
                fresh = {
                    name: insert.excluded[name]
                    for name in ("seq", "file_path", "size_bytes", "run_id", "created_at")
                }
                stmt = insert.on_conflict_do_update(
                    index_elements=[tables.batches.c.pipeline_id, tables.batches.c.batch_id],
                    set_={
                        **fresh,
                        "status": BatchStatus.PENDING.value,
                        "holder": None,
                        "lease_expires_at": None,
                        "error": None,
                        "rows": None,
                        "committed_at": None,
                    },
                    where=tables.batches.c.status.in_(_RETIRED),
                ).returning(tables.batches.c.batch_id)
                added += len(conn.execute(stmt).all())
            return added

        return self._db.write(work)

    def batch(self, pipeline_id: str, batch_id: str) -> Batch | None:
        stmt = select(tables.batches).where(
            tables.batches.c.pipeline_id == pipeline_id, tables.batches.c.batch_id == batch_id
        )
        row = self._db.read(lambda conn: conn.execute(stmt).first())
        return None if row is None else batch_from_row(row)

    def batches(self, pipeline_id: str, status: BatchStatus | None = None) -> list[Batch]:
        """In claim order."""
        stmt = (
            select(tables.batches)
            .where(tables.batches.c.pipeline_id == pipeline_id)
            .order_by(tables.batches.c.seq, tables.batches.c.batch_id)
        )
        if status is not None:
            stmt = stmt.where(tables.batches.c.status == BatchStatus(status).value)
        return [batch_from_row(row) for row in self._db.read(lambda c: c.execute(stmt).all())]

    def batch_counts(self, pipeline_id: str) -> BatchCounts:
        stmt = (
            select(tables.batches.c.status, func.count())
            .where(tables.batches.c.pipeline_id == pipeline_id)
            .group_by(tables.batches.c.status)
        )
        counts = {row[0]: row[1] for row in self._db.read(lambda c: c.execute(stmt).all())}
        return BatchCounts(**{status.value: counts.get(status.value, 0) for status in BatchStatus})

    def committed_hashes(self, pipeline_id: str, table_name: str | None = None) -> dict[str, str]:
        """file_path -> content_hash of committed file batches (the latest commit per path)."""
        stmt = (
            select(tables.batches.c.file_path, tables.batches.c.content_hash)
            .where(
                tables.batches.c.pipeline_id == pipeline_id,
                tables.batches.c.status == BatchStatus.COMMITTED.value,
                tables.batches.c.file_path.is_not(None),
                tables.batches.c.content_hash.is_not(None),
            )
            .order_by(tables.batches.c.committed_at, tables.batches.c.seq)
        )
        if table_name is not None:
            stmt = stmt.where(tables.batches.c.table_name == table_name)
        return {row[0]: row[1] for row in self._db.read(lambda c: c.execute(stmt).all())}

    def reset_batches(self, pipeline_id: str, batch_ids: Iterable[str]) -> int:
        """Back to pending (e.g. failed ones, to retry); attempts are kept. Returns how many."""
        ids = list(dict.fromkeys(batch_ids))

        def work(conn: Connection) -> int:
            changed = 0
            for chunk in _chunks(ids):
                changed += conn.execute(
                    update(tables.batches)
                    .where(
                        tables.batches.c.pipeline_id == pipeline_id,
                        tables.batches.c.batch_id.in_(chunk),
                    )
                    .values(
                        status=BatchStatus.PENDING.value,
                        holder=None,
                        lease_expires_at=None,
                        error=None,
                        rows=None,
                        committed_at=None,
                    )
                ).rowcount
            return changed

        return self._db.write(work)

    # -- schema log and alerts -----------------------------------------------

    def log_schema_event(
        self,
        pipeline_id: str,
        table_name: str,
        kind: str,
        detail: dict[str, Any],
        run_id: str | None = None,
    ) -> SchemaEvent:
        created = utcnow()
        stmt = (
            tables.schema_log.insert()
            .values(
                pipeline_id=pipeline_id,
                table_name=table_name,
                kind=kind,
                detail=detail,
                run_id=run_id,
                created_at=created,
            )
            .returning(tables.schema_log.c.id)
        )
        event_id = self._db.write(lambda conn: conn.execute(stmt).scalar_one())
        return SchemaEvent(pipeline_id, table_name, kind, dict(detail), run_id, created, event_id)

    def schema_events(self, pipeline_id: str) -> list[SchemaEvent]:
        """Oldest first."""
        stmt = (
            select(tables.schema_log)
            .where(tables.schema_log.c.pipeline_id == pipeline_id)
            .order_by(tables.schema_log.c.created_at, tables.schema_log.c.id)
        )
        return [
            SchemaEvent(r.pipeline_id, r.table_name, r.kind, r.detail, r.run_id, r.created_at, r.id)
            for r in self._db.read(lambda conn: conn.execute(stmt).all())
        ]

    def rewinds(self, pipeline_id: str) -> list[Rewind]:
        """Oldest first."""
        t = tables.backfill_rewinds
        stmt = select(t).where(t.c.pipeline_id == pipeline_id).order_by(t.c.created_at, t.c.id)
        return [
            Rewind(
                r.pipeline_id,
                r.table_name,
                r.range_from,
                r.range_to,
                r.reason,
                r.generation,
                r.chunks,
                r.created_at,
                r.id,
            )
            for r in self._db.read(lambda conn: conn.execute(stmt).all())
        ]

    # -- views ---------------------------------------------------------------

    def live_views(self) -> dict[str, ViewRecord]:
        """Name -> the live version of each view apply recorded and did not drop, by name."""
        t = tables.views
        stmt = select(t).where(t.c.dropped_at.is_(None)).order_by(t.c.name)
        return {r.name: _view(r) for r in self._db.read(lambda conn: conn.execute(stmt).all())}

    def view_versions(self, name: str | None = None) -> list[ViewRecord]:
        """Every recorded version (of `name`), by name then version."""
        t = tables.views
        stmt = select(t).order_by(t.c.name, t.c.version)
        if name is not None:
            stmt = stmt.where(t.c.name == name)
        return [_view(r) for r in self._db.read(lambda conn: conn.execute(stmt).all())]

    def record_views(
        self, put: Sequence[ViewDefinition], drop: Sequence[str] = ()
    ) -> list[ViewRecord]:
        """In one transaction: each of `put` becomes the live version of its name (the next
        number; the one it replaces stops being live), each of `drop` stops being live. The
        records written, `put` first, then the dropped ones."""
        t = tables.views
        now = utcnow()

        def work(conn: Connection) -> list[ViewRecord]:
            written = []
            for view in put:
                last = conn.execute(
                    select(func.max(t.c.version)).where(t.c.name == view.name)
                ).scalar()
                conn.execute(
                    update(t)
                    .where(t.c.name == view.name, t.c.dropped_at.is_(None))
                    .values(dropped_at=now)
                )
                record = ViewRecord(
                    view.name,
                    (last or 0) + 1,
                    view.sql,
                    view.description,
                    view_sql_hash(view.sql),
                    tuple(view.reads),
                    now,
                )
                conn.execute(
                    t.insert().values(
                        name=record.name,
                        version=record.version,
                        sql=record.sql,
                        description=record.description,
                        sql_hash=record.sql_hash,
                        reads=list(record.reads),
                        applied_at=now,
                    )
                )
                written.append(record)
            for name in drop:
                live = conn.execute(
                    select(t).where(t.c.name == name, t.c.dropped_at.is_(None))
                ).first()
                if live is None:
                    continue
                conn.execute(
                    update(t)
                    .where(t.c.name == name, t.c.version == live.version)
                    .values(dropped_at=now)
                )
                written.append(replace(_view(live), dropped_at=now))
            return written

        try:
            return self._db.write(work)
        except IntegrityError:
            raise CatalogError(
                f"another apply recorded views in catalog {self.url_display} at the same time",
                "run hakiri plan to see where the views stand, then apply again",
            ) from None

    # -- target marks (drift) -------------------------------------------------

    def mark_target(self, mark: TargetMark) -> None:
        """Record how a target looks after hakiri loaded it (clears what serve alerted)."""
        t = tables.target_marks
        values = {
            "target": mark.target,
            "columns": [list(c) for c in mark.columns],
            "primary_key": list(mark.primary_key),
            "row_count": mark.row_count,
            "run_id": mark.run_id,
            "marked_at": utcnow(),
            "alerted": None,
            "identity": mark.identity,
        }
        stmt = self._db.insert(t).values(
            pipeline_id=mark.pipeline_id, table_name=mark.table_name, **values
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[t.c.pipeline_id, t.c.table_name], set_=values
        )
        self._db.write(lambda conn: conn.execute(stmt))

    def forget_mark(self, pipeline_id: str, table_name: str) -> None:
        t = tables.target_marks
        stmt = t.delete().where(t.c.pipeline_id == pipeline_id, t.c.table_name == table_name)
        self._db.write(lambda conn: conn.execute(stmt))

    def target_marks(self, pipeline_id: str) -> dict[str, TargetMark]:
        """Table name -> its mark."""
        t = tables.target_marks
        stmt = select(t).where(t.c.pipeline_id == pipeline_id)
        return {
            r.table_name: TargetMark(
                r.pipeline_id,
                r.table_name,
                r.target,
                tuple((name, type_) for name, type_ in r.columns),
                tuple(r.primary_key),
                r.row_count,
                r.run_id,
                r.marked_at,
                r.alerted,
                r.identity,
            )
            for r in self._db.read(lambda conn: conn.execute(stmt).all())
        }

    def set_drift_alerted(self, pipeline_id: str, table_name: str, fingerprint: str) -> bool:
        """Note that serve alerted about this drift; False when another replica did first (or a
        load marked the target again meanwhile)."""
        t = tables.target_marks
        stmt = (
            update(t)
            .where(
                t.c.pipeline_id == pipeline_id,
                t.c.table_name == table_name,
                (t.c.alerted.is_(None)) | (t.c.alerted != fingerprint),
            )
            .values(alerted=fingerprint)
        )
        return bool(self._db.write(lambda conn: conn.execute(stmt).rowcount))

    def clear_drift_alerted(self, pipeline_id: str, table_name: str) -> None:
        t = tables.target_marks
        stmt = (
            update(t)
            .where(t.c.pipeline_id == pipeline_id, t.c.table_name == table_name)
            .values(alerted=None)
        )
        self._db.write(lambda conn: conn.execute(stmt))

    def add_alert(
        self,
        severity: str,
        kind: str,
        message: str,
        *,
        pipeline_id: str | None = None,
        run_id: str | None = None,
    ) -> Alert:
        created = utcnow()
        stmt = (
            tables.alerts.insert()
            .values(
                severity=severity,
                kind=kind,
                message=message,
                pipeline_id=pipeline_id,
                run_id=run_id,
                created_at=created,
            )
            .returning(tables.alerts.c.id)
        )
        alert_id = self._db.write(lambda conn: conn.execute(stmt).scalar_one())
        return Alert(severity, kind, message, pipeline_id, run_id, created, alert_id)

    def alerts(
        self,
        *,
        since: datetime | None = None,
        pipeline_id: str | None = None,
        kind: str | None = None,
        limit: int = 100,
    ) -> list[Alert]:
        """Newest first; `since` is inclusive."""
        stmt = (
            select(tables.alerts)
            .order_by(tables.alerts.c.created_at.desc(), tables.alerts.c.id.desc())
            .limit(limit)
        )
        if since is not None:
            stmt = stmt.where(tables.alerts.c.created_at >= since)
        if pipeline_id is not None:
            stmt = stmt.where(tables.alerts.c.pipeline_id == pipeline_id)
        if kind is not None:
            stmt = stmt.where(tables.alerts.c.kind == kind)
        return [
            Alert(r.severity, r.kind, r.message, r.pipeline_id, r.run_id, r.created_at, r.id)
            for r in self._db.read(lambda conn: conn.execute(stmt).all())
        ]


def _check_revision(revision: str | None, display: str, *, migrating: bool) -> None:
    """Raise unless a catalog at `revision` can be used (migrating=False) or upgraded (True)."""
    head = migrations.HEAD_REVISION
    if revision is None or revision == head:
        return
    known = migrations.is_known_revision(revision)
    # Revisions are numbered 0001, 0002, ...: a lower number is an older schema even when
    # this hakiri no longer ships its migration.
    older = known or (revision.isdigit() and int(revision) < int(head))
    if not older:
        raise CatalogOutdated(
            f"catalog {display} is at schema revision {revision}, newer than this hakiri's ({head})",
            "upgrade hakiri to the version that last migrated this catalog, or newer",
        )
    if not migrating:
        raise CatalogOutdated(
            f"catalog {display} is at schema revision {revision}; this hakiri needs {head}",
            "run `hakiri apply` to migrate it (plan never migrates a catalog)",
        )
    if not known:
        raise CatalogOutdated(
            f"catalog {display} is at schema revision {revision}, which this hakiri cannot migrate from",
            "migrate it with the hakiri release that introduced the next revision first",
        )


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    return (items[i : i + _CHUNK] for i in range(0, len(items), _CHUNK))


def _new_batch_row(
    pipeline_id: str, b: NewBatch, seq: int, run_id: str | None, now: datetime
) -> dict[str, Any]:
    return {
        "pipeline_id": pipeline_id,
        "batch_id": b.batch_id,
        "seq": seq,
        "table_name": b.table_name,
        "kind": b.kind,
        "file_path": b.file_path,
        "content_hash": b.content_hash,
        "predicate": b.predicate,
        "generation": b.generation,
        "size_bytes": b.size_bytes,
        "status": BatchStatus.PENDING.value,
        "attempt": 0,
        "holder": None,
        "lease_expires_at": None,
        "run_id": run_id,
        "rows": None,
        "error": None,
        "created_at": now,
        "started_at": None,
        "committed_at": None,
    }


def _view(row: Row[Any]) -> ViewRecord:
    return ViewRecord(
        row.name,
        row.version,
        row.sql,
        row.description,
        row.sql_hash,
        tuple(row.reads),
        row.applied_at,
        row.dropped_at,
    )


def _pipeline(row: Row[Any]) -> PipelineState:
    return PipelineState(
        pipeline_id=row.pipeline_id,
        spec_hash=row.spec_hash,
        applied_spec=row.applied_spec,
        phase=Phase(row.phase),
        applied_at=row.applied_at,
    )


def _run(row: Row[Any]) -> RunRecord:
    return RunRecord(
        run_id=row.run_id,
        pipeline_id=row.pipeline_id,
        started_at=row.started_at,
        status=RunStatus(row.status),
        ended_at=row.ended_at,
        row_count=row.row_count,
        bytes=row.bytes,
        error_kind=row.error_kind,
        error_msg=row.error_msg,
        trace_id=row.trace_id,
        quality=row.quality,
        trigger=row.trigger,
        trigger_reason=row.trigger_reason,
    )
