"""What a command produces goes to stdout, its progress, notes and errors to stderr, and
`--json` prints one JSON document on stdout, also on error (docs/cli.md, "Output streams").

Every command of the CLI has a case here, found from the Typer app itself: a new command
without one fails `test_every_command_has_a_case`. The cases run on the demo project at the
repository root, applied once into its context store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

import hakiri
from hakiri.cli.main import app

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    """`args` run in the applied demo project (`{new}`: a project `init` made, for the commands
    that change manifests); `out` must be on stdout and `err` on stderr. `empty_note`: the
    note stderr holds, with nothing on stdout, when there is nothing to list."""

    args: tuple[str, ...]
    out: tuple[str, ...] = ()
    err: tuple[str, ...] = ()
    exit_code: int = 0
    empty_note: str | None = None
    project: bool = True  # the command takes --project


@dataclass(frozen=True)
class NotRun:
    why: str


def _fails(*args: str, error: str) -> Case:
    return Case(args, err=(f"error: {error}",), exit_code=1)


CASES: dict[str, Case | NotRun] = {
    "init": Case(("init", "{new}/fresh"), out=("created ",), err=("next: cd ",), project=False),
    "validate": Case(("validate",), out=("3 pipelines valid",)),
    "plan": Case(("plan",), out=("Plan: 0 to add", "= orders")),
    "apply": Case(("apply",), out=("no changes: every pipeline is up to date",)),
    "run": Case(("run", "orders"), out=("no changes: every pipeline is up to date",)),
    "gc": Case(("gc",), out=("gc: 0 leftover(s) removed",)),
    "serve": NotRun("runs until stopped; it logs on stderr (test_serve* tests)"),
    "diff": _fails("diff", "nope", error="no pipeline `nope`"),
    "query": Case(("query", "SELECT count(*) AS n FROM orders"), out=("(1 row)",)),
    "runs": Case(("runs",), out=("orders", "success")),
    "status": Case(("status",), out=("orders", "batches ")),
    "alerts": Case(("alerts",), empty_note="no alerts"),
    "errors": Case(("errors", "orders"), out=("amount",)),
    "replay": _fails("replay", "nope", "--run", "r", error="no pipeline `nope`"),
    "schema export": Case(("schema", "export", "--out", "{new}/schemas"), out=("wrote ",)),
    "schema log": Case(("schema", "log", "orders"), empty_note="no schema events for orders"),
    "schema accept": _fails("schema", "accept", "orders", error="nothing to accept"),
    "pipeline create": Case(
        (
            "pipeline",
            "create",
            "extra",
            "--path",
            "data/*.csv",
            "--file-format",
            "csv",
            "-p",
            "{new}/fresh",
        ),
        out=("extra",),
    ),
    "pipeline convert": Case(
        ("pipeline", "convert", "extra", "--to", "toml", "-p", "{new}/fresh"), out=("extra",)
    ),
    "pipeline edit": Case(
        ("pipeline", "edit", "extra", "--set", "schedule=every 1h", "-p", "{new}/fresh"),
        out=("extra",),
    ),
    "context tables": Case(("context", "tables"), out=("orders", "version")),
    "context show": Case(("context", "show", "orders"), out=("orders  version",)),
    "context history": Case(("context", "history", "orders"), out=("version", "WRITE")),
    "context optimize": Case(("context", "optimize", "orders"), out=("orders",)),
    "context repair": Case(("context", "repair"), out=("orders: nothing to repair",)),
    "context vacuum": Case(
        ("context", "vacuum", "orders", "--retain-hours", "200", "--dry-run"),
        out=("would remove",),
    ),
    "backfill rewind": _fails(
        "backfill",
        "rewind",
        "nope",
        "--from",
        "1",
        "--to",
        "2",
        "--reason",
        "r",
        error="no pipeline `nope`",
    ),
    "backfill history": Case(("backfill", "history", "orders"), empty_note="no rewinds of orders"),
    "cdc lag": _fails("cdc", "lag", "nope", error="no pipeline `nope`"),
    "cdc drop-slot": _fails("cdc", "drop-slot", "nope", error="no pipeline `nope`"),
    "compile": _fails("compile", "transforms/nope.py", error="no module "),
    "sync": _fails("sync", error="this project has no [sync] section"),
    "sync pull": _fails("sync", "pull", error="this project has no [sync] section"),
    # The suite's own session holds a local server of this test process's.
    "engine status": Case(("engine", "status"), out=("in use, sc://localhost:",)),
    "engine start": NotRun("would start a Spark Connect server beside the suite's session"),
    "engine stop": NotRun("would stop the Spark Connect servers other tests may be using"),
}


def _commands(group: Any, prefix: str = "") -> Iterator[str]:
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if hasattr(command, "commands"):
            if getattr(command, "invoke_without_command", False):  # `hakiri sync` itself
                yield path
            yield from _commands(command, f"{path} ")
        else:
            yield path


def test_every_command_has_a_case() -> None:
    commands = set(_commands(typer.main.get_command(app)))  # type: ignore[arg-type]
    assert commands == set(CASES), (
        f"without a case: {sorted(commands - set(CASES))}; "
        f"no such command: {sorted(set(CASES) - commands)}"
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, spark) -> Path:
    """The demo project, applied once (in this process, on the suite's Spark session)."""
    root = tmp_path_factory.mktemp("streams") / "demo"
    root.mkdir()
    shutil.copy(REPO / "hakiri.toml", root)
    for directory in ("pipelines", "data", "schemas"):
        shutil.copytree(REPO / directory, root / directory)
    applied = _cli(root, "apply")
    assert applied.exit_code == 0, applied.output
    # The result: the summary table, on stdout; progress and notes on stderr.
    assert "pipeline" in applied.stdout and "duration" in applied.stdout
    assert "ok orders" in applied.stderr and "ok orders" not in applied.stdout
    return root


def _cli(root: Path | None, *args: str) -> Result:
    project = [] if root is None or "-p" in args else ["--project", str(root)]
    return CliRunner().invoke(app, [*args, *project], catch_exceptions=False)


def _run(demo: Path, case: Case, *more: str) -> Result:
    new = demo.parent / "new"
    new.mkdir(exist_ok=True)
    args = (a.replace("{new}", str(new)) for a in case.args)
    return _cli(demo if case.project else None, *args, *more)


# In order: `init` makes the project the `pipeline` commands change.
RUN = [name for name, case in CASES.items() if isinstance(case, Case)]


@pytest.mark.parametrize("name", RUN)
def test_the_result_is_on_stdout_and_the_rest_on_stderr(demo: Path, name: str) -> None:
    case = CASES[name]
    assert isinstance(case, Case)
    result = _run(demo, case)
    assert result.exit_code == case.exit_code, result.output
    assert "\x1b[" not in result.stdout  # no colour when stdout is not a terminal
    for text in case.out:
        assert text in result.stdout, f"stdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    for text in case.err:
        assert text in result.stderr, f"stdout: {result.stdout!r}\nstderr: {result.stderr!r}"
        assert text not in result.stdout
    if case.exit_code:
        assert result.stdout == "", "an error is not a result"
    elif case.empty_note and case.empty_note in result.stderr:
        assert result.stdout == ""
    else:
        assert result.stdout.strip(), f"no result on stdout; stderr: {result.stderr!r}"


def test_apply_follow_of_a_pipeline_that_follows_no_change_stream_is_one_line(
    demo: Path,
) -> None:
    """`apply --follow` (a cdc_mirror follower, tests/integration/sources/test_cdc_follow.py)
    refuses another mode: one line and its hint on stderr, nothing on stdout, exit 1; under
    --json, one error document on stdout."""
    result = _cli(demo, "apply", "--follow", "orders")
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert "error: apply --follow follows a change stream, and pipeline `orders` loads with " in (
        result.stderr
    )
    assert "hint: run `hakiri apply orders`" in result.stderr
    as_json = _cli(demo, "apply", "--follow", "orders", "--json")
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)
    assert "follows a change stream" in document["error"]["message"], document


