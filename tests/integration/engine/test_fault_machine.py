"""People and faults, as a state machine: what each target holds after every apply.

One project, two pipelines reading the same CSV files under one load mode: `pg` loads
into PostgreSQL through a TCP proxy (tests/support/tcp_proxy.py), `ctx` into the Delta
context store. Hypothesis draws what people do and what goes wrong: new files, edits of
pending, failed or loaded files, deletes, a malformed amount (`x4.50`), a plain apply, and
an apply while the proxy refuses every connection (PostgreSQL is down for `pg`; `ctx`
loads as usual). After every apply, each pipeline's target must be one the model allows
(tests/support/load_model.py): no row lost, none twice, a failure exits 1 with an error
and a hint. The randomized campaign with SIGKILLs, cut connections and full disks is
bench/fault_campaign.py; this test keeps to in-process applies so it stays cheap.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)
from psycopg import sql
from typer.testing import CliRunner

from hakiri.cli.main import app
from tests.support.load_model import (
    COLUMNS,
    MODES,
    FileVersion,
    LoadModel,
    Row,
    canonical_history,
    canonical_rows,
)
from tests.support.load_modes import load_toml
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

PIPELINES = ("pg", "ctx")
DAYS = ("2026-01-01", "2026-01-02")
AMOUNTS = ("1.00", "2.50", "4.50")
CLOCK0 = 1_767_225_600  # 2026-01-01 UTC: scd2 versions start at the files' mtimes
FAULT_SETTINGS = settings(
    max_examples=4,
    stateful_step_count=8,
    deadline=None,
    # No shrink phase: replaying applies to shrink a failure took minutes; an example of 8
    # steps reads well as it is.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _rows(number: int) -> st.SearchStrategy[tuple[Row, ...]]:
    """1-3 rows of file `number`: ids `number`*100 + 0..4 (unique in a file, never in two)."""
    row = st.tuples(
        st.integers(0, 4),
        st.integers(1, 30),
        st.sampled_from(("ada", "bob")),
        st.sampled_from(AMOUNTS),
        st.sampled_from(DAYS),
    )
    return st.lists(row, min_size=1, max_size=3, unique_by=lambda r: r[0]).map(
        lambda rows: tuple(sorted((number * 100 + j, *rest) for j, *rest in rows))
    )


class FaultMachine(RuleBasedStateMachine):
    def __init__(self, pg_url: str, proxy: TcpProxy) -> None:
        super().__init__()
        self.pg_url, self.proxy = pg_url, proxy
        self.root: Path | None = None
        self.schema = f"fm_{uuid.uuid4().hex[:10]}"
        self.files: dict[str, FileVersion] = {}
        self.rev = 0
        self.next_file = 0
        self.models: dict[str, LoadModel] = {}
        self.mode = ""
        self.waiting: set[str] = set()  # written since the last apply, or malformed

    # ------------------------------------------------------------------ the project

    @initialize(mode=st.sampled_from(MODES))
    def make_project(self, mode: str) -> None:
        self.mode = mode
        self.root = Path(tempfile.mkdtemp(prefix="hakiri-fault-machine-"))
        (self.root / "data").mkdir()
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
        load = load_toml(mode)
        columns = '{ id = "bigint", seq = "bigint", name = "string", amount = "decimal(10,2)", day = "date" }'
        source = f'{{ connector = "files", config = {{ path = "data/*.csv", comment = "#", columns = {columns} }} }}'
        parts = urlsplit(self.pg_url)
        proxied = urlunsplit(
            parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{self.proxy.port}")
        )
        pipelines = {
            "pg": f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{self.schema}" }} }}',
            "ctx": '{ connector = "context" }',
        }
        blocks = "\n".join(
            f'[[pipeline]]\nid = "{name}"\nsource = {source}\ntables = [{{ name = "t", target = "t_{name}" }}]\n'
            f"destination = {destination}\nload = {load}\n"
            for name, destination in pipelines.items()
        )
        (self.root / "hakiri.toml").write_text(
            textwrap.dedent(f"""\
                [project]
                name = "fault-machine"

                [connections.wh]
                type = "postgres"
                url = "{proxied}"
                """)
            + blocks
        )
        self.models = {name: LoadModel(mode, "files") for name in PIPELINES}

    def teardown(self) -> None:
        self.proxy.accept()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )

    # ------------------------------------------------------------------ what people do

    def write(self, path: str, rows: tuple[Row, ...]) -> None:
        assert self.root is not None
        self.rev += 1
        version = FileVersion(self.rev, rows, CLOCK0 + 60 * self.rev)
        target = self.root / path
        target.write_text(version.text())
        os.utime(target, (version.mtime, version.mtime))
        self.files[path] = version
        self.waiting.add(path)

    def delete(self, path: str) -> None:
        assert self.root is not None
        (self.root / path).unlink()
        del self.files[path]
        self.waiting.discard(path)

    @rule(data=st.data())
    def new_file(self, data: st.DataObject) -> None:
        number = self.next_file
        self.next_file += 1
        self.write(f"data/f{number:02d}.csv", data.draw(_rows(number)))

    @precondition(lambda self: self.files)
    @rule(data=st.data())
    def edit_file(self, data: st.DataObject) -> None:
        """An edit of a loaded (or any) file: `on_change = "reload"` loads it again."""
        path = data.draw(st.sampled_from(sorted(self.files)))
        self.write(path, data.draw(_rows(int(path[6:8]))))

    @precondition(lambda self: self.waiting)
    @rule(data=st.data())
    def fix_waiting_file(self, data: st.DataObject) -> None:
        """An edit of a file written since the last apply, or that failed it: only the
        current content may load."""
        path = data.draw(st.sampled_from(sorted(self.waiting)))
        self.write(path, data.draw(_rows(int(path[6:8]))))

    @precondition(lambda self: self.files)
    @rule(data=st.data())
    def plant_malformed(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(sorted(self.files)))
        rows = list(self.files[path].rows)
        at = data.draw(st.integers(0, len(rows) - 1))
        bad = rows[at]
        rows[at] = (bad[0], bad[1], bad[2], "x" + bad[3], bad[4])
        self.write(path, tuple(rows))

    @precondition(lambda self: self.files)
    @rule(data=st.data())
    def delete_file(self, data: st.DataObject) -> None:
        self.delete(data.draw(st.sampled_from(sorted(self.waiting or self.files))))

    @rule()
    def apply(self) -> None:
        self.check_apply(refused=False)

    @rule()
    def apply_while_postgres_refuses(self) -> None:
        self.check_apply(refused=True)

    # ------------------------------------------------------------------ checking

    def check_apply(self, refused: bool) -> None:
        assert self.root is not None
        view = dict(self.files)
        allowed = {
            name: model.expect(view, "crash" if refused and name == "pg" else None)
            for name, model in self.models.items()
        }
        if refused:
            self.proxy.refuse()
        try:
            result = CliRunner().invoke(app, ["apply", "--project", str(self.root), "--json"])
        finally:
            self.proxy.accept()
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            result.exception
        )
        assert "Traceback" not in result.stderr, result.stderr
        try:
            outcomes = {o["pipeline_id"]: o for o in json.loads(result.stdout)}
        except ValueError:
            raise AssertionError(f"apply printed no outcome: {result.stderr}") from None
        failed = False
        for name, model in self.models.items():
            outcome = outcomes[name]
            code = 1 if outcome["status"] == "failed" else 0
            failed |= bool(code)
            if code:
                assert outcome["error"] and outcome["hint"], outcome
                assert "\n" not in outcome["error"], outcome["error"]
            candidates = allowed[name][code]
            assert candidates, (
                f"{name}: apply {'failed: ' + str(outcome['error']) if code else 'succeeded'}, "
                f"the model expects it to {'succeed' if code else 'fail'} ({self.mode})"
            )
            actual = self._target(name)
            narrowed = model.narrow(candidates, actual)
            assert narrowed, (
                f"{name} ({self.mode}): the target holds {actual}, the model allows "
                f"{sorted({s.target(self.mode) for s in candidates}, key=repr)}"
            )
            model.settle(narrowed)
        assert result.exit_code == (1 if failed else 0), result.stderr
        self.waiting = {p for p, v in self.files.items() if v.malformed}

    def _target(self, name: str) -> Any:
        assert self.root is not None
        scd2 = self.mode == "scd2"
        columns = [*COLUMNS, *(("valid_from", "valid_to", "is_current") if scd2 else ())]
        if name == "pg":
            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                found = conn.execute(
                    "SELECT to_regclass(%s)", [f'"{self.schema}"."t_pg"']
                ).fetchone()
                records = (
                    []
                    if found is None or found[0] is None
                    else [
                        dict(zip(columns, row, strict=True))
                        for row in conn.execute(
                            sql.SQL("SELECT {} FROM {}").format(
                                sql.SQL(", ").join(map(sql.Identifier, columns)),
                                sql.Identifier(self.schema, "t_pg"),
                            )
                        ).fetchall()
                    ]
                )
        else:
            from deltalake import DeltaTable

            path = self.root / ".hakiri" / "context" / "t_ctx"
            records = (
                DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()
                if (path / "_delta_log").is_dir()
                else []
            )
        if scd2:
            history, problems = canonical_history(records)
            assert not problems, f"{name}: {problems}"
            return history
        return canonical_rows(records)


@pytest.fixture
def proxy(pg_url: str) -> Iterator[TcpProxy]:
    parts = urlsplit(pg_url)
    with TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as started:
        yield started


def test_what_people_do_and_what_goes_wrong_never_loses_or_doubles_a_row(
    pg_url: str, spark: Any, proxy: TcpProxy
) -> None:
    run_state_machine_as_test(lambda: FaultMachine(pg_url, proxy), settings=FAULT_SETTINGS)
