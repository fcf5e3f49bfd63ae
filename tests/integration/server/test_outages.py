"""`hakiri serve` through an outage of its catalog: the catalog's PostgreSQL is stopped and
started again under a running serve. Serve backs off, says so once (not twice a second),
reports it on /readyz, and recovers by itself: the file that arrived meanwhile is loaded
exactly once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.postgres import TestPostgres
from tests.support.project import Project
from tests.support.serve import ServeProcess, files_manifest

pytestmark = pytest.mark.integration


def test_serve_rides_out_a_catalog_outage_and_loads_what_came_meanwhile_once(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    with TestPostgres() as catalog_pg:
        project = Project(tmp_path, pg_url, pg_schema)
        project.write(
            "hakiri.toml",
            files_manifest(
                pg_url,
                pg_schema,
                name="outage",
                load='{ mode = "append" }',
                schedule="every 1s",
                catalog=catalog_pg.url,
            ),
        )
        project.write("data/a.csv", "id,name\n1,ada\n2,grace\n")

        def rows() -> list[tuple[int, str]]:
            try:
                return project.rows("t")
            except Exception:  # not created yet
                return []

        with ServeProcess(tmp_path) as serve:
            serve.wait_ready()
            serve.wait_for(lambda: rows() == [(1, "ada"), (2, "grace")], 120, "the first file")

            catalog_pg.halt()
            project.write("data/b.csv", "id,name\n3,edsger\n")
            # 503 as soon as the catalog stops answering; `failing` once a tick has failed.
            down = serve.wait_for(
                lambda: (
                    (r := serve.get("/readyz")).status_code == 503
                    and "tick" in r.json().get("failing", {})
                    and r.json()
                ),
                30,
                "a 503 that names the failing tick",
            )
            assert down["catalog"] is False and down["ready"] is False
            time.sleep(8)  # sixteen ticks' worth of outage
            during = serve.log
            catalog_pg.resume()

            serve.wait_for(lambda: len(rows()) == 3, 120, "the file that came during the outage")
            serve.wait_for(lambda: serve.get("/readyz").status_code == 200, 60, "ready again")
            assert "failing" not in serve.get("/readyz").json()
            assert serve.terminate() == 0

        # The same row loaded once: nothing lost, nothing doubled.
        assert project.rows("t") == [(1, "ada"), (2, "grace"), (3, "edsger")]
        failures = [line for line in during.splitlines() if "tick failed" in line]
        assert 1 <= len(failures) <= 2, during  # said once (and not once a tick)
        assert "said again every 60s while it lasts" in failures[0]
        assert "the scheduler recovered after" in serve.log
