"""A broken project gives one precise file:line message per problem, and exit 1."""

from __future__ import annotations

import json

from tests.unit.conftest import MINIMAL

BROKEN_TOML = """
[project]
name = "broken"

[[pipeline]]
id = "orders"
source = { connector = "files", config = { path = "data/*.csv", formatt = "csv" } }
tables = ["orders"]

[pipeline.load]
mode = "upsert"

[[pipeline]]
id = "customers"
source = { connector = "files", config = { path = "c.csv" } }
tables = ["customers"]
backfill = { parallelism = "four" }

[[pipeline]]
id = "events"
source = { connector = "postgres", config = { url = "postgresql://app:${EVENTS_DB_PASSWORD}@db/app" } }
tables = ["events"]
"""

DUPLICATE_JSON = """
{
  "id": "customers",
  "source": {"connector": "files", "config": {"path": "other.csv"}},
  "tables": ["customers"]
}
"""


def test_every_problem_is_reported_with_file_line_and_key(project, cli) -> None:
    project.write("hakiri.toml", BROKEN_TOML)
    project.write("pipelines/customers.json", DUPLICATE_JSON)

    result = cli("validate")

    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines == [
        "error: unknown key `formatt` (hakiri.toml:6 at pipeline[0].source.config.formatt)",
        "error: load mode 'upsert' requires `upsert_key`: upsert needs the key columns to match rows on "
        "(hakiri.toml:10 at pipeline[0].load.mode)",
        'error: expected integer, got a string "four" (hakiri.toml:16 at pipeline[1].backfill.parallelism)',
        "error: environment variable `EVENTS_DB_PASSWORD` is not set (hakiri.toml:20 at pipeline[2].source.config.url)",
        "error: pipeline `customers` defined in two places: hakiri.toml:12 and pipelines/customers.json:1 "
        "(pipelines/customers.json:2 at id)",
        "error: 5 problems in the project manifests",
    ]
    assert "hint: did you mean `format`?" in result.stderr
    assert (
        "hint: keep one source of truth; run `hakiri pipeline convert customers --to json`"
        in result.stderr
    )
    assert "hint: export EVENTS_DB_PASSWORD=..." in result.stderr
    assert "Traceback" not in result.stderr


def test_a_set_variable_or_a_default_satisfies_interpolation(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + """
[connections.wh]
type = "postgres"
url = "postgresql://app:${WH_PASSWORD:-dev}@${WH_HOST}/app"
""",
    )
    assert cli("validate").exit_code == 1
    assert cli("validate", env={"WH_HOST": "db"}).exit_code == 0


def test_json_errors_carry_json_lines(project, cli) -> None:
    project.write("hakiri.toml", MINIMAL)
    project.write(
        "pipelines/p.json",
        """
    {
      "id": "p",
      "source": {"connector": "files", "config": {"path": "x.csv"}},
      "tables": ["t"],
      "load": {
        "mode": "incremental_watermark"
      },
      "quarantine": {"enabeld": true}
    }
    """,
    )
    result = cli("validate")
    assert result.exit_code == 1
    assert "(pipelines/p.json:6 at load.mode)" in result.stderr
    assert "requires `watermark_column`" in result.stderr
    assert "unknown key `enabeld` (pipelines/p.json:8 at quarantine.enabeld)" in result.stderr


def test_unknown_connector_and_unknown_connection(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + """
[connections.warehouse]
type = "postgres"
url = "postgresql://x@h/db"

[[pipeline]]
id = "gh"
source = { connector = "salesforce", config = {} }
tables = ["issues"]

[[pipeline]]
id = "pg"
source = { connector = "postgres", config = { connection = "warehose" } }
tables = ["t"]
""",
    )
    result = cli("validate")
    assert result.exit_code == 1
    assert (
        'error: unknown connector "salesforce" (hakiri.toml:10 at pipeline[0].source.connector)'
        in result.stderr
    )
    assert "hint: supported: files, github, postgres" in result.stderr
    assert (
        "error: unknown connection `warehose` (hakiri.toml:15 at pipeline[1].source.config.connection)"
        in result.stderr
    )


def test_cdc_mirror_without_source_is_caught_in_json_too(project, cli) -> None:
    project.write("hakiri.toml", MINIMAL)
    project.write(
        "pipelines/c.json",
        json.dumps(
            {
                "id": "c",
                "source": {"connector": "files", "config": {"path": "x"}},
                "tables": ["t"],
                "load": {"mode": "cdc_mirror"},
            },
            indent=1,
        ),
    )
    result = cli("validate")
    assert result.exit_code == 1
    assert "load mode 'cdc_mirror' requires `upsert_key`" in result.stderr


def test_syntax_errors_name_the_line(project, cli) -> None:
    project.write("hakiri.toml", MINIMAL + "\n[[pipeline]]\nid = orders\n")
    project.write("pipelines/x.json", '{\n  "id": "x",\n}\n')
    result = cli("validate")
    assert result.exit_code == 1
    assert "invalid TOML" in result.stderr and "hakiri.toml:5" in result.stderr
    assert "invalid JSON" in result.stderr and "pipelines/x.json:3" in result.stderr


def test_truncate_warning_does_not_fail_validation(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + """
[[pipeline]]
id = "snap"
source = { connector = "files", config = { path = "s.csv" } }
tables = ["snap"]
load = { mode = "truncate" }
""",
    )
    result = cli("validate")
    assert result.exit_code == 0
    assert "warning: truncate on a one-source, one-table pipeline" in result.stderr
    assert "(hakiri.toml:8 at pipeline[0].load.mode)" in result.stderr


def test_validate_json_output(example_project, cli) -> None:
    result = cli("validate", "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["valid"] is True
    assert [p["id"] for p in document["pipelines"]] == ["customers", "events", "orders"]
    orders = next(p for p in document["pipelines"] if p["id"] == "orders")
    assert orders | {"line": 0} == {
        "id": "orders",
        "file": "hakiri.toml",
        "line": 0,
        "format": "toml-inline",
        "source": "files",
        "destination": "context",
        "mode": "upsert",
        "tables": ["orders"],
        "schedule": "every 15m",
        "enabled": True,
    }


def test_missing_project_file(project, cli) -> None:
    result = cli("validate")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no hakiri.toml in")
    assert "hint: run `hakiri init`" in result.stderr
