"""`hakiri serve` as a real process: schedules fire, HTTP triggers run, manifest edits take
effect without a restart, backfill progress shows in the API, SIGTERM drains to exit 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hakiri.catalog.records import Batch, BatchStatus, Phase, RunStatus
from hakiri.catalog.store import Catalog
from tests.support.project import Project
from tests.support.serve import SERVE_SPARK, TOKEN, ServeProcess, files_manifest
from tests.support.tables import id_backfill_project

# A hang guard for a SIGTERM drain: drain_timeout (60s by default) and a margin for the
# shutdown after it. Not a measure of how fast serve stops.
DRAIN_GUARD_SECONDS = 120


def _files_project(root: Path, pg_url: str, schema: str, *, schedule: str | None) -> Project:
    project = Project(root, pg_url, schema)
    project.write("hakiri.toml", files_manifest(pg_url, schema, schedule=schedule))
    project.write("data/a.csv", "id,name\n1,ada\n2,grace\n")
    return project


def _catalog(root: Path) -> Catalog:
    return Catalog.open(f"sqlite:///{root / '.hakiri' / 'state.sqlite'}", migrate=False)


def _finished(serve: ServeProcess, run_id: str) -> dict | None:
    """The run as the API lists it, once it has ended."""
    runs = serve.get("/v1/pipelines/p/runs").json()
    return next((r for r in runs if r["run_id"] == run_id and r["ended_at"]), None)


def _loads(root: Path) -> list[tuple[str, int]]:
    """(trigger, rows) of the pipeline's finished runs that loaded rows, newest first."""
    with _catalog(root) as catalog:
        return [(r.trigger, r.row_count) for r in catalog.runs("p") if r.row_count]


def _count(project: Project, table: str) -> int:
    try:
        return project.query(f'SELECT count(*) FROM "{project.schema}"."{table}"')[0][0]
    except Exception:  # not created yet
        return 0


