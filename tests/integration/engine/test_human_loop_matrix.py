"""The human loop, for every load mode, into both destinations.

One project per destination holds a pipeline per mode, all fed the same files. They go
through four stories, the first three in one go, each go ending with a clean apply after
which every target must hold exactly what the model says (each content version that
loaded, once; a version that never loaded, not at all):

1. fix the file: a malformed record fails the load; the file is fixed; apply again;
2. delete the file: a malformed file fails; it is deleted and another one arrives;
3. the destination is down: apply fails; the new file is edited meanwhile;
4. the apply is killed mid-load (`before_dest_commit`: staged, not committed); the file
   is edited before the next apply.

The model: every mode ends with one row per key of the loaded versions (keys never repeat
across files), except incremental_watermark, which also drops the rows at or under its
mark (each later file carries one such row, `seq` 1).

It runs in the Sail pass: the stories are the engine's and the destinations' (batches bound
to their bytes, the ledger, the outage's one line), the same on every engine, and with the
engine in each apply's own process the seven killed applies take seconds instead of a JVM's
work each. Applies killed mid-load on Apache Spark, into both destinations:
test_crash_points.py::test_a_killed_process_loses_nothing_and_loads_nothing_twice.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from deltalake import DeltaTable
from psycopg import sql

from hakiri.engine.crash import CRASH_EXIT_CODE
from tests.support.project import Project

MODES = {
    "append": '{ mode = "append" }',
    "upsert": '{ mode = "upsert", upsert_key = ["id"] }',
    "truncate": '{ mode = "truncate" }',
    "blue_green": '{ mode = "blue_green" }',
    "incremental_watermark": '{ mode = "incremental_watermark", watermark_column = "seq" }',
    "scd2": '{ mode = "scd2", key = ["id"], max_delete_fraction = 1.0 }',
    "replace_window": '{ mode = "replace_window", window_column = "id" }',
}
HEADER = "id,seq,name\n"


def _pipeline_id(mode: str) -> str:
    return mode.replace("_", "-")


def _project(root: Path, destination: str, pg_url: str, schema: str) -> Project:
    project = Project(root, pg_url, schema)
    if destination == "postgres":
        target = (
            f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
        )
    else:
        target = '{ connector = "context", config = { path = "store" } }'
    blocks = "\n".join(
        f"""
        [[pipeline]]
        id = "{_pipeline_id(mode)}"
        source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ id = "bigint", seq = "bigint", name = "string" }} }} }}
        tables = [{{ name = "t", target = "t_{mode}" }}]
        destination = {target}
        load = {load}
        """
        for mode, load in MODES.items()
    )
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "human-loop-matrix"

        [spark]
        conf = {{ "spark.driver.extraJavaOptions" = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" }}

        [connections.wh]
        type = "postgres"
        url = "${{WH_URL}}"
        {blocks}
        """,
    )
    return project


