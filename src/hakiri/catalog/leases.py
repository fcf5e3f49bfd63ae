"""Who may work on what: batch claims (one worker per batch), pipeline leases (one run each).

A lease is a holder name plus an expiry. A holder that dies simply stops
renewing; once its lease expires anyone may take the work over. Times come
from this process's clock, so replicas sharing a PostgreSQL catalog need
synchronised clocks (NTP); TTLs are meant to be tens of seconds, not milliseconds.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, and_, case, delete, or_, select, update

from hakiri.catalog.db import Database
from hakiri.catalog.records import Batch, BatchStatus, Lease
from hakiri.catalog.schema import batches, pipeline_leases
from hakiri.errors import CatalogError, LeaseHeld


def utcnow() -> datetime:
    return datetime.now(UTC)


def batch_from_row(row: Row[Any]) -> Batch:
    return Batch(
        batch_id=row.batch_id,
        pipeline_id=row.pipeline_id,
        table_name=row.table_name,
        kind=row.kind,
        status=BatchStatus(row.status),
        attempt=row.attempt,
        seq=row.seq,
        file_path=row.file_path,
        content_hash=row.content_hash,
        predicate=row.predicate,
        generation=row.generation,
        size_bytes=row.size_bytes,
        holder=row.holder,
        lease_expires_at=row.lease_expires_at,
        run_id=row.run_id,
        rows=row.rows,
        error=row.error,
        created_at=row.created_at,
        started_at=row.started_at,
        committed_at=row.committed_at,
    )


def _key(pipeline_id: str, batch_id: str) -> Any:
    return and_(batches.c.pipeline_id == pipeline_id, batches.c.batch_id == batch_id)


def _held_by(holder: str) -> Any:
    return and_(batches.c.status == BatchStatus.PROCESSING.value, batches.c.holder == holder)


class BatchClaims:
    """Claiming batches, keeping them, and handing them back. Mixed into Catalog."""

    _db: Database

    def claim_batch(
        self, pipeline_id: str, holder: str, ttl_seconds: float, *, run_id: str | None = None
    ) -> Batch | None:
        """The lowest-seq batch that is pending or whose lease expired; None when there is none."""

        def work(conn: Connection) -> Batch | None:
            now = utcnow()
            claimable = and_(
                batches.c.pipeline_id == pipeline_id,
                or_(
                    batches.c.status == BatchStatus.PENDING.value,
                    and_(
                        batches.c.status == BatchStatus.PROCESSING.value,
                        batches.c.lease_expires_at < now,
                    ),
                ),
            )
            values: dict[str, Any] = {
                "status": BatchStatus.PROCESSING.value,
                "holder": holder,
                "lease_expires_at": now + timedelta(seconds=ttl_seconds),
                "attempt": batches.c.attempt + 1,
                "started_at": now,
                "error": None,
            }
            if run_id is not None:
                values["run_id"] = run_id
            # SKIP LOCKED on PostgreSQL; on SQLite BEGIN IMMEDIATE already excludes other writers.
            # The UPDATE repeats the condition, so a row that changed under us is not taken.
            for _ in range(3):
                candidate = conn.execute(
                    select(batches.c.batch_id)
                    .where(claimable)
                    .order_by(batches.c.seq, batches.c.batch_id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                ).first()
                if candidate is None:
                    return None
                claimed = conn.execute(
                    update(batches)
                    .where(_key(pipeline_id, candidate.batch_id), claimable)
                    .values(values)
                    .returning(*batches.c)
                ).first()
                if claimed is not None:
                    return batch_from_row(claimed)
            return None

        return self._db.write(work)

    def heartbeat(self, pipeline_id: str, batch_id: str, holder: str, ttl_seconds: float) -> bool:
        """Extend the claim; False when `holder` no longer holds it or its lease already ran out."""

        def work(conn: Connection) -> bool:
            now = utcnow()
            result = conn.execute(
                update(batches)
                .where(_key(pipeline_id, batch_id), _held_by(holder))
                .where(batches.c.lease_expires_at >= now)
                .values(lease_expires_at=now + timedelta(seconds=ttl_seconds))
            )
            return result.rowcount == 1

        return self._db.write(work)

    def mark_committed(
        self, pipeline_id: str, batch_id: str, holder: str, *, rows: int | None = None
    ) -> bool:
        """Record the destination commit; allowed while `holder` still holds the batch, even
        past its lease if nobody took it over. False when somebody did (their ledger check
        will find this commit); True also when the batch is committed already."""
        return self._finish(
            pipeline_id,
            batch_id,
            _held_by(holder),
            status=BatchStatus.COMMITTED.value,
            rows=rows,
            committed_at=utcnow(),
            error=None,
        )

    def mark_committed_from_ledger(self, pipeline_id: str, batch_id: str) -> bool:
        """A batch the destination's ledger already has (found on restart), whoever held it."""
        return self._finish(
            pipeline_id,
            batch_id,
            batches.c.status != BatchStatus.COMMITTED.value,
            status=BatchStatus.COMMITTED.value,
            committed_at=utcnow(),
            error=None,
        )

    def mark_failed(self, pipeline_id: str, batch_id: str, holder: str, error: str) -> bool:
        """Stop retrying this batch (until `reset_batches`); False if `holder` lost it."""
        return self._finish(
            pipeline_id, batch_id, _held_by(holder), status=BatchStatus.FAILED.value, error=error
        )

    def mark_retired(
        self, pipeline_id: str, batch_id: str, holder: str, status: BatchStatus, reason: str
    ) -> bool:
        """End a claimed batch as superseded or gone (its file changed or vanished before it
        committed); False if `holder` lost it."""
        if not BatchStatus(status).retired:
            raise ValueError(f"{status!r} is not a status a batch retires with")
        return self._finish(
            pipeline_id,
            batch_id,
            _held_by(holder),
            status=BatchStatus(status).value,
            holder=None,
            error=reason,
        )

    def release(self, pipeline_id: str, batch_id: str, holder: str) -> bool:
        """Hand a claimed batch back as pending (e.g. on shutdown); its attempt count stays."""
        return self._finish(
            pipeline_id, batch_id, _held_by(holder), status=BatchStatus.PENDING.value, holder=None
        )

    def _finish(self, pipeline_id: str, batch_id: str, allowed: Any, **values: Any) -> bool:
        def work(conn: Connection) -> bool:
            key = _key(pipeline_id, batch_id)
            changed = conn.execute(
                update(batches).where(key, allowed).values(lease_expires_at=None, **values)
            ).rowcount
            if changed:
                return True
            status = conn.execute(select(batches.c.status).where(key)).scalar_one_or_none()
            if status is None:
                raise CatalogError(
                    f"pipeline `{pipeline_id}` has no batch `{batch_id}` in the catalog",
                    "batches must be added (add_batches) before they are claimed or marked",
                )
            return status == values["status"] == BatchStatus.COMMITTED.value

        return self._db.write(work)

    def reclaim_expired(self, pipeline_id: str | None = None) -> int:
        """Processing batches whose lease ran out go back to pending; returns how many."""

        def work(conn: Connection) -> int:
            stmt = update(batches).where(
                batches.c.status == BatchStatus.PROCESSING.value,
                batches.c.lease_expires_at < utcnow(),
            )
            if pipeline_id is not None:
                stmt = stmt.where(batches.c.pipeline_id == pipeline_id)
            values = {"status": BatchStatus.PENDING.value, "holder": None, "lease_expires_at": None}
            return conn.execute(stmt.values(values)).rowcount

        return self._db.write(work)


