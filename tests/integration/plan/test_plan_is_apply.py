"""What `plan --json` says apply will do is what `apply --json` reports it did, step for step.

A property test over generated projects and catalog states: files or PostgreSQL table
sources, every load mode, both destinations, every schema policy, schema changes
(a new column, a wider type, a declared rename) with and without `schema accept`, new
and changed files, new rows past a chunked backfill's cursor, and a removed pipeline.
Each example applies once to make the catalog state, edits the project, then compares
the plan's steps with the steps the next apply executed; an example that accepts a refusal
compares again after `schema accept`. Every comparison checks apply's exit code, and that
a pipeline with work to do has steps (an empty plan equal to an empty apply proves nothing).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg import sql
from typer.testing import CliRunner

from hakiri.cli.main import app

pytestmark = pytest.mark.integration

MODES = ["append", "upsert", "truncate", "blue_green"]
FILE_EDITS = ["new_file", "changed_file", "new_column", "widen", "rename", "retire"]
TABLE_EDITS = ["new_rows", "new_column", "widen", "retire"]
# Edits that bring a batch to every pipeline still in the manifests, and edits of the schema.
DATA_EDITS = frozenset({"new_file", "changed_file", "new_rows", "more_data"})
SCHEMA_EDITS = frozenset({"new_column", "widen", "rename"})


@dataclass(frozen=True)
class Scenario:
    source: str  # 'files' | 'table'
    destination: str  # 'postgres' | 'context'
    mode: str
    policy: str
    tables: int
    applied_first: bool
    edits: tuple[str, ...]
    accept: bool  # after a refused apply: `hakiri schema accept`, then compare
    window: int | None  # table sources: chunk width on the id cursor
    max_chunks: int | None
    parallelism: int


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    source = draw(st.sampled_from(["files", "files", "table"]))
    mode = draw(st.sampled_from(MODES))
    applied_first = draw(st.sampled_from([True, True, True, False]))
    edits: tuple[str, ...] = ()
    if applied_first:
        choices = FILE_EDITS if source == "files" else TABLE_EDITS
        edits = tuple(draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3, unique=True)))
        if draw(st.booleans()):
            edits += ("more_data",)  # so the edited schema meets a batch to load
    chunked = source == "table" and draw(st.booleans())
    return Scenario(
        source=source,
        destination=draw(st.sampled_from(["postgres", "postgres", "context"])),
        mode=mode,
        policy=draw(st.sampled_from(["evolve", "discard_columns", "freeze"])),
        tables=draw(st.integers(1, 2)),
        applied_first=applied_first,
        edits=edits,
        accept=draw(st.booleans()),
        window=draw(st.sampled_from([30, 70])) if chunked else None,
        max_chunks=draw(st.sampled_from([None, 1, 2])) if chunked else None,
        parallelism=draw(st.sampled_from([1, 2])),
    )


class World:
    """One example's project directory, PostgreSQL schema and manifest state."""

    def __init__(self, scenario: Scenario, pg_url: str) -> None:
        self.s, self.pg_url = scenario, pg_url
        self.root = Path(tempfile.mkdtemp(prefix="hakiri-plan-is-apply-"))
        self.schema = f"pa_{uuid.uuid4().hex[:10]}"
        self.columns = {"id": "int", "name": "string"}
        self.renames: dict[str, str] = {}
        self.pipelines = ["p", "q"]
        self.files = 0
        self.rows = 0
        self.query(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))

    def close(self) -> None:
        self.query(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema)))
        shutil.rmtree(self.root, ignore_errors=True)

    def query(self, statement: Any, *params: Any) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(statement, params or None)

    def tables(self, pipeline: str) -> list[str]:
        return [f"{pipeline}{n}" for n in range(self.s.tables)]

    # ------------------------------------------------------------------ sources

    def add_data(self) -> None:
        """One more file per table (files), or 100 more rows per table (tables)."""
        for pipeline in self.pipelines:
            for table in self.tables(pipeline):
                if self.s.source == "files":
                    self._write_file(table, self.files)
                else:
                    self._insert(table, self.rows, 100)
        self.files += 1
        self.rows += 100

    def _write_file(self, table: str, n: int, changed: bool = False) -> None:
        path = self.root / "data" / table / f"f{n}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        names = list(self.columns)
        lines = [",".join(names)]
        for i in range(n * 10, n * 10 + 10):
            values = {"id": str(i), "name": f"{'x' if changed else 'n'}{i}", "score": f"{i}.5"}
            lines.append(",".join(values[c] for c in names))
        path.write_text("\n".join(lines) + "\n")

    def _insert(self, table: str, start: int, count: int) -> None:
        name = sql.Identifier(self.schema, f"src_{table}")
        if start == 0:
            self.query(sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, name text)").format(name))
        score = sql.SQL(", g + 0.5") if "score" in self.columns else sql.SQL("")
        self.query(
            sql.SQL(
                "INSERT INTO {} SELECT g, 'n' || g{} FROM generate_series(%s::int, %s::int) g"
            ).format(name, score),
            start + 1,
            start + count,
        )

    def edit(self, edit: str) -> None:
        every = [t for p in self.pipelines for t in self.tables(p)]
        if edit in ("new_file", "new_rows", "more_data"):
            self.add_data()
        elif edit == "changed_file":
            for table in every:
                self._write_file(table, 0, changed=True)
        elif edit == "new_column":
            self.columns["score"] = "double"
            if self.s.source == "files":
                for table in every:
                    for n in range(self.files):
                        self._write_file(table, n)
            else:
                for table in every:
                    self.query(
                        sql.SQL("ALTER TABLE {} ADD COLUMN score double precision").format(
                            sql.Identifier(self.schema, f"src_{table}")
                        )
                    )
        elif edit == "widen":
            self.columns["id"] = "bigint"
            if self.s.source == "table":
                for table in every:
                    self.query(
                        sql.SQL("ALTER TABLE {} ALTER COLUMN id TYPE bigint").format(
                            sql.Identifier(self.schema, f"src_{table}")
                        )
                    )
        elif edit == "rename":
            self.renames = {"name": "label"}
        elif edit == "retire":
            self.pipelines = ["p"]
        self.write_manifest()

    # ------------------------------------------------------------------ manifest

    def write_manifest(self) -> None:
        text = f"""
        [project]
        name = "plan-is-apply"

        [connections.wh]
        type = "postgres"
        url = "{self.pg_url}"

        [context]
        path = ".hakiri/context"
        """
        for pipeline in self.pipelines:
            text += self._pipeline(pipeline)
        (self.root / "hakiri.toml").write_text(textwrap.dedent(text))

    def _pipeline(self, pipeline: str) -> str:
        s = self.s
        if s.source == "files":
            columns = ", ".join(f'{name} = "{kind}"' for name, kind in self.columns.items())
            source = (
                f'{{ connector = "files", config = {{ path = "data/*.csv", '
                f'format = "csv", columns = {{ {columns} }} }} }}'
            )
            tables = ", ".join(
                f'{{ name = "{t}", path = "data/{t}/*.csv" }}' for t in self.tables(pipeline)
            )
        else:
            source = (
                f'{{ connector = "postgres", config = {{ connection = "wh", '
                f'schema = "{self.schema}" }} }}'
            )
            cursor = ', incremental = "id"' if s.mode != "truncate" else ""
            tables = ", ".join(
                f'{{ name = "src_{t}", target = "{t}"{cursor} }}' for t in self.tables(pipeline)
            )
        if s.destination == "postgres":
            destination = (
                f'destination = {{ connector = "postgres", config = {{ connection = "wh", '
                f'schema = "{self.schema}" }} }}'
            )
        else:
            destination = 'destination = { connector = "context" }'
        key = ', upsert_key = ["id"]' if s.mode == "upsert" else ""
        renames = (
            "renames = { " + ", ".join(f'{a} = "{b}"' for a, b in self.renames.items()) + " }"
            if self.renames
            else ""
        )
        backfill = ""
        if s.window is not None:
            backfill = (
                f"\n[pipeline.backfill]\nwindow = {s.window}\nparallelism = {s.parallelism}\n"
            )
            if s.max_chunks is not None:
                backfill += f"max_chunks_per_tick = {s.max_chunks}\n"
        return f"""
[[pipeline]]
id = "{pipeline}"
source = {source}
tables = [{tables}]
{destination}
load = {{ mode = "{s.mode}"{key} }}
schema_policy = "{s.policy}"
{renames}
{backfill}
"""

    # ------------------------------------------------------------------ the CLI

    def cli(self, *args: str) -> Any:
        return CliRunner().invoke(app, [*args, "--project", str(self.root)], catch_exceptions=False)


