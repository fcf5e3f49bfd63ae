"""`hakiri plan --format markdown` on the repository's example project, through the CLI, as CI
runs it before posting `plan.md` on a pull request (docs/ci.md). No JVM, no server: the
example's pipelines land in the context store and its catalog does not exist yet."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from markdown_it import MarkdownIt
from typer.testing import CliRunner

from hakiri.cli.main import app
from hakiri.cli.plan_markdown import COLUMNS

REPO = Path(__file__).resolve().parents[3]


def example(root: Path) -> Path:
    root.mkdir()
    shutil.copy(REPO / "hakiri.toml", root)
    for folder in ("pipelines", "data", "schemas"):
        shutil.copytree(REPO / folder, root / folder)
    return root


def plan(root: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(
        app, ["plan", *args, "--project", str(root)], env=env, catch_exceptions=False
    )


def table(markdown: str) -> tuple[list[str], list[list[str]]]:
    """The rendered table (GitHub's flavour: CommonMark with tables): headers and body rows."""
    rendered = MarkdownIt("commonmark").enable("table").render(markdown)
    assert rendered.count("<table>") == 1, rendered
    headers = re.findall(r"<th>(.*?)</th>", rendered)
    body = rendered.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    cells = [
        re.findall(r"<td>(.*?)</td>", row, re.S)
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]
    return headers, cells


def test_the_example_project_plans_as_a_pull_request_comment(tmp_path: Path) -> None:
    root = example(tmp_path / "example")
    result = plan(root, "--format", "markdown", "--detailed-exitcode")
    assert result.exit_code == 2, result.stderr  # three pipelines to add: changes
    markdown = result.stdout
    assert markdown.startswith("### hakiri plan: hakiri-example\n")
    assert "**Plan:** 3 to add, 0 to change, 0 to retire · 3 pipelines" in markdown
    headers, rows = table(markdown)
    assert headers == list(COLUMNS)
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("<code>customers</code>", "add", "<code>blue_green</code>"),
        ("<code>events</code>", "add", "<code>append</code>"),
        ("<code>orders</code>", "add", "<code>upsert</code>"),
    ]
    orders = rows[2]
    assert orders[4] == "<code>context:orders</code>: create (5 columns)"
    assert orders[5].startswith("<code>orders</code>: 2 new files, ")
    assert markdown.count("<details><summary>") == 3
    # stdout holds the comment alone; the same plan prints the same bytes
    assert plan(root, "--format", "markdown").stdout == markdown
    assert plan(root, "--format", "json").stdout == plan(root, "--json").stdout


def test_a_pipeline_that_cannot_be_planned_is_an_error_row_and_exit_1(tmp_path: Path) -> None:
    root = example(tmp_path / "example")
    with (root / "hakiri.toml").open("a") as manifest:
        manifest.write(
            '\n[[pipeline]]\nid = "to_warehouse"\n'
            'source = { connector = "files", config = { path = "data/orders/*.csv" } }\n'
            'tables = ["orders"]\n'
            'destination = { connector = "postgres", config = { connection = "warehouse" } }\n'
        )
    bad = "postgresql://loader:hunter2@127.0.0.1:1/nowhere"
    result = plan(
        root, "--format", "markdown", "--detailed-exitcode", env={"HAKIRI_DEMO_PG_URL": bad}
    )
    assert result.exit_code == 1, result.stderr
    assert "hunter2" not in result.stdout
    _, rows = table(result.stdout)
    broken = next(r for r in rows if r[0] == "<code>to_warehouse</code>")
    assert broken[8] == "<strong>1</strong>"
    assert "· **1 error**" in result.stdout
    assert "**Errors**\n\n- `to_warehouse`: cannot connect to PostgreSQL" in result.stdout


def test_json_and_markdown_together_are_refused(tmp_path: Path) -> None:
    root = example(tmp_path / "example")
    result = plan(root, "--json", "--format", "markdown")
    assert result.exit_code == 1 and result.stdout == ""
    assert "error: --json and --format markdown" in result.stderr