def test_a_schedule_fires_every_2s_and_manifest_edits_take_effect_without_a_restart(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = _files_project(tmp_path, pg_url, pg_schema, schedule="every 2s")
    with ServeProcess(tmp_path) as serve:
        serve.wait_ready()
        serve.wait_for(lambda: _count(project, "t") == 2, 120, "the first scheduled load")
        with _catalog(tmp_path) as catalog:
            first = catalog.last_fire("p")
            runs = catalog.runs("p")
        assert first is not None and first.slot.second % 2 == 0
        assert [(r.trigger, r.row_count) for r in runs] == [("schedule", 2)]

        # A new file is picked up by a scheduled run of its own, with no trigger. (Not
        # necessarily a slot after `first`: the slot after the one that loaded a.csv may
        # already be fired, its run not yet planned, when b.csv arrives.)
        project.write("data/b.csv", "id,name\n3,edsger\n")
        serve.wait_for(lambda: _count(project, "t") == 3, 60, "a later scheduled load")
        serve.wait_for(lambda: len(_loads(tmp_path)) == 2, 30, "the later run's record")
        assert _loads(tmp_path) == [("schedule", 1), ("schedule", 2)]  # newest first

        # An invalid edit is reported, and the last valid version keeps running.
        good = (tmp_path / "hakiri.toml").read_text()
        (tmp_path / "hakiri.toml").write_text(good + "\n[[pipeline]]\nid = 7\n")
        serve.wait_for(lambda: "manifest edit not applied" in serve.log, 30, "the invalid edit")
        assert serve.get("/readyz").json()["reload_error"]
        project.write("data/c.csv", "id,name\n4,barbara\n")
        serve.wait_for(lambda: _count(project, "t") == 4, 60, "a load under the last valid version")

        # A pipeline added on disk starts on its schedule; removed, it is retired.
        project.write("more/x.csv", "id,name\n10,alan\n11,kurt\n")
        project.write(
            "pipelines/q.toml",
            f"""
            id = "q"
            source = {{ connector = "files", config = {{ path = "more/*.csv", columns = {{ id = "bigint", name = "string" }} }} }}
            tables = [{{ name = "x", target = "t2" }}]
            destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}
            schedule = "every 2s"
            """,
        )
        (tmp_path / "hakiri.toml").write_text(good)
        serve.wait_for(lambda: "manifests reloaded: +q" in serve.log, 30, "the reload")
        assert serve.get("/readyz").json().get("reload_error") is None
        serve.wait_for(lambda: _count(project, "t2") == 2, 60, "the added pipeline's load")
        assert serve.get("/v1/pipelines/q").status_code == 200

        (tmp_path / "pipelines" / "q.toml").unlink()
        serve.wait_for(lambda: "q: in no manifest any more: retired" in serve.log, 30, "retire")
        with _catalog(tmp_path) as catalog:
            state = catalog.pipeline_state("q")
            assert state is not None and state.phase is Phase.RETIRED
        assert serve.get("/v1/pipelines/q").status_code == 404 or (
            serve.get("/v1/pipelines/q").json()["phase"] == "retired"
        )

        assert serve.terminate() == 0
    assert "Traceback" not in serve.log


def test_an_http_trigger_needs_the_token_and_starts_a_run(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = _files_project(tmp_path, pg_url, pg_schema, schedule=None)
    with ServeProcess(tmp_path, env={"HAKIRI_SERVE_TOKEN": TOKEN}) as serve:
        serve.wait_ready()
        assert serve.post("/v1/pipelines/p/runs").status_code == 401
        assert serve.post("/v1/pipelines/p/runs", token="wrong").status_code == 401
        assert _count(project, "t") == 0  # no schedule, no trigger: nothing ran

        accepted = serve.post("/v1/pipelines/p/runs", token=TOKEN, body={"reason": "new export"})
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]

        run = serve.wait_for(lambda: _finished(serve, run_id), 120, "the triggered run")
        assert (run["status"], run["row_count"], run["trigger"], run["trigger_reason"]) == (
            "success",
            2,
            "event",
            "new export",
        )
        assert _count(project, "t") == 2

        # Nothing new: the trigger is still answered, by a run that loaded nothing.
        again = serve.post("/v1/pipelines/p/runs", token=TOKEN).json()["run_id"]
        run = serve.wait_for(lambda: _finished(serve, again), 60, "the second triggered run")
        assert (run["status"], run["row_count"]) == ("success", 0)
        assert serve.post("/v1/pipelines/nope/runs", token=TOKEN).status_code == 404
        assert serve.terminate() == 0


def test_a_reload_that_adds_the_first_context_store_pipeline_runs_it(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    """serve's session starts for PostgreSQL pipelines only; a pipeline into the context store
    added later still finds delta-spark in it (jars cannot join a running engine)."""
    from deltalake import DeltaTable

    project = _files_project(tmp_path, pg_url, pg_schema, schedule=None)
    with ServeProcess(tmp_path, env={"HAKIRI_SERVE_TOKEN": TOKEN}) as serve:
        serve.wait_ready()
        first = serve.post("/v1/pipelines/p/runs", token=TOKEN).json()["run_id"]
        run = serve.wait_for(lambda: _finished(serve, first), 120, "the PostgreSQL run")
        assert run["status"] == "success"  # Spark is up now, started for PostgreSQL only

        project.write("local/x.csv", "id,name\n10,alan\n11,kurt\n12,ada\n")
        project.write(
            "pipelines/c.toml",
            """
            id = "c"
            source = { connector = "files", config = { path = "local/*.csv", columns = { id = "bigint", name = "string" } } }
            tables = [{ name = "x", target = "kept" }]
            """,
        )
        serve.wait_for(lambda: "manifests reloaded: +c" in serve.log, 30, "the reload")
        accepted = serve.post("/v1/pipelines/c/runs", token=TOKEN)
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]

        def finished() -> dict | None:
            runs = serve.get("/v1/pipelines/c/runs").json()
            return next((r for r in runs if r["run_id"] == run_id and r["ended_at"]), None)

        run = serve.wait_for(finished, 120, "the context-store run")
        assert (run["status"], run["row_count"]) == ("success", 3), run
        table = DeltaTable(str(tmp_path / ".hakiri" / "context" / "kept")).to_pyarrow_table()
        assert sorted(table.column("id").to_pylist()) == [10, 11, 12]
        assert serve.terminate() == 0
    assert "without delta-spark" not in serve.log


def test_backfill_progress_shows_in_the_api_while_serve_works_the_queue(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    chunks = 12
    project = id_backfill_project(
        tmp_path,
        pg_url,
        pg_schema,
        chunks=chunks,
        window=500,
        pipeline='schedule = "every 1s"',
        backfill="max_chunks_per_tick = 2",
        settings=SERVE_SPARK,
    )
    seen: list[dict] = []

    def progress() -> bool:
        status = serve.get("/v1/pipelines/p").json()
        seen.append(status)
        return status["phase"] == "streaming" and status["chunks"]["done"] == chunks

    with ServeProcess(tmp_path) as serve:
        serve.wait_ready()
        serve.wait_for(progress, 240, "the backfill to finish")
        midway = [
            s
            for s in seen
            if s["phase"] == "backfilling" and 0 < s["chunks"]["done"] < s["chunks"]["total"]
        ]
        assert midway, seen
        assert all(s["chunks"]["total"] == chunks for s in midway)
        assert project.query(f'SELECT count(*), count(DISTINCT id) FROM "{pg_schema}".dst') == [
            (500 * chunks, 500 * chunks)
        ]
        # Ticks of at most max_chunks_per_tick chunks each, all started by the schedule.
        with _catalog(tmp_path) as catalog:
            loading = [r for r in catalog.runs("p", limit=100) if r.row_count]
        assert len(loading) >= chunks // 2
        assert all(r.trigger == "schedule" and r.row_count <= 1000 for r in loading)
        assert serve.terminate() == 0
        assert "stopped" in serve.log


def test_sigterm_drains_claims_nothing_more_and_exits_0(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    chunks = 20
    project = id_backfill_project(
        tmp_path,
        pg_url,
        pg_schema,
        chunks=chunks,
        window=500,
        pipeline='schedule = "every 1s"',
        settings=SERVE_SPARK,
    )

    def committed() -> list[Batch]:
        with _catalog(tmp_path) as catalog:
            return catalog.batches("p", status=BatchStatus.COMMITTED)

    with ServeProcess(tmp_path) as serve:
        serve.wait_ready()
        serve.wait_for(lambda: len(committed()) >= 3, 120, "a few chunks")
        try:
            code = serve.terminate(seconds=DRAIN_GUARD_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"serve did not exit within {DRAIN_GUARD_SECONDS}s of SIGTERM:\n{serve.log}",
                pytrace=False,
            )
        assert code == 0, serve.log
        serve._reader.join(30)  # the log up to the exit: the reader may lag behind the process
    # It drained, then stopped: the chunk in flight finished within drain_timeout (60s), so
    # no claim had to be handed back.
    said = [line.split(" ", 1)[-1] for line in serve.lines]
    assert "draining: no new runs or chunk claims" in said, serve.log
    assert "stopped" in said[said.index("draining: no new runs or chunk claims") :], serve.log
    assert not [line for line in said if line.startswith("drain timed out")], serve.log

    with _catalog(tmp_path) as catalog:
        left = catalog.batches("p")
        runs = catalog.runs("p")
    done = [b for b in left if b.status is BatchStatus.COMMITTED]
    # The chunk in flight finished; nothing was claimed after it, nothing is left claimed.
    assert 3 <= len(done) < chunks
    assert not [b for b in left if b.status is BatchStatus.PROCESSING]
    assert runs[0].status is RunStatus.SUCCESS
    assert _count(project, "dst") == sum(b.rows or 0 for b in done) == 500 * len(done)

    # The next process picks the backfill up where serve stopped.
    assert project.cli("apply").exit_code == 0
    assert project.query(f'SELECT count(*), count(DISTINCT id) FROM "{pg_schema}".dst') == [
        (500 * chunks, 500 * chunks)
    ]


def test_a_drain_that_runs_out_of_time_hands_back_its_claims_at_once(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    """drain_timeout = "1s" and chunks of a million rows: the chunk in flight cannot finish, so
    serve hands its claim and the pipeline lease back before it exits; the next process takes
    the chunk at once (not after the 10-minute lease TTL) and the target ends exactly loaded."""
    chunks, window = 3, 1_000_000
    project = id_backfill_project(
        tmp_path,
        pg_url,
        pg_schema,
        chunks=chunks,
        window=window,
        pipeline='schedule = "every 1s"',
        settings=SERVE_SPARK + '\n[serve]\ndrain_timeout = "1s"\nlease_ttl = "10m"\n',
    )

    def batches(status: BatchStatus) -> list[Batch]:
        with _catalog(tmp_path) as catalog:
            return catalog.batches("p", status=status)

    with ServeProcess(tmp_path) as serve:
        serve.wait_ready()
        serve.wait_for(lambda: batches(BatchStatus.COMMITTED), 180, "a first chunk")
        serve.wait_for(lambda: batches(BatchStatus.PROCESSING), 60, "a chunk in flight")
        assert serve.terminate() == 0
    assert "drain timed out with p still loading; their claims are handed back" in serve.log

    with _catalog(tmp_path) as catalog:
        assert not catalog.batches("p", status=BatchStatus.PROCESSING)
        # The 10-minute lease is free now: another process may take the pipeline at once.
        assert catalog.acquire_lease("p", "another-replica", 60).acquired
        catalog.release_lease("p", "another-replica")

    assert project.cli("apply").exit_code == 0
    assert project.query(f'SELECT count(*), count(DISTINCT id) FROM "{pg_schema}".dst') == [
        (window * chunks, window * chunks)
    ]


def test_a_missed_slot_runs_once_at_start_up_and_a_restart_does_not_fire_it_again(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    # Once a year: the latest slot (1 January) was missed, and no new one comes during the test.
    project = _files_project(tmp_path, pg_url, pg_schema, schedule="0 0 1 1 *")
    env = {"HAKIRI_SERVE_TOKEN": TOKEN}
    with ServeProcess(tmp_path, env=env) as serve:
        serve.wait_ready()
        serve.wait_for(lambda: _count(project, "t") == 2, 120, "the missed slot's run")
        assert serve.terminate() == 0
    with _catalog(tmp_path) as catalog:
        fired = catalog.last_fire("p")
    assert fired is not None and (fired.slot.month, fired.slot.day, fired.slot.hour) == (1, 1, 0)

    project.write("data/b.csv", "id,name\n3,edsger\n")
    with ServeProcess(tmp_path, env=env) as serve:
        serve.wait_ready()
        # The process is up and running work: a trigger loads the new file...
        run_id = serve.post("/v1/pipelines/p/runs", token=TOKEN).json()["run_id"]
        serve.wait_for(lambda: _finished(serve, run_id), 120, "the triggered run")
        assert serve.terminate() == 0
    # ...but the slot fired before the restart did not fire again.
    with _catalog(tmp_path) as catalog:
        assert catalog.last_fire("p") == fired
        triggers = [r.trigger for r in catalog.runs("p")]
    assert sorted(triggers) == ["event", "schedule"]
    assert _count(project, "t") == 3