@settings(
    max_examples=int(os.environ.get("HAKIRI_PLAN_EXAMPLES", "16")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
# The cases the property is about, always run besides the generated ones: an accepted refusal,
# a chunked backfill left half done by max_chunks_per_tick, a rename in the context store, and
# a new column under discard_columns.
@example(
    scenario=Scenario(
        "files",
        "postgres",
        "upsert",
        "freeze",
        1,
        True,
        ("widen", "new_column", "more_data"),
        True,
        None,
        None,
        1,
    )
)
@example(
    scenario=Scenario(
        "table", "postgres", "append", "evolve", 2, True, ("new_rows",), False, 30, 1, 2
    )
)
@example(
    scenario=Scenario(
        "table",
        "postgres",
        "upsert",
        "evolve",
        1,
        True,
        ("new_column", "new_rows"),
        False,
        30,
        None,
        2,
    )
)
@example(
    scenario=Scenario(
        "files",
        "context",
        "append",
        "evolve",
        1,
        True,
        ("rename", "more_data"),
        False,
        None,
        None,
        1,
    )
)
@example(
    scenario=Scenario(
        "files",
        "postgres",
        "append",
        "discard_columns",
        1,
        True,
        ("new_column", "more_data"),
        False,
        None,
        None,
        1,
    )
)
def test_the_steps_plan_reports_are_the_steps_apply_executes(
    scenario: Scenario, pg_url: str, spark
) -> None:
    world = World(scenario, pg_url)
    try:
        world.add_data()
        world.write_manifest()
        if not scenario.applied_first:
            # Every pipeline is new, with data: created and loaded, nothing to refuse.
            assert _compare(world, busy=set(world.pipelines)) == {}
            return
        first = world.cli("apply")
        assert first.exit_code == 0, first.stderr
        before = set(world.pipelines)
        for edit in scenario.edits:
            world.edit(edit)
        edits = set(scenario.edits)
        # A retired pipeline has its retire step; the others have a batch after a data edit.
        busy = (before - set(world.pipelines)) | (
            set(world.pipelines) if edits & DATA_EDITS else set()
        )
        refused = _compare(world, busy)
        if scenario.policy != "freeze":
            assert refused == {}  # evolve and discard_columns take every change these edits make
        elif edits & SCHEMA_EDITS and edits & DATA_EDITS:
            assert set(refused) == set(world.pipelines)  # a batch met the frozen schema's change
        if scenario.accept:
            _accept(world, refused)
            # The refused batches are still queued: the next apply evolves and loads them.
            again = _compare(world, busy=set(refused))
            if scenario.tables == 1:
                assert again == {}  # the one table's refusal was accepted
    finally:
        world.close()


def _compare(world: World, busy: set[str]) -> dict[str, dict[str, list[str]]]:
    """Plan, then apply, and compare them. `busy`: pipelines that must have steps. Returns the
    pipelines whose apply refused a schema change: {pipeline: {table: changes refused}}."""
    planned = world.cli("plan", "--json")
    plan = {p["id"]: p for p in json.loads(planned.stdout)["pipelines"]}
    assert planned.exit_code == (1 if any(p["errors"] for p in plan.values()) else 0), (
        planned.stderr
    )
    applied = world.cli("apply", "--json")
    outcomes = {o["pipeline_id"]: o for o in json.loads(applied.stdout)}
    assert set(outcomes) == set(plan)
    assert busy <= set(plan)
    refused_by: dict[str, dict[str, list[str]]] = {}
    for pipeline_id, p in plan.items():
        executed = outcomes[pipeline_id]
        if pipeline_id in busy:
            assert p["steps"], p
        if p["errors"]:  # apply fails the same way
            assert executed["status"] == "failed", p["errors"]
            continue
        refused = [s for s in p["steps"] if s["step"] == "evolve" and s["refused"]]
        if refused:
            # apply stops at the first refused table: every step up to it is as planned (the
            # plan also names the refusals of the tables after it), and it says what it refused
            assert executed["status"] == "failed", executed
            assert _without_loads(executed["steps"]) == _up_to_the_refusal(p["steps"])
            changes = {s["table"]: _changes(s["refused"], world.s.policy) for s in refused}
            table, named = next(iter(changes.items()))
            assert f"table {table} -> " in executed["error"], executed
            assert executed["error"].endswith(
                f"the schema policy '{world.s.policy}' refuses: {'; '.join(named)}"
            ), executed
            assert "hakiri schema accept" in (executed["hint"] or ""), executed
            refused_by[pipeline_id] = changes
        else:
            assert executed["status"] != "failed", executed
            assert executed["steps"] == p["steps"]
    failing = any(p["errors"] for p in plan.values()) or bool(refused_by)
    assert applied.exit_code == (1 if failing else 0), applied.stderr
    return refused_by


def _accept(world: World, refused: dict[str, dict[str, list[str]]]) -> None:
    """`schema accept` every pipeline: what a refusal named is accepted; a pipeline that was
    not refused has nothing to accept, and says so."""
    for pipeline in world.pipelines:
        accepted = world.cli("schema", "accept", pipeline, "--json")
        if pipeline not in refused:
            assert accepted.exit_code == 1, accepted.stderr
            assert f"nothing to accept: no run of `{pipeline}` was refused" in accepted.stderr
            continue
        assert accepted.exit_code == 0, accepted.stderr
        events = json.loads(accepted.stdout)
        assert events, accepted.stderr
        for event in events:  # the refused tables the apply reached (it stops at the first)
            assert event["table"] in refused[pipeline], event
            assert event["detail"]["describe"] == refused[pipeline][event["table"]], event
        assert next(iter(refused[pipeline])) in {e["table"] for e in events}


def _changes(refusals: list[str], policy: str) -> list[str]:
    """Plan's refusal lines as apply's error names them: without "(schema_policy = ... it)"."""
    return [r.removesuffix(f" (schema_policy = '{policy}' refuses it)") for r in refusals]


def _without_loads(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in steps if s["step"] != "load"]


def _up_to_the_refusal(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The planned steps apply executes before it stops: up to the first refused table's."""
    kept = _without_loads(steps)
    first = next(i for i, s in enumerate(kept) if s["step"] == "evolve" and s["refused"])
    return kept[: first + 1]


# Changes made outside hakiri, after a load: per destination, what people do by hand.
HAND_EDITS = {
    "postgres": [
        "drop_table",
        "drop_schema",
        "truncate_table",
        "add_target_column",
        "drop_target_column",
    ],
    "context": ["remove_delta_dir"],
}
LOST = frozenset({"drop_table", "drop_schema", "remove_delta_dir"})


@st.composite
def hand_scenarios(draw: st.DrawFn) -> tuple[Scenario, str, bool]:
    source = draw(st.sampled_from(["files", "table"]))
    destination = draw(st.sampled_from(["postgres", "postgres", "context"]))
    mode = draw(st.sampled_from(MODES))
    scenario = Scenario(
        source=source,
        destination=destination,
        mode=mode,
        policy=draw(st.sampled_from(["evolve", "freeze"])),
        tables=1,
        applied_first=True,
        edits=(),
        accept=False,
        window=None,
        max_chunks=None,
        parallelism=1,
    )
    edits = [e for e in HAND_EDITS[destination] if not (e == "drop_schema" and source == "table")]
    return scenario, draw(st.sampled_from(edits)), draw(st.booleans())


def _by_hand(world: World, edit: str) -> None:
    """`edit` done to every target of the world, as a person would."""
    for pipeline in world.pipelines:
        for table in world.tables(pipeline):
            target = sql.Identifier(world.schema, table)
            if edit == "drop_table":
                world.query(sql.SQL("DROP TABLE {}").format(target))
            elif edit == "truncate_table":
                world.query(sql.SQL("TRUNCATE {}").format(target))
            elif edit == "add_target_column":
                world.query(sql.SQL("ALTER TABLE {} ADD COLUMN note text").format(target))
            elif edit == "drop_target_column":
                world.query(sql.SQL("ALTER TABLE {} DROP COLUMN name").format(target))
            elif edit == "remove_delta_dir":
                shutil.rmtree(world.root / ".hakiri" / "context" / table)
    if edit == "drop_schema":
        world.query(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(world.schema)))


def _target_rows(world: World) -> dict[str, int]:
    from deltalake import DeltaTable

    found = {}
    for pipeline in world.pipelines:
        for table in world.tables(pipeline):
            if world.s.destination == "context":
                path = world.root / ".hakiri" / "context" / table
                found[table] = DeltaTable(str(path)).to_pyarrow_table().num_rows
            else:
                with psycopg.connect(world.pg_url) as conn:
                    query = sql.SQL("SELECT count(*) FROM {}").format(
                        sql.Identifier(world.schema, table)
                    )
                    found[table] = conn.execute(query).fetchone()[0]
    return found


@settings(
    max_examples=int(os.environ.get("HAKIRI_PLAN_HAND_EXAMPLES", "6")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=hand_scenarios())
@example(
    case=(
        Scenario("files", "postgres", "append", "evolve", 1, True, (), False, None, None, 1),
        "drop_schema",
        False,
    )
)
@example(
    case=(
        Scenario("table", "context", "upsert", "freeze", 1, True, (), False, None, None, 1),
        "remove_delta_dir",
        True,
    )
)
def test_plan_is_apply_after_changes_made_by_hand(
    case: tuple[Scenario, str, bool], pg_url: str, spark
) -> None:
    """Targets dropped, truncated, given or robbed of a column, or removed (a schema, a Delta
    directory) after a load: plan's steps are apply's, and a lost target comes back with the
    rows it held."""
    scenario, edit, more_data = case
    world = World(scenario, pg_url)
    try:
        world.add_data()
        world.write_manifest()
        first = world.cli("apply")
        assert first.exit_code == 0, first.stderr
        held = _target_rows(world)
        _by_hand(world, edit)
        if more_data:
            world.add_data()
        busy = set(world.pipelines) if edit in LOST or more_data else set()
        assert _compare(world, busy) == {}
        if edit in LOST:
            restored = _target_rows(world)
            if not more_data:
                assert restored == held
            else:
                assert all(restored[t] >= held[t] for t in held), (restored, held)
            again = world.cli("plan", "--detailed-exitcode")
            assert again.exit_code == 0, again.stdout
    finally:
        if edit == "drop_schema":
            world.query(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(world.schema))
            )
        world.close()
