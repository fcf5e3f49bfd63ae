"""Two `hakiri serve` replicas on one PostgreSQL catalog share a 40-chunk backfill; one is
SIGKILLed midway and the other finishes it. Loading is `append`, so a chunk loaded twice
would show as duplicate rows."""

from __future__ import annotations

from pathlib import Path

import psycopg

from hakiri.catalog.records import Batch, BatchStatus, RunStatus
from hakiri.catalog.store import Catalog
from tests.support.serve import SERVE_SPARK, ServeProcess, files_manifest
from tests.support.tables import id_backfill_project

CHUNKS, WINDOW = 40, 250


def _holder_pid(batch: Batch) -> int | None:
    parts = (batch.holder or "").split(":")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def test_two_replicas_share_a_backfill_and_one_finishes_it_after_the_other_is_killed(
    tmp_path: Path, pg_url: str, pg_schema: str, pg_catalog: str
) -> None:
    project = id_backfill_project(
        tmp_path,
        pg_url,
        pg_schema,
        chunks=CHUNKS,
        window=WINDOW,
        pipeline='schedule = "every 1s"',
        backfill="max_chunks_per_tick = 2",
        settings=f'[catalog]\nurl = "{pg_catalog}"\n\n[serve]\nlease_ttl = "6s"\n{SERVE_SPARK}',
    )
    catalog_url = pg_catalog.replace("postgresql://", "postgresql+psycopg://", 1)

    def chunks() -> list[Batch]:
        with Catalog.open(catalog_url, migrate=False) as catalog:
            return catalog.batches("p")

    def lease_pid() -> int | None:
        with psycopg.connect(pg_catalog) as conn:
            row = conn.execute("SELECT pid FROM pipeline_leases WHERE pipeline_id = 'p'").fetchone()
        return row[0] if row else None

    with ServeProcess(tmp_path) as first, ServeProcess(tmp_path) as second:
        first.wait_ready()
        second.wait_ready()
        replicas = {first.pid: first, second.pid: second}

        # Midway: a quarter of the chunks committed, by both replicas (they take turns at
        # the schedule's slots), and one of them inside a tick, loading a chunk.
        def midway() -> int | None:
            now = chunks()
            done = [b for b in now if b.status is BatchStatus.COMMITTED]
            loading = {_holder_pid(b) for b in now if b.status is BatchStatus.PROCESSING}
            holder = lease_pid()
            shared = {_holder_pid(b) for b in done} == set(replicas)
            inside = holder in replicas and holder in loading
            return holder if len(done) >= CHUNKS // 4 and shared and inside else None

        victim_pid = first.wait_for(midway, 240, "a quarter of the backfill")
        victim = replicas.pop(victim_pid)
        survivor = next(iter(replicas.values()))
        victim.kill()
        before = {b.batch_id: b for b in chunks()}
        committed_before = {k for k, b in before.items() if b.status is BatchStatus.COMMITTED}
        assert len(before) == CHUNKS and len(committed_before) < CHUNKS
        # What the victim died holding: its claims outlive it until the lease_ttl (6s) runs out.
        in_flight = {
            k: b
            for k, b in before.items()
            if b.status is BatchStatus.PROCESSING and _holder_pid(b) == victim_pid
        }

        def finished() -> bool:
            return all(b.status is BatchStatus.COMMITTED for b in chunks())

        # A hang guard: the survivor takes over once the victim's lease has expired.
        survivor.wait_for(finished, 240, "the survivor to finish the backfill")
        assert survivor.terminate() == 0

    rows = project.query(f'SELECT count(*), count(DISTINCT id) FROM "{pg_schema}".dst')
    assert rows == [(CHUNKS * WINDOW, CHUNKS * WINDOW)]
    assert project.query(
        f'SELECT count(*) FROM ((SELECT * FROM "{pg_schema}".src EXCEPT '
        f'SELECT * FROM "{pg_schema}".dst)) x'
    ) == [(0,)]

    after = {b.batch_id: b for b in chunks()}
    # Chunks committed before the kill were not loaded again.
    for batch_id in committed_before:
        assert after[batch_id].run_id == before[batch_id].run_id
        assert after[batch_id].committed_at == before[batch_id].committed_at
    # The rest were loaded by the survivor; at most the chunk the victim had in flight was
    # claimed a second time (and loaded once).
    rest = set(after) - committed_before
    assert {_holder_pid(after[k]) for k in rest} == {survivor.pid}
    assert sum(b.attempt > 1 for b in after.values()) <= 1
    # The victim's claims were taken over, not waited on forever: each chunk it had in flight
    # was claimed again by the survivor (one more attempt) and committed, and the victim's run
    # was closed as interrupted.
    for batch_id, held in in_flight.items():
        taken = after[batch_id]
        assert taken.status is BatchStatus.COMMITTED, taken
        assert _holder_pid(taken) == survivor.pid and taken.attempt == held.attempt + 1, taken
    with Catalog.open(catalog_url, migrate=False) as catalog:
        runs = {r.run_id: r for r in catalog.runs("p", limit=500)}
    for run_id in {b.run_id for b in in_flight.values()}:
        assert run_id is not None
        assert (runs[run_id].status, runs[run_id].error_kind) == (RunStatus.FAILED, "Interrupted")


def test_a_slot_won_by_a_replica_that_died_before_its_run_is_fired_by_another(
    tmp_path: Path, pg_url: str, pg_schema: str, pg_catalog: str
) -> None:
    """A daily schedule: at start-up, the latest missed slot fires once. The first replica
    wins it and is killed right after (HAKIRI_CRASH_AT=after_fire_claim ends it as SIGKILL
    would); the second replica sees a slot whose run never started, takes it over and runs it,
    instead of waiting a day for the next one."""
    from tests.support.project import Project

    project = Project(tmp_path, pg_url, pg_schema)
    project.write(
        "hakiri.toml",
        files_manifest(
            pg_url,
            pg_schema,
            name="sparse",
            load='{ mode = "append" }',
            schedule="0 2 * * *",
            catalog=pg_catalog,
        ),
    )
    project.write("data/a.csv", "id,name\n1,ada\n2,grace\n")
    catalog_url = pg_catalog.replace("postgresql://", "postgresql+psycopg://", 1)

    with ServeProcess(tmp_path, env={"HAKIRI_CRASH_AT": "after_fire_claim"}) as doomed:
        assert doomed.process.wait(timeout=180) == 137, doomed.log
    assert "crashing at after_fire_claim" in doomed.log
    with Catalog.open(catalog_url, migrate=False) as catalog:
        won = catalog.last_fire("p")
        assert won is not None and won.started_at is None
        assert won.holder.split(":")[1] == str(doomed.pid)
        assert catalog.runs("p") == []

    with ServeProcess(tmp_path) as survivor:
        survivor.wait_ready()
        survivor.wait_for(
            lambda: (
                project.query(f'SELECT count(*) FROM "{pg_schema}".t')[0][0] == 2
                if project.query(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 't'",
                    pg_schema,
                )
                else None
            ),
            120,
            "the taken-over slot's run",
        )
        assert "which never started it: running it here" in survivor.log
        assert survivor.terminate() == 0

    with Catalog.open(catalog_url, migrate=False) as catalog:
        fired = catalog.last_fire("p")
        assert fired is not None and fired.slot == won.slot and fired.started_at is not None
        [run] = catalog.runs("p")
        assert run.trigger == "schedule"
    assert project.rows("t") == [(1, "ada"), (2, "grace")]
