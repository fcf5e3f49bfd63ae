"""PySpark DataFrame code -> hakiri steps (`hakiri.spark.compile.relations`), construct by construct.

Each case builds a plan with PySpark's own API (on the in-process Sail server `hakiri compile`
uses: building a Spark Connect plan asks the server for schemas), checks the steps it
translates to, and then runs both on the same rows: the steps (through
`apply_transforms`, as a pipeline runs them) must give the rows the PySpark code gives.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from pydantic import TypeAdapter

from hakiri.spark.compile.expressions import CompileRefusal
from hakiri.spark.compile.relations import Frames, relation_steps
from hakiri.spec.transforms import TransformStep

SCHEMA = "id bigint, name string, amount string, tags array<string>, at string, kind string"
ROWS = [
    (1, " Ada ", "10.50", ["a", "b"], "2024-03-05 10:00:00", "x"),
    (2, "bob", "250", ["c"], "2024-04-01 09:30:00", "y"),
    (2, "bob", "250", ["c"], "2024-04-01 09:30:00", "y"),
    (3, None, "-1", [], "2024-12-31 23:59:59", None),
]
TABLE_SCHEMA = "kind string, label string"
TABLE_ROWS = [("x", "ex"), ("y", "why")]


@pytest.fixture(scope="module")
def session() -> Iterator[Any]:
    """A session of its own on the in-process Sail server, stopped after the module: left
    running as the process's default, it is what the suite's later `spark` fixture and the
    commands of other tests in this worker would get back from getOrCreate."""
    from pyspark.sql import SparkSession

    from hakiri.spark.engines import SAIL, mark_engine
    from hakiri.spark.sail import sail_endpoint

    sail = SparkSession.builder.remote(sail_endpoint()).create()
    yield mark_engine(sail, SAIL)
    sail.stop()


class Case:
    def __init__(self, session: Any) -> None:
        self.session = session
        self.frame = session.createDataFrame(ROWS, SCHEMA)
        self.table = session.createDataFrame(TABLE_ROWS, TABLE_SCHEMA)

    def steps(self, transform: Callable[[Any], Any]) -> list[dict[str, Any]]:
        result = transform(self.frame)
        frames = Frames(
            input_id=self.frame._plan._plan_id,
            input_columns=self.frame.columns,
            tables={self.table._plan._plan_id: ("kinds", self.table.columns)},
        )
        root = result._plan.to_proto(self.session._client).root
        # the input and the table are local relations with rows here: mark them as the compiler
        # marks its empty ones, by plan id
        steps, _ = relation_steps(root, frames)
        return steps

    def same_rows(self, transform: Callable[[Any], Any]) -> list[dict[str, Any]]:
        """The steps, and proof that they make the rows `transform` makes."""
        from hakiri.spark.transforms import apply_transforms

        steps = self.steps(transform)
        models = TypeAdapter(list[TransformStep]).validate_python(steps)  # the sandbox, too
        compiled = apply_transforms(self.frame, models, {"kinds": self.table}.__getitem__)
        expected = transform(self.frame)
        assert compiled.columns == expected.columns
        assert [f.dataType for f in compiled.schema.fields] == [
            f.dataType for f in expected.schema.fields
        ]
        assert sorted(map(repr, compiled.collect())) == sorted(map(repr, expected.collect()))
        return steps


@pytest.fixture
def case(session: Any) -> Case:
    return Case(session)


def test_with_column_cast_and_arithmetic(case: Case) -> None:
    from pyspark.sql import functions as F

    steps = case.same_rows(
        lambda df: df.withColumn("amount", F.col("amount").cast("decimal(12,2)")).withColumn(
            "double", F.col("amount") * 2 + F.lit(0.5)
        )
    )
    assert steps == [
        {"op": "with_columns", "columns": {"amount": "CAST(`amount` AS decimal(12,2))"}},
        {"op": "with_columns", "columns": {"double": "((`amount` * 2) + 0.5D)"}},
    ]


def test_cast_to_a_type_object_and_try_cast(case: Case) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType

    steps = case.same_rows(
        lambda df: df.withColumns(
            {"a": F.col("amount").cast(DecimalType(10, 1)), "n": F.col("name").try_cast("int")}
        )
    )
    assert steps[0]["columns"] == {
        "a": "CAST(`amount` AS decimal(10,1))",
        "n": "TRY_CAST(`name` AS int)",
    }


def test_filter_with_logic_comparison_in_and_null_tests(case: Case) -> None:
    from pyspark.sql import functions as F

    steps = case.same_rows(
        lambda df: df.where(
            (F.col("id") != 3) & F.col("kind").isin("x", "y") | F.col("name").isNull()
        ).filter(~F.col("name").like("%z%"))
    )
    assert steps == [
        {
            "op": "filter",
            "expr": "(((NOT (`id` = 3)) AND (`kind` IN ('x', 'y'))) OR (`name` IS NULL))",
        },
        {"op": "filter", "expr": "(NOT (`name` LIKE '%z%'))"},
    ]


def test_when_otherwise_becomes_case(case: Case) -> None:
    from pyspark.sql import functions as F

    steps = case.same_rows(
        lambda df: df.withColumn(
            "size",
            F.when(F.col("id") >= 2, "big").when(F.col("id") == 1, F.lit("one")).otherwise(None),
        ).withColumn("flag", F.when(F.col("kind") == "x", True))
    )
    assert steps[0]["columns"]["size"] == (
        "CASE WHEN (`id` >= 2) THEN 'big' WHEN (`id` = 1) THEN 'one' ELSE NULL END"
    )
    assert steps[1]["columns"]["flag"] == "CASE WHEN (`kind` = 'x') THEN true END"


def test_string_functions_and_literals_that_need_escaping(case: Case) -> None:
    from pyspark.sql import functions as F

    steps = case.same_rows(
        lambda df: df.withColumns(
            {
                "up": F.upper(F.trim("name")),
                "joined": F.concat_ws("|", "name", "kind"),
                "digits": F.regexp_replace("amount", r"\d", "#"),
                "quoted": F.concat(F.col("kind"), F.lit("it's \\ here\n")),
            }
        )
    )
    assert steps[0]["columns"] == {
        "up": "upper(trim(`name`))",
        "joined": "concat_ws('|', `name`, `kind`)",
        "digits": "regexp_replace(`amount`, '\\\\d', '#')",
        "quoted": "concat(`kind`, 'it\\'s \\\\ here\\n')",
    }


def test_date_functions_and_date_literals(case: Case) -> None:
    from pyspark.sql import functions as F

    steps = case.same_rows(
        lambda df: df.withColumns(
            {
                "day": F.to_date("at"),
                "month": F.date_trunc("month", F.to_timestamp("at")),
                "year": F.year(F.to_date("at", "yyyy-MM-dd HH:mm:ss")),
                "since": F.datediff(F.to_date("at"), F.lit(dt.date(2024, 1, 1))),
            }
        )
    )
    assert steps[0]["columns"]["since"] == "datediff(to_date(`at`), DATE '2024-01-01')"
    assert steps[0]["columns"]["month"] == "date_trunc('month', to_timestamp(`at`))"


def test_literal_kinds_read_back_as_the_same_values(case: Case) -> None:
    from pyspark.sql import functions as F

    steps = case.same_rows(
        lambda df: df.select(
            "id",
            F.lit(Decimal("1.50")).alias("dec"),
            F.lit(True).alias("yes"),
            F.lit(2**40).alias("big"),
            F.lit(dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)).alias("ts"),
            F.lit(None).cast("string").alias("nothing"),
        )
    )
    computed = steps[0]["columns"]
    assert computed["dec"] == "CAST('1.50' AS DECIMAL(10,2))"
    assert computed["yes"] == "true" and computed["big"] == str(2**40)
    assert computed["ts"].startswith("timestamp_micros(")
    assert steps[1] == {"op": "select", "columns": ["id", "dec", "yes", "big", "ts", "nothing"]}


def test_select_plain_columns_star_and_named_expressions(case: Case) -> None:
    from pyspark.sql import functions as F

    assert case.same_rows(lambda df: df.select("kind", F.col("id"))) == [
        {"op": "select", "columns": ["kind", "id"]}
    ]
    steps = case.same_rows(
        lambda df: df.select("*", F.upper("name").alias("shout")).select(
            F.col("id").alias("key"), "shout"
        )
    )
    assert steps == [
        {"op": "with_columns", "columns": {"shout": "upper(`name`)"}},
        {"op": "select", "columns": [*case.frame.columns, "shout"]},
        {"op": "with_columns", "columns": {"key": "`id`"}},
        {"op": "select", "columns": ["key", "shout"]},
    ]


def test_rename_drop_and_to_df(case: Case) -> None:
    steps = case.same_rows(
        lambda df: (
            df.withColumnRenamed("name", "who")
            .withColumnRenamed("missing", "nothing")  # PySpark: a no-op
            .drop("tags", "not_there")
            .toDF("a", "b", "c", "d", "e")
        )
    )
    assert steps == [
        {"op": "rename", "columns": {"name": "who"}},
        {"op": "drop", "columns": ["tags"]},
        {
            "op": "rename",
            "columns": {"id": "a", "who": "b", "amount": "c", "at": "d", "kind": "e"},
        },
    ]


def test_drop_duplicates_by_keys_and_of_whole_rows(case: Case) -> None:
    assert case.steps(lambda df: df.dropDuplicates(["id"])) == [{"op": "dedupe", "keys": ["id"]}]
    steps = case.same_rows(lambda df: df.drop("tags").distinct())
    assert steps[-1] == {"op": "dedupe", "keys": ["id", "name", "amount", "at", "kind"]}


def test_struct_and_array_access_and_lambdas(case: Case) -> None:
    from pyspark.sql import functions as F

    steps = case.same_rows(
        lambda df: df.where(F.size("tags") > 0).withColumns(
            {
                "first": F.col("tags").getItem(0),
                "loud": F.transform("tags", lambda t: F.upper(t)),
                "n": F.size("tags"),
                "sql": F.expr("amount || '!'"),
            }
        )
    )
    assert steps[0] == {"op": "filter", "expr": "(size(`tags`) > 0)"}
    assert steps[1]["columns"]["first"] == "`tags`[0]"
    assert steps[1]["columns"]["loud"].startswith("transform(`tags`, x_")
    assert steps[1]["columns"]["sql"] == "(amount || '!')"


def test_a_join_with_a_context_table(case: Case) -> None:
    steps = case.same_rows(lambda df: df.join(case.table, "kind", "left"))
    assert steps == [{"op": "join", "table": "kinds", "on": ["kind"], "how": "left"}]
    steps = case.same_rows(
        lambda df: df.join(case.table.select("kind", "label"), ["kind"], "left_anti")
    )
    assert steps == [
        {
            "op": "join",
            "table": "kinds",
            "on": ["kind"],
            "how": "left_anti",
            "columns": ["kind", "label"],
        }
    ]


@pytest.mark.parametrize(
    ("transform", "refused"),
    [
        (
            lambda df, t: df.withColumn(
                "n",
                __import__("pyspark.sql.functions")
                .sql.functions.row_number()
                .over(__import__("pyspark.sql").sql.Window.orderBy("id")),
            ),
            "window function",
        ),
        (lambda df, t: df.orderBy("id"), "sorting"),
        (lambda df, t: df.limit(1), "limit"),
        (lambda df, t: df.groupBy("kind").count(), "aggregate"),
        (lambda df, t: df.union(df), "union"),
        (lambda df, t: df.join(t, "kind", "full"), "full_outer join"),
        (lambda df, t: df.join(t, df["kind"] == t["kind"], "left"), "a join on a condition"),
        (lambda df, t: df.join(df.select("id"), "id"), "not a context-store table"),
        (lambda df, t: df.select(df["name"].substr(1, 2)), "without a name"),
        (lambda df, t: df.select("nope"), "no column 'nope'"),
    ],
)
def test_what_has_no_step_is_refused_and_says_what_it_is(
    case: Case, transform: Callable[[Any, Any], Any], refused: str
) -> None:
    with pytest.raises(CompileRefusal) as caught:
        case.steps(lambda df: transform(df, case.table))
    assert refused in caught.value.reason
    assert caught.value.hint


def test_a_python_udf_is_refused_where_it_is_used(case: Case) -> None:
    from pyspark.sql import functions as F

    shout = F.udf(lambda s: s, "string")
    with pytest.raises(CompileRefusal) as caught:
        case.steps(lambda df: df.withColumn("x", shout("name")))
    assert "Python UDF" in caught.value.reason
