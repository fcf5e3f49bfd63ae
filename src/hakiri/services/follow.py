"""`hakiri apply --follow ID`: one long-lived process that keeps a cdc_mirror pipeline's
targets following its source.

The process loads the project, opens the catalog and starts the engine session once, then
runs the pipeline again and again (`engine.runner.PipelineRunner`, the run `hakiri apply`
makes, with the same exactly-once protocol): each round plans one WAL range for every table
(up to where the server's WAL is flushed), which the source peeks and decodes once for all
of them, and loads it; a round that found nothing waits `interval` seconds before the next.
What a separate `hakiri apply` pays per range (a process start, an engine session, one
decode per table, a new PostgreSQL connection for each question: `pgpool`) is paid once.

A round that fails (the source or the target unreachable, another process holding the
pipeline's lease) is reported and tried again after a pause that doubles up to a minute;
the rounds that follow recover what it left through the destination's ledger, as an apply
after a crash does. `stop` (set by SIGTERM or SIGINT)
ends the loop: the round in flight claims no more batches, finishes the one it is loading
(its commit is one transaction, whole or not at all), hands back its pipeline lease, and
`follow` returns.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from hakiri import observability
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.engine.controls import Outcome, RunControls
from hakiri.engine.run_context import RunContext
from hakiri.errors import HakiriError, PipelineNotFound
from hakiri.services.apply import publish_store, run_one
from hakiri.services.runtime import LazySpark
from hakiri.spec.loader import load_project

__all__ = ["FOLLOW_MODE", "follow"]

FOLLOW_MODE = "cdc_mirror"
_MAX_PAUSE_SECONDS = 60.0


def follow(
    root: Path,
    pipeline_id: str,
    *,
    stop: threading.Event,
    interval: float = 0.5,
    env: Mapping[str, str] | None = None,
    on_round: Callable[[Outcome], None] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> int:
    """Follow the pipeline until `stop` is set; returns the rounds that loaded something.
    `on_round` is told every round that loaded rows, recovered a batch or failed;
    `on_start` the engine once its session is up."""
    env = os.environ if env is None else env
    observability.configure(env)
    project = load_project(root, env)
    spec = project.pipelines.get(pipeline_id)
    if spec is None:
        raise PipelineNotFound(f"no pipeline `{pipeline_id}`", "`hakiri validate` lists them")
    if spec.load.mode.value != FOLLOW_MODE:
        raise HakiriError(
            f"apply --follow follows a change stream, and pipeline `{pipeline_id}` loads with "
            f"mode {spec.load.mode.value}",
            f"run `hakiri apply {pipeline_id}` (or `hakiri serve` on a schedule); --follow is "
            "for cdc_mirror pipelines",
        )
    project.require_variables([spec.id])
    from hakiri import pgpool  # psycopg: imported by the commands that talk to PostgreSQL

    url = catalog_url(project.root, project.settings.catalog.url, env)
    spark = LazySpark(project, env=env)
    run = RunContext.of(project, env, spark.get)
    loaded = 0
    failures = 0
    try:
        # The same questions to the same servers every round: their connections are kept.
        with Catalog.open(url, migrate=True) as catalog, pgpool.keep_open():
            spark.get()  # up before the first round: a range waits for nothing but its load
            if on_start is not None:
                on_start(run.engine)
            while not stop.is_set():
                controls = RunControls(draining=stop, trigger="follow")
                outcome = run_one(run, spec, catalog, 0.0, None, controls)
                if outcome.status == "failed":
                    failures += 1
                    if on_round is not None:
                        on_round(outcome)
                    stop.wait(min(interval * 2**failures, _MAX_PAUSE_SECONDS))
                    continue
                failures = 0
                if outcome.batches or outcome.recovered or outcome.rows or outcome.deleted:
                    loaded += 1
                    publish_store(project, [outcome], env)
                    if on_round is not None:
                        on_round(outcome)
                else:
                    stop.wait(interval)
    finally:
        spark.stop()
    return loaded
