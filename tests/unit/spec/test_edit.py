"""pipeline create / convert / edit: lossless, format-preserving, never half-written."""

from __future__ import annotations

import json

from hakiri.spec.loader import load_project
from tests.unit.conftest import MINIMAL

COMMENTED = """
# Project header comment
[project]
name = "t"  # trailing comment on name

# The orders pipeline: keep this comment
[[pipeline]]
id = "orders"
source = { connector = "files", config = { path = "o/*.csv" } }  # inline comment
tables = ["orders"]

[pipeline.load]
# mode comment
mode = "append"
"""


def test_convert_toml_to_json_to_toml_round_trips_to_an_equal_model(example_project, cli) -> None:
    before = load_project(example_project.root).pipelines

    assert cli("pipeline", "convert", "orders", "--to", "json").exit_code == 0
    moved = json.loads(example_project.read("pipelines/orders.json"))
    assert moved["$schema"] == "../schemas/pipeline.json"
    assert 'id = "orders"' not in example_project.read("hakiri.toml")
    assert load_project(example_project.root).pipelines["orders"] == before["orders"]

    assert cli("pipeline", "convert", "orders", "--to", "toml").exit_code == 0
    assert not (example_project.root / "pipelines/orders.json").exists()
    assert cli("pipeline", "convert", "customers", "--to", "toml").exit_code == 0
    assert cli("pipeline", "convert", "events", "--to", "json").exit_code == 0

    after = load_project(example_project.root)
    assert after.pipelines == before
    assert after.origins["customers"].format.value == "toml-inline"
    assert after.origins["events"].format.value == "json"


def test_convert_to_the_same_format_is_a_no_op(example_project, cli) -> None:
    snapshot = example_project.snapshot()
    result = cli("pipeline", "convert", "customers", "--to", "json")
    assert result.exit_code == 0
    assert "already JSON" in result.stdout
    assert example_project.snapshot() == snapshot


def test_edit_keeps_every_toml_comment_and_key_order(project, cli) -> None:
    project.write("hakiri.toml", COMMENTED)
    result = cli(
        "pipeline",
        "edit",
        "orders",
        "--set",
        "load.mode=upsert",
        "--set",
        'load.upsert_key=["order_id"]',
        "--set",
        "backfill.parallelism=4",
    )
    assert result.exit_code == 0, result.stderr
    text = project.read("hakiri.toml")
    for comment in (
        "# Project header comment",
        "# trailing comment on name",
        "# The orders pipeline: keep this comment",
        "# inline comment",
        "# mode comment",
    ):
        assert comment in text
    assert (
        text.index('id = "orders"')
        < text.index("source =")
        < text.index("tables =")
        < text.index('mode = "upsert"')
    )
    spec = load_project(project.root).pipelines["orders"]
    assert spec.load.upsert_key == ["order_id"]
    assert spec.backfill is not None and spec.backfill.parallelism == 4


def test_edit_of_a_pipeline_file_in_toml_and_json(project, cli) -> None:
    project.write("hakiri.toml", MINIMAL)
    project.write(
        "pipelines/a.toml",
        """
    # a's own comment
    id = "a"
    source = { connector = "files", config = { path = "a.csv" } }
    tables = ["a"]
    """,
    )
    project.write(
        "pipelines/b.json",
        '{"id": "b", "tables": ["b"], "source": {"connector": "files", "config": {"path": "b.csv"}}}',
    )
    assert cli("pipeline", "edit", "a", "--set", "schedule=every 1h").exit_code == 0
    assert (
        cli(
            "pipeline", "edit", "b", "--set", "load.mode=blue_green", "--set", "description=B!"
        ).exit_code
        == 0
    )
    assert project.read("pipelines/a.toml").startswith("# a's own comment\n")
    assert list(json.loads(project.read("pipelines/b.json"))) == [
        "id",
        "tables",
        "source",
        "load",
        "description",
    ]
    loaded = load_project(project.root).pipelines
    assert loaded["a"].schedule == "every 1h"
    assert loaded["b"].load.mode.value == "blue_green"


