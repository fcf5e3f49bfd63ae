"""Transform steps compiled to Spark, on small real DataFrames: one test per step kind, chains, odd
column names, and the one-line errors a step that cannot apply gives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from pydantic import TypeAdapter

from hakiri.guards.expressions import ALLOWED_FUNCTIONS, UnsafeExpression
from hakiri.guards.spark_types import spark_type
from hakiri.spark.transforms import TransformError, apply_transforms
from hakiri.spec.transforms import FilterStep, TransformStep, WithColumnsStep
from tests.support.spark_scans import jobs_during

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

STEPS = TypeAdapter(list[TransformStep])


def steps(*documents: dict[str, Any]) -> list[Any]:
    """Steps as the manifest loader makes them (validated)."""
    return STEPS.validate_python(list(documents))


def rows(frame: DataFrame, order: str | None = None) -> list[tuple]:
    if order is not None:
        frame = frame.orderBy(f"`{order}`")
    return [tuple(r) for r in frame.collect()]


@pytest.fixture(scope="module")
def orders(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [
            (1, "Ada ", "12.50", "open", ["a", "b"], (10, "Paris")),
            (2, "bob", "0", "test", [], (20, "Oslo")),
            (3, None, "-3", "open", None, None),
        ],
        "id int, name string, amount string, status string, tags array<string>, "
        "customer struct<id:int, city:string>",
    )


# ------------------------------------------------------------------ one step each


def test_select_keeps_the_listed_columns_in_order(orders: DataFrame) -> None:
    out = apply_transforms(orders, steps({"op": "select", "columns": ["status", "ID"]}))

    assert out.columns == ["status", "id"]
    assert rows(out, "id") == [("open", 1), ("test", 2), ("open", 3)]


def test_select_keeps_hakiris_provenance_columns(orders: DataFrame) -> None:
    from pyspark.sql import functions as F

    with_provenance = orders.withColumn("_source_file_hash", F.lit("sha256:x"))
    out = apply_transforms(with_provenance, steps({"op": "select", "columns": ["id"]}))

    assert out.columns == ["id", "_source_file_hash"]


def test_rename(orders: DataFrame) -> None:
    out = apply_transforms(
        orders, steps({"op": "rename", "columns": {"name": "customer name", "id": "order.id"}})
    )

    assert out.columns[:2] == ["order.id", "customer name"]
    assert rows(out.select("`order.id`", "`customer name`"), "order.id")[0] == (1, "Ada ")


def test_cast(orders: DataFrame) -> None:
    out = apply_transforms(
        orders, steps({"op": "cast", "columns": {"amount": "decimal(12,2)", "id": "long"}})
    )

    assert dict(out.dtypes)["amount"] == "decimal(12,2)"
    assert dict(out.dtypes)["id"] == "bigint"
    assert str(rows(out, "id")[0][2]) == "12.50"


def test_filter(orders: DataFrame) -> None:
    out = apply_transforms(
        orders, steps({"op": "filter", "expr": "status = 'open' AND cast(amount AS double) > 0"})
    )

    assert [r[0] for r in rows(out, "id")] == [1]


def test_with_columns_adds_and_replaces_each_from_the_columns_before_the_step(
    orders: DataFrame,
) -> None:
    out = apply_transforms(
        orders,
        steps(
            {
                "op": "with_columns",
                "columns": {
                    "name": "upper(trim(name))",
                    "shout": "concat(name, '!')",  # the name before the step
                    "city": "customer.city",
                    "first_tag": "try_element_at(tags, 1)",
                },
            }
        ),
    )

    assert out.columns == [*orders.columns, "shout", "city", "first_tag"]
    assert rows(out.select("id", "name", "shout", "city", "first_tag"), "id") == [
        (1, "ADA", "Ada !", "Paris", "a"),
        (2, "BOB", "bob!", "Oslo", None),
        (3, None, None, None, None),
    ]


def test_drop(orders: DataFrame) -> None:
    out = apply_transforms(orders, steps({"op": "drop", "columns": ["tags", "Customer"]}))

    assert out.columns == ["id", "name", "amount", "status"]


def test_dedupe_without_order_by_keeps_one_row_per_key(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, "a"), (1, "b"), (2, "c")], "id int, v string")

    out = apply_transforms(frame, steps({"op": "dedupe", "keys": ["id"]}))

    kept = rows(out, "id")
    assert [r[0] for r in kept] == [1, 2]
    assert kept[0][1] in ("a", "b")


def test_dedupe_keeps_the_first_row_in_order_by(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [(1, 1, "old"), (1, 3, "new"), (1, None, "unknown"), (2, None, "only"), (2, 1, "dated")],
        "id int, version int, v string",
    )

    latest = apply_transforms(
        frame, steps({"op": "dedupe", "keys": ["id"], "order_by": ["version desc"]})
    )
    nulls_first = apply_transforms(
        frame,
        steps({"op": "dedupe", "keys": ["id"], "order_by": ["version DESC NULLS FIRST"]}),
    )

    assert latest.columns == ["id", "version", "v"]
    assert rows(latest, "id") == [(1, 3, "new"), (2, 1, "dated")]
    assert rows(nulls_first, "id") == [(1, None, "unknown"), (2, None, "only")]


def test_flatten_puts_the_fields_in_place_of_the_struct(orders: DataFrame) -> None:
    out = apply_transforms(orders, steps({"op": "flatten", "column": "customer"}))
    dotted = apply_transforms(
        orders, steps({"op": "flatten", "column": "customer", "separator": "."})
    )

    assert out.columns == ["id", "name", "amount", "status", "tags", "customer_id", "customer_city"]
    assert rows(out.select("id", "customer_id", "customer_city"), "id") == [
        (1, 10, "Paris"),
        (2, 20, "Oslo"),
        (3, None, None),
    ]
    assert dotted.columns[-2:] == ["customer.id", "customer.city"]


def test_explode_makes_one_row_per_element(orders: DataFrame) -> None:
    out = apply_transforms(orders, steps({"op": "explode", "column": "tags"}))
    outer = apply_transforms(
        orders, steps({"op": "explode", "column": "tags", "alias": "tag", "keep_empty": True})
    )

    assert out.columns == orders.columns
    assert rows(out.select("id", "tags")) == [(1, "a"), (1, "b")]
    assert outer.columns == ["id", "name", "amount", "status", "tag", "customer"]
    assert sorted(rows(outer.select("id", "tag")), key=str) == sorted(
        [(1, "a"), (1, "b"), (2, None), (3, None)], key=str
    )


# ------------------------------------------------------------------ chains and odd names


def test_a_chain_of_steps(orders: DataFrame) -> None:
    out = apply_transforms(
        orders,
        steps(
            {"op": "filter", "expr": "status <> 'test'"},
            {"op": "flatten", "column": "customer"},
            {"op": "explode", "column": "tags", "alias": "tag", "keep_empty": True},
            {"op": "cast", "columns": {"amount": "double"}},
            {"op": "with_columns", "columns": {"label": "concat_ws('/', customer_city, tag)"}},
            {"op": "rename", "columns": {"customer_city": "city"}},
            {"op": "dedupe", "keys": ["id"], "order_by": ["tag desc nulls last"]},
            {"op": "select", "columns": ["id", "city", "label", "amount"]},
        ),
    )

    assert out.columns == ["id", "city", "label", "amount"]
    assert rows(out, "id") == [(1, "Paris", "Paris/b", 12.5), (3, None, "", -3.0)]


def test_odd_column_names_are_plain_names_everywhere(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [(1, "x", (5,), [1, 2]), (1, "y", (6,), [3])],
        "`order.id` int, `the ``name``` string, `a b` struct<`c.d`:int>, `e f` array<int>",
    )

    out = apply_transforms(
        frame,
        steps(
            {"op": "cast", "columns": {"order.id": "bigint"}},
            {"op": "flatten", "column": "a b", "separator": "/"},
            {"op": "explode", "column": "e f"},
            {"op": "with_columns", "columns": {"n'": "upper(`the ``name```)"}},
            {"op": "dedupe", "keys": ["order.id"], "order_by": ["`a b/c.d` desc"]},
            {"op": "rename", "columns": {"order.id": "id"}},
            {"op": "drop", "columns": ["the `name`"]},
        ),
    )

    assert out.columns == ["id", "a b/c.d", "e f", "n'"]
    assert rows(out) == [(1, 6, 3, "Y")]


# ------------------------------------------------------------------ errors: one line, the step named


def _one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and "\tat " not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"op": "select", "columns": ["id", "nope"]}, "transforms[0] (select): no column 'nope'"),
        ({"op": "rename", "columns": {"nope": "x"}}, "transforms[0] (rename): no column 'nope'"),
        ({"op": "cast", "columns": {"nope": "int"}}, "transforms[0] (cast): no column 'nope'"),
        ({"op": "drop", "columns": ["nope"]}, "transforms[0] (drop): no column 'nope'"),
        ({"op": "dedupe", "keys": ["nope"]}, "transforms[0] (dedupe): no column 'nope'"),
        ({"op": "flatten", "column": "nope"}, "transforms[0] (flatten): no column 'nope'"),
        ({"op": "explode", "column": "nope"}, "transforms[0] (explode): no column 'nope'"),
        ({"op": "filter", "expr": "nope > 1"}, "transforms[0] (filter): no column 'nope'"),
        (
            {"op": "with_columns", "columns": {"x": "upper(nope)"}},
            "transforms[0] (with_columns): no column 'nope'",
        ),
        (
            {"op": "dedupe", "keys": ["id"], "order_by": ["nope desc"]},
            "transforms[0] (dedupe): no column 'nope'",
        ),
        (
            {"op": "with_columns", "columns": {"x": "customer.zip"}},
            "transforms[0] (with_columns): no struct field `zip`",
        ),
    ],
)
def test_a_missing_column_names_the_step_and_the_column(
    orders: DataFrame, step: dict[str, Any], message: str
) -> None:
    with pytest.raises(TransformError) as caught:
        apply_transforms(orders, steps(step))

    assert _one_line(caught.value).startswith(message)
    assert caught.value.hint


def test_the_step_index_counts_from_the_first_step(orders: DataFrame) -> None:
    with pytest.raises(TransformError, match=r"^transforms\[2\] \(filter\): no column 'name'"):
        apply_transforms(
            orders,
            steps(
                {"op": "select", "columns": ["id", "name"]},
                {"op": "rename", "columns": {"name": "full_name"}},
                {"op": "filter", "expr": "name IS NOT NULL"},
            ),
        )


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"op": "flatten", "column": "tags"}, "column 'tags' is array<string>, not a struct"),
        ({"op": "explode", "column": "customer"}, "not an array"),
        ({"op": "rename", "columns": {"name": "status"}}, "a second column named 'status'"),
        ({"op": "explode", "column": "tags", "alias": "id"}, "a second column named 'id'"),
        ({"op": "filter", "expr": "name"}, "FILTER_NOT_BOOLEAN"),
    ],
)
def test_a_step_that_does_not_fit_the_data_says_why(
    orders: DataFrame, step: dict[str, Any], message: str
) -> None:
    with pytest.raises(TransformError) as caught:
        apply_transforms(orders, steps(step))

    assert message in _one_line(caught.value)


def test_flatten_refuses_to_shadow_an_existing_column(spark: SparkSession) -> None:
    frame = spark.createDataFrame([((1,), 2)], "c struct<x:int>, c_x int")

    with pytest.raises(TransformError, match="a second column named 'c_x'"):
        apply_transforms(frame, steps({"op": "flatten", "column": "c"}))


# ------------------------------------------------------------------ the sandbox, again, before Spark


def test_steps_that_skipped_validation_are_refused_before_spark_sees_them(
    orders: DataFrame,
) -> None:
    sneaky = [
        FilterStep.model_construct(op="filter", expr="reflect('java.lang.System', 'exit', 1)"),
    ]
    leak = [
        WithColumnsStep.model_construct(op="with_columns", columns={"x": "'${env:HOME}'"}),
    ]

    with pytest.raises(UnsafeExpression, match=r"^transforms\[0\] \(filter\): .*reflect\(\)"):
        apply_transforms(orders, sneaky)
    with pytest.raises(UnsafeExpression, match=r"transforms\[0\] \(with_columns\): .*\$\{"):
        apply_transforms(orders, leak)


def test_a_bare_user_is_a_column_only_when_the_batch_has_one(
    spark: SparkSession, orders: DataFrame
) -> None:
    with pytest.raises(UnsafeExpression, match=r"user\(\) reads the Spark session"):
        apply_transforms(orders, steps({"op": "with_columns", "columns": {"who": "user"}}))

    people = spark.createDataFrame([(1, "ada")], "id int, user string")
    out = apply_transforms(people, steps({"op": "filter", "expr": "user = 'ada'"}))
    assert rows(out) == [(1, "ada")]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("upper(`ReFlEcT`('java.lang.Runtime', 'getRuntime'))", "reflect()"),
        ("transform(tags, t -> java_method('java.lang.System', 'getenv', t))", "java_method()"),
        ("my_udf(id)", "my_udf()"),
        ("spark_catalog.default.my_udf(id)", "qualified function name"),
        ("(SELECT 1)", "subquery"),
        ("id IN (SELECT 1)", "subquery"),
        ("sum(id) OVER (PARTITION BY status)", "window"),
        ("count(DISTINCT id)", "count()"),
        ("identifier('reflect')('a', 'b')", "IDENTIFIER"),
        ("current_date", "current_date"),
        ("`current_user`", "current_user"),
        ("unix_timestamp()", "unix_timestamp() without an argument"),
    ],
)
def test_sparks_own_parse_of_the_text_is_checked_too(
    orders: DataFrame, text: str, named: str
) -> None:
    # The third check, on its own: what Spark's parser makes of the text, whatever sqlglot did.
    from hakiri.spark.transforms import _check_spark_parse

    with pytest.raises(UnsafeExpression) as caught:
        _check_spark_parse(orders, text, orders.columns)

    assert named in caught.value.reason


def test_sparks_own_parse_lets_pure_expressions_through(orders: DataFrame) -> None:
    from hakiri.spark.transforms import _check_spark_parse

    for text in (
        "upper(trim(name)) || '!'",
        "CASE WHEN cast(amount AS double) > 0 THEN 'paid' END",
        "filter(tags, t -> t <> '')",
        "customer.city",
        "tags[0] = 'a' AND status IN ('open', 'closed')",
    ):
        _check_spark_parse(orders, text, orders.columns)


def test_nothing_runs_until_the_frame_is_used(spark_ui: str, orders: DataFrame) -> None:
    def transform() -> None:
        apply_transforms(
            orders,
            steps(
                {"op": "filter", "expr": "id > 0"},
                {"op": "dedupe", "keys": ["id"], "order_by": ["id desc"]},
                {"op": "flatten", "column": "customer"},
                {"op": "explode", "column": "tags"},
            ),
        )

    assert jobs_during(spark_ui, transform) == 0


# ------------------------------------------------------------------ the sandbox's lists against Spark


def test_every_allowed_function_is_one_of_sparks_built_ins(spark: SparkSession) -> None:
    builtins = {r[0] for r in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    # Written as syntax rather than registered functions.
    syntax = {"cast", "try_cast", "extract", "timestampadd", "timestampdiff", "position"}

    assert sorted(ALLOWED_FUNCTIONS - builtins - syntax) == []


@pytest.mark.parametrize(
    "type_text",
    [
        "bigint",
        "long",
        "int",
        "smallint",
        "tinyint",
        "byte",
        "short",
        "double",
        "float",
        "real",
        "boolean",
        "string",
        "varchar(10)",
        "char(3)",
        "decimal(12,2)",
        "decimal",
        "numeric(5,2)",
        "date",
        "timestamp",
        "timestamp_ntz",
        "timestamp_ltz",
        "binary",
    ],
)
def test_every_type_the_sandbox_accepts_spark_casts_to(spark: SparkSession, type_text: str) -> None:
    from pyspark.sql import functions as F

    frame = spark.range(1).select(F.lit("1").alias("v"))
    cast = frame.select(F.col("v").cast(spark_type(type_text)).alias("v"))

    assert cast.schema["v"].dataType.simpleString() == spark_type(type_text)
