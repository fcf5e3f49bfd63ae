"""Transform expressions and cast types are checked when the manifest is loaded: `hakiri validate`
names each refused one with its file, line and key."""

from __future__ import annotations

import json

from tests.unit.conftest import FILES_PIPELINE, MINIMAL, error_lines

PIPELINE = FILES_PIPELINE


def test_refused_expressions_and_types_are_reported_with_file_line_and_key(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + PIPELINE
        + """
[[pipeline.transforms]]
op = "filter"
expr = "amount > 0 and reflect('java.lang.Runtime', 'getRuntime') is not null"

[[pipeline.transforms]]
op = "with_columns"
columns = { total = "amount * qty", loaded_at = "current_timestamp()" }

[[pipeline.transforms]]
op = "with_columns"

[pipeline.transforms.columns]
shout = "upper(name)"
score = "my_udf(name)"

[[pipeline.transforms]]
op = "dedupe"
keys = ["id"]
order_by = ["updated_at desc", "rand()"]

[[pipeline.transforms]]
op = "cast"
columns = { id = "bigint", amount = "money" }

[[pipeline.transforms]]
op = "filter"
expr = "amount + 1"
""",
    )

    result = cli("validate")

    assert result.exit_code == 1
    assert error_lines(result) == [
        "error: transform expression refused: reflect() calls Java methods "
        "(hakiri.toml:11 at pipeline[0].transforms[0].expr)",
        "error: transform expression refused: current_timestamp() is not deterministic: it "
        "depends on when the batch runs (hakiri.toml:15 at pipeline[0].transforms[1].columns.loaded_at)",
        "error: transform expression refused: my_udf() is not a built-in function the sandbox "
        "allows (hakiri.toml:22 at pipeline[0].transforms[2].columns.score)",
        "error: transform expression refused: rand() is not deterministic (a re-run would load "
        "different values) (hakiri.toml:27 at pipeline[0].transforms[3].order_by[1])",
        "error: 'money' is not a Spark SQL type: Spark has no type 'money' "
        "(hakiri.toml:31 at pipeline[0].transforms[4].columns.amount)",
        "error: transform expression refused: a filter needs a true/false expression, not "
        "arithmetic (amount + 1) (hakiri.toml:35 at pipeline[0].transforms[5].expr)",
        "error: 6 problems in the project manifests",
    ]
    assert "hint: derive the value from a column of the row" in result.stderr
    assert "hint: use a Spark SQL type" in result.stderr
    assert "Traceback" not in result.stderr


def test_secrets_cannot_be_substituted_into_an_expression(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + PIPELINE
        + """
[[pipeline.transforms]]
op = "with_columns"
columns = { leaked = "'${env:AWS_SECRET_ACCESS_KEY}'" }
""",
    )

    result = cli("validate")

    assert result.exit_code == 1
    [error, _] = error_lines(result)
    assert "`${` is not allowed" in error
    assert "hakiri.toml:11 at pipeline[0].transforms[0].columns.leaked" in error


def test_a_json_pipeline_file_is_checked_the_same_way(project, cli) -> None:
    project.write("hakiri.toml", MINIMAL)
    document = {
        "id": "orders",
        "source": {"connector": "files", "config": {"path": "data/*.csv"}},
        "tables": ["orders"],
        "transforms": [
            {"op": "select", "columns": ["id", "amount"]},
            {"op": "filter", "expr": "sum(amount) > 0"},
        ],
    }
    project.write("pipelines/orders.json", json.dumps(document, indent=2) + "\n")

    result = cli("validate")

    assert result.exit_code == 1
    [error, _] = error_lines(result)
    assert error.startswith("error: transform expression refused: sum() is an aggregate (")
    assert "pipelines/orders.json:" in error
    assert "at transforms[1].expr" in error


def test_safe_transforms_validate(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + PIPELINE
        + """
[[pipeline.transforms]]
op = "rename"
columns = { "Order ID" = "order_id" }

[[pipeline.transforms]]
op = "cast"
columns = { order_id = "bigint", amount = "decimal(12,2)", placed = "timestamp" }

[[pipeline.transforms]]
op = "filter"
expr = "amount > 0 AND status <> 'test'"

[[pipeline.transforms]]
op = "with_columns"
columns = { email = "lower(trim(email))", month = "date_trunc('month', placed)" }

[[pipeline.transforms]]
op = "dedupe"
keys = ["order_id"]
order_by = ["placed DESC NULLS LAST"]

[[pipeline.transforms]]
op = "flatten"
column = "customer"

[[pipeline.transforms]]
op = "explode"
column = "items"
alias = "item"
keep_empty = true
""",
    )

    result = cli("validate")

    assert result.exit_code == 0, result.stderr


def test_declared_column_types_are_checked_at_validate_with_a_suggestion(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + """
[[pipeline]]
id = "orders"
source = { connector = "files", config = { path = "data/*.csv", columns = { id = "integr", note = "text", at = "timestamp" } } }
tables = ["orders"]

[[pipeline]]
id = "api"
tables = ["items"]

[pipeline.source]
connector = "rest"
config = { base_url = "https://example.com", endpoints = { items = { path = "items", columns = { id = "bigint", price = { path = "p", type = "decimal(10,2" } } } } }
""",
    )

    result = cli("validate")

    assert result.exit_code == 1
    assert error_lines(result) == [
        "error: 'integr' is not a Spark SQL type: Spark has no type 'integr' (did you mean "
        "'integer'?) (hakiri.toml:6 at pipeline[0].source.config.columns.id)",
        "error: 'text' is not a Spark SQL type: Spark has no type 'text' (Spark calls it "
        "'string') (hakiri.toml:6 at pipeline[0].source.config.columns.note)",
        "error: 'decimal(10,2' is not a Spark SQL type: unbalanced '<' or '(' "
        "(hakiri.toml:15 at pipeline[1].source.config.endpoints.items.columns.price.type)",
        "error: 3 problems in the project manifests",
    ]
    assert "hint: use a Spark SQL type" in result.stderr
    assert "Traceback" not in result.stderr
