"""OpenLineage run events from real `hakiri apply` processes, received by an HTTP server on
loopback: START then COMPLETE (or FAIL) with one run id, the source and target datasets as the
naming spec names them, their schema, the rows loaded, and the column lineage of a transform
chain. A lineage endpoint that refuses connections costs one warning, never the load."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.project import Project
from tests.support.tables import table_project

# a -> b, c = b * 2 + d, d dropped, c cast: each target column's source columns
TRANSFORMS = """
transforms = [
  { op = "rename", columns = { a = "b" } },
  { op = "with_columns", columns = { c = "b * 2 + d" } },
  { op = "drop", columns = ["d"] },
  { op = "cast", columns = { c = "bigint" } },
]
"""
ROWS = 25


class Collector:
    """An OpenLineage endpoint: keeps each POSTed event (path, JSON body)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        received = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.path, json.loads(body)))
                self.send_response(201)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def bodies(self) -> list[dict[str, Any]]:
        return [body for _, body in self.events]


@pytest.fixture
def collector() -> Iterator[Collector]:
    found = Collector()
    found.thread.start()
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()


def _project(tmp_path: Path, pg_url: str, pg_schema: str, rules: str = "") -> Project:
    project = table_project(tmp_path, pg_url, pg_schema, incremental=None, body=TRANSFORMS + rules)
    project.query(
        f'CREATE TABLE "{pg_schema}".src (id bigint PRIMARY KEY, a int, d int, label text)'
    )
    project.query(
        f"INSERT INTO \"{pg_schema}\".src SELECT g, g, 10 * g, 'row ' || g "
        f"FROM generate_series(1, {ROWS}) g"
    )
    return project


def _apply(project: Project, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(project.root)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )


def _postgres(pg_url: str) -> tuple[str, str]:
    """The suite's server as OpenLineage names it: postgres://host:port, and its database."""
    url = urlsplit(pg_url)
    return f"postgres://{url.hostname}:{url.port}", url.path.lstrip("/")


def test_a_run_sends_start_then_complete_with_datasets_schema_rows_and_column_lineage(
    tmp_path: Path, pg_url: str, pg_schema: str, collector: Collector
) -> None:
    project = _project(tmp_path, pg_url, pg_schema)
    done = _apply(project, OPENLINEAGE_URL=collector.url, OPENLINEAGE_NAMESPACE="warehouse")
    assert done.returncode == 0, done.stderr
    assert "OpenLineage" not in done.stderr

    assert {path for path, _ in collector.events} == {"/api/v1/lineage"}
    start, complete = collector.bodies()
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["run"]["runId"] == complete["run"]["runId"]
    assert complete["job"]["namespace"] == "warehouse"
    assert complete["job"]["name"] == "p"

    namespace, database = _postgres(pg_url)
    source, target = f"{database}.{pg_schema}.src", f"{database}.{pg_schema}.dst"
    for event in (start, complete):
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [(namespace, source)]
        assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [(namespace, target)]
    assert "@" not in json.dumps(complete)  # no user, no password

    (read,) = complete["inputs"]
    assert [(f["name"], f["type"]) for f in read["facets"]["schema"]["fields"]] == [
        ("id", "bigint"),
        ("a", "int"),
        ("d", "int"),
        ("label", "string"),
    ]
    (written,) = complete["outputs"]
    columns = {f["name"]: f["type"] for f in written["facets"]["schema"]["fields"]}
    assert {
        "id": "bigint",
        "b": "integer",
        "c": "bigint",
        "label": "text",
    }.items() <= columns.items()
    (count,) = project.query(f'SELECT count(*) FROM "{pg_schema}".dst')[0]
    assert count == ROWS
    assert written["outputFacets"]["outputStatistics"]["rowCount"] == count

    lineage = written["facets"]["columnLineage"]["fields"]
    origins = {
        column: sorted((i["namespace"], i["name"], i["field"]) for i in entry["inputFields"])
        for column, entry in lineage.items()
    }
    assert origins == {
        "id": [(namespace, source, "id")],
        "b": [(namespace, source, "a")],
        "c": [(namespace, source, "a"), (namespace, source, "d")],
        "label": [(namespace, source, "label")],
    }


def test_a_failing_run_sends_start_then_fail_with_the_error(
    tmp_path: Path, pg_url: str, pg_schema: str, collector: Collector
) -> None:
    rules = (
        'validate = { rules = [{ type = "range", column = "c", max = 100, on_fail = "abort" }] }'
    )
    project = _project(tmp_path, pg_url, pg_schema, rules)
    done = _apply(project, OPENLINEAGE_URL=collector.url)
    assert done.returncode == 1, done.stderr

    start, fail = collector.bodies()
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert start["run"]["runId"] == fail["run"]["runId"]
    assert fail["job"] == {**fail["job"], "namespace": "hakiri", "name": "p"}
    message = fail["run"]["facets"]["errorMessage"]["message"]
    assert "range:c" in message
    assert [d["name"] for d in fail["outputs"]] == [f"{_postgres(pg_url)[1]}.{pg_schema}.dst"]


def test_an_endpoint_that_refuses_connections_costs_one_warning_not_the_load(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    project = _project(tmp_path, pg_url, pg_schema)
    done = _apply(project, OPENLINEAGE_URL=f"http://127.0.0.1:{port}")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "OpenLineage" in line]
    assert len(warnings) == 1, done.stderr
    assert warnings[0].startswith("warning: could not send OpenLineage events to ")
    assert project.query(f'SELECT count(*) FROM "{pg_schema}".dst') == [(ROWS,)]