def test_an_edit_that_breaks_the_pipeline_is_refused_and_nothing_is_written(project, cli) -> None:
    project.write("hakiri.toml", COMMENTED)
    snapshot = project.snapshot()
    result = cli("pipeline", "edit", "orders", "--set", "load.mode=upsert")
    assert result.exit_code == 1
    assert "load mode 'upsert' requires `upsert_key`" in result.stderr
    assert "(hakiri.toml:" in result.stderr
    assert project.snapshot() == snapshot


def test_an_edit_may_fix_one_problem_while_others_remain(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + """
[[pipeline]]
id = "a"
source = { connector = "files", config = { path = "a.csv" } }
tables = ["a"]
load = { mode = "upsert" }

[[pipeline]]
id = "b"
source = { connector = "files", config = { path = "b.csv" } }
tables = ["b"]
schedule = "sometimes"
""",
    )
    result = cli("pipeline", "edit", "a", "--set", 'load.upsert_key=["id"]')
    assert result.exit_code == 0, result.stderr
    remaining = cli("validate")
    assert remaining.exit_code == 1
    assert "not a schedule" in remaining.stderr and "requires `upsert_key`" not in remaining.stderr


def test_unset_removes_a_key(project, cli) -> None:
    project.write("hakiri.toml", COMMENTED)
    assert cli("pipeline", "edit", "orders", "--unset", "load.mode").exit_code == 0
    assert "mode =" not in project.read("hakiri.toml")


def test_create_json_and_toml(project, cli) -> None:
    project.write("hakiri.toml", COMMENTED)
    result = cli(
        "pipeline",
        "create",
        "customers",
        "--path",
        "data/customers/*.csv",
        "--mode",
        "upsert",
        "--upsert-key",
        "id",
        "--schedule",
        "every 1h",
    )
    assert result.exit_code == 0, result.stderr
    created = json.loads(project.read("pipelines/customers.json"))
    assert created == {
        "$schema": "../schemas/pipeline.json",
        "id": "customers",
        "source": {"connector": "files", "config": {"path": "data/customers/*.csv"}},
        "tables": ["customers"],
        "schedule": "every 1h",
        "load": {"mode": "upsert", "upsert_key": ["id"]},
    }
    result = cli(
        "pipeline",
        "create",
        "events",
        "--format",
        "toml",
        "--file-format",
        "jsonl",
        "--set",
        "quarantine.enabled=true",
    )
    assert result.exit_code == 0, result.stderr
    text = project.read("hakiri.toml")
    assert "# The orders pipeline: keep this comment" in text
    events = load_project(project.root).pipelines["events"]
    assert events.source.config.path == "data/events/*.jsonl"
    assert events.quarantine.enabled is True


def test_create_names_its_destination_as_default_destination_would(project, cli) -> None:
    warehouse = '[connections.warehouse]\ntype = "postgres"\nurl = "postgresql://h/db"\n'
    project.write("hakiri.toml", COMMENTED.replace("\n# The orders", warehouse + "\n# The orders"))
    for pipeline_id, destination in (("lake", "context"), ("wh", "warehouse")):
        made = cli("pipeline", "create", pipeline_id, "--destination", destination)
        assert made.exit_code == 0, made.stderr
    assert json.loads(project.read("pipelines/lake.json"))["destination"] == {
        "connector": "context"
    }
    assert json.loads(project.read("pipelines/wh.json"))["destination"] == {
        "connector": "postgres",
        "config": {"connection": "warehouse"},
    }


def test_create_refuses_an_existing_id_and_an_invalid_pipeline(project, cli) -> None:
    project.write("hakiri.toml", COMMENTED)
    snapshot = project.snapshot()
    taken = cli("pipeline", "create", "orders")
    assert taken.exit_code == 1
    assert "error: pipeline `orders` already exists at hakiri.toml:6" in taken.stderr
    invalid = cli("pipeline", "create", "x", "--mode", "upsert")
    assert invalid.exit_code == 1
    assert "requires `upsert_key`" in invalid.stderr and "(pipelines/x.json:" in invalid.stderr
    assert project.snapshot() == snapshot


def test_edit_of_an_unknown_pipeline(project, cli) -> None:
    project.write("hakiri.toml", COMMENTED)
    result = cli("pipeline", "edit", "nope", "--set", "schedule=every 1h")
    assert result.exit_code == 1
    assert "error: no pipeline `nope`" in result.stderr