def _takes_json(name: str) -> bool:
    command = typer.main.get_command(app)
    for part in name.split():
        command = command.commands[part]  # type: ignore[attr-defined]
    return any("--json" in p.opts for p in command.params)


@pytest.mark.parametrize("name", [n for n in RUN if _takes_json(n)])
def test_json_is_one_document_on_stdout_also_on_error(demo: Path, name: str) -> None:
    case = CASES[name]
    assert isinstance(case, Case)
    result = _run(demo, case, "--json")
    assert result.exit_code == case.exit_code, result.output
    document = json.loads(result.stdout)
    if case.exit_code:
        assert set(document) == {"error"}
        assert case.err[0].removeprefix("error: ") in document["error"]["message"]
        assert {"message", "hint", "kind"} <= set(document["error"])


# Real processes: what a person types in a shell.


def _shell(command: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(hakiri.__file__).parents[1])  # this tree's hakiri, also in the child
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path, **env},
    )


HAKIRI = f"{sys.executable} -m hakiri.cli.main"


def test_runs_piped_through_grep_finds_the_runs(demo: Path) -> None:
    found = _shell(f"{HAKIRI} runs | grep success", demo)
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert {"orders", "customers", "events"} <= {w for line in lines for w in line.split()}
    assert all("success" in line for line in lines)


def test_plan_redirected_to_a_file_holds_the_plan(demo: Path) -> None:
    done = _shell(f"{HAKIRI} plan > plan.txt", demo)
    assert done.returncode == 0, done.stderr
    plan = (demo / "plan.txt").read_text()
    assert "Plan: 0 to add, 0 to change, 0 to retire. 3 unchanged." in plan
    assert "\x1b[" not in plan


def test_plan_json_with_an_unset_variable_prints_a_json_error(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "hakiri.toml").write_text(
        '[project]\nname = "p"\n\n[[pipeline]]\nid = "p"\n'
        'source = { connector = "files", config = { path = "${HAKIRI_TEST_UNSET_DIR}/*.csv", '
        'format = "csv" } }\ntables = ["t"]\ndestination = { connector = "context" }\n'
    )
    done = _shell(f"{HAKIRI} plan --json", project)
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {"error"}
    error = document["error"]
    assert (error["message"], error["kind"]) == (
        "1 problem in the project manifests",
        "ManifestError",
    )
    assert "hint" in error
    [problem] = error["diagnostics"]  # a manifest error says where, as `validate --json` does
    assert problem["message"] == (
        "environment variable `HAKIRI_TEST_UNSET_DIR` is not set; pipeline `p` needs it"
    )
    assert (problem["file"], problem["line"]) == ("hakiri.toml", 6)
    assert "error:" in done.stderr  # the person reading the CI log sees it too