class PipelineLeases:
    """One run per pipeline at a time, across processes and hosts. Mixed into Catalog."""

    _db: Database

    def acquire_lease(self, pipeline_id: str, holder: str, ttl_seconds: float) -> Lease:
        """Take the lease if it is free, expired, or already ours (then it is renewed)."""

        def work(conn: Connection) -> Lease:
            now = utcnow()
            t = pipeline_leases
            insert = self._db.insert(t).values(
                pipeline_id=pipeline_id,
                holder=holder,
                host=socket.gethostname(),
                pid=os.getpid(),
                acquired_at=now,
                expires_at=now + timedelta(seconds=ttl_seconds),
            )
            new = insert.excluded
            upsert = insert.on_conflict_do_update(
                index_elements=[t.c.pipeline_id],
                set_={
                    "holder": new.holder,
                    "host": new.host,
                    "pid": new.pid,
                    # renewing our own lease keeps the time we first took it
                    "acquired_at": case(
                        (t.c.holder == new.holder, t.c.acquired_at), else_=new.acquired_at
                    ),
                    "expires_at": new.expires_at,
                },
                where=or_(t.c.expires_at < now, t.c.holder == holder),
            ).returning(t.c.holder)
            granted = conn.execute(upsert).first() is not None
            row = conn.execute(select(t).where(t.c.pipeline_id == pipeline_id)).one()
            return Lease(
                pipeline_id=pipeline_id,
                acquired=granted,
                holder=row.holder,
                host=row.host,
                since=row.acquired_at,
                expires_at=row.expires_at,
            )

        return self._db.write(work)

    def renew_lease(self, pipeline_id: str, holder: str, ttl_seconds: float) -> bool:
        """Extend our lease; False when it is no longer ours or has already expired."""

        def work(conn: Connection) -> bool:
            now = utcnow()
            t = pipeline_leases
            result = conn.execute(
                update(t)
                .where(t.c.pipeline_id == pipeline_id, t.c.holder == holder, t.c.expires_at >= now)
                .values(expires_at=now + timedelta(seconds=ttl_seconds))
            )
            return result.rowcount == 1

        return self._db.write(work)

    def lease_held(self, pipeline_id: str) -> bool:
        """True while some process holds the pipeline's lease (a run is loading)."""
        t = pipeline_leases
        stmt = select(t.c.holder).where(t.c.pipeline_id == pipeline_id, t.c.expires_at >= utcnow())
        return self._db.read(lambda conn: conn.execute(stmt).first()) is not None

    def release_lease(self, pipeline_id: str, holder: str) -> bool:
        """Give the lease up; False when it was not ours (any more)."""
        t = pipeline_leases
        stmt = delete(t).where(t.c.pipeline_id == pipeline_id, t.c.holder == holder)
        return self._db.write(lambda conn: conn.execute(stmt).rowcount == 1)

    def wait_for_lease(
        self,
        pipeline_id: str,
        holder: str,
        ttl_seconds: float,
        timeout_seconds: float,
        poll: float = 0.2,
    ) -> Lease:
        """acquire_lease until granted; LeaseHeld after `timeout_seconds`."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            lease = self.acquire_lease(pipeline_id, holder, ttl_seconds)
            if lease.acquired:
                return lease
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                since = lease.since.strftime("%Y-%m-%d %H:%M:%S UTC")
                raise LeaseHeld(
                    f"pipeline `{pipeline_id}` is already running on {lease.host} since {since}",
                    "wait for it to finish, or pass a longer --lease-timeout",
                )
            time.sleep(min(poll, remaining))