class Matrix:
    """The project, the model of what every target holds, and the moves of the stories."""

    def __init__(self, project: Project, destination: str, pg_url: str) -> None:
        self.project, self.destination, self.pg_url = project, destination, pg_url
        self.env = {"WH_URL": pg_url}
        self.loaded: dict[int, tuple[int, str]] = {}  # id -> (seq, name), every mode
        self.mark = 0  # incremental_watermark's high-water mark
        self.filtered: set[int] = set()  # ids the watermark kept out

    def write(self, name: str, rows: list[tuple[int, int, str]]) -> None:
        self.project.write(f"data/{name}", HEADER + "".join(f"{i},{s},{n}\n" for i, s, n in rows))

    def write_text(self, name: str, text: str) -> None:
        self.project.write(f"data/{name}", HEADER + text)

    def loads(self, rows: list[tuple[int, int, str]]) -> None:
        """The model: this content version is loaded (once) by the next clean apply."""
        for i, s, n in rows:
            self.loaded[i] = (s, n)
            if s <= self.mark:
                self.filtered.add(i)
        self.mark = max([self.mark, *(s for i, s, _ in rows if i not in self.filtered)])

    def apply(self, *ids: str, expect: int = 0, env: dict[str, str] | None = None) -> str:
        result = self.project.cli("apply", *ids, env=env or self.env)
        assert result.exit_code == expect, result.stderr
        if expect:
            assert "Traceback" not in result.stderr
            assert "error:" in result.stderr and "hint:" in result.stderr, result.stderr
        return result.output

    def check(self, story: str) -> None:
        for mode in MODES:
            expected = sorted(
                (i, s, n)
                for i, (s, n) in self.loaded.items()
                if not (mode == "incremental_watermark" and i in self.filtered)
            )
            assert self.rows(mode) == expected, f"{story}: {mode}"

    def rows(self, mode: str) -> list[tuple[int, int, str]]:
        if self.destination == "postgres":
            with psycopg.connect(self.pg_url) as conn:
                return conn.execute(
                    sql.SQL("SELECT id, seq, name FROM {} ORDER BY id, seq").format(
                        sql.Identifier(self.project.schema, f"t_{mode}")
                    )
                ).fetchall()
        table = DeltaTable(self.project.root / "store" / f"t_{mode}").to_pyarrow_table()
        columns = [table.column(c).to_pylist() for c in ("id", "seq", "name")]
        return sorted(zip(*columns, strict=True))

    def down(self) -> dict[str, str] | None:
        """Make the destination refuse: PostgreSQL's port closed, the context store's
        directory replaced by a file. Returns the env of the failing apply."""
        if self.destination == "postgres":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            return {"WH_URL": f"postgresql://postgres@127.0.0.1:{port}/hakiri_test"}
        store = self.project.root / "store"
        store.rename(store.with_name("store.away"))
        store.write_text("not a directory")
        return None

    def up(self) -> None:
        if self.destination == "context":
            store = self.project.root / "store"
            store.unlink()
            store.with_name("store.away").rename(store)

    def killed_mid_load(self) -> None:
        """Each pipeline's apply, in a process of its own, ends at `before_dest_commit`."""
        env = {**os.environ, **self.env, "HAKIRI_CRASH_AT": "before_dest_commit"}

        def crash(mode: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "hakiri.cli.main", "apply", _pipeline_id(mode)]
            command += ["--project", str(self.project.root)]
            return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)

        with ThreadPoolExecutor(max_workers=3) as pool:
            for mode, done in zip(MODES, pool.map(crash, MODES), strict=True):
                assert done.returncode == CRASH_EXIT_CODE, f"{mode}: {done.stderr[-2000:]}"


@pytest.mark.sail_only
@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_fix_delete_outage_and_kill_each_load_every_version_once(
    destination: str, tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    m = Matrix(_project(tmp_path, destination, pg_url, pg_schema), destination, pg_url)
    first = [(1, 10, "ada"), (2, 20, "grace")]
    m.write("a.csv", first)
    m.apply()
    m.loads(first)
    m.check("first load")

    # 1 and 2: two files fail on a malformed record; one is fixed the way the error says,
    # the other deleted, and another file arrives
    m.write_text("b.csv", "3,x30,edsger\n4,40,barbara\n")
    m.write_text("c.csv", "6,x,frances\n")
    m.apply(expect=1)
    fixed = [(3, 30, "edsger"), (4, 40, "barbara"), (5, 1, "late")]
    m.write("b.csv", fixed)
    (m.project.root / "data" / "c.csv").unlink()
    m.write("d.csv", [(7, 70, "alan"), (8, 80, "kathleen")])
    # 3: then the destination is down, and the new file is edited meanwhile
    m.apply(expect=1, env=m.down())
    m.up()
    edited = [(7, 71, "alan t"), (8, 80, "kathleen"), (9, 1, "early"), (10, 100, "john")]
    m.write("d.csv", edited)
    m.apply()
    m.loads(fixed)
    m.loads(edited)
    m.check("fixed, deleted, and edited during an outage")

    # 4: killed mid-load; the file is edited before the next apply
    m.write("f.csv", [(13, 130, "hedy"), (14, 140, "annie")])
    m.killed_mid_load()
    edited = [(13, 131, "hedy l"), (15, 150, "mary"), (16, 1, "older")]
    m.write("f.csv", edited)
    m.apply()
    m.loads(edited)
    m.check("killed mid-load, then an edit")
    assert "no changes" in m.apply()
