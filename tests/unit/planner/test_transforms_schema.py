"""The columns a pipeline's transforms produce, computed without data, and how the plan shows them."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from hakiri.destinations.base import TargetColumn, TargetObservation
from hakiri.planner.builder import plan_pipeline
from hakiri.planner.model import Column
from hakiri.planner.observations import PipelineObservation, TableObservation
from hakiri.planner.transforms import transform_schema, transformed_columns
from hakiri.sources.base import SourceColumn, SourceObservation
from hakiri.spec.connections import Target
from hakiri.spec.pipeline import PipelineSpec, TableSpec
from hakiri.spec.transforms import TransformStep

STEPS = TypeAdapter(list[TransformStep])
SOURCE = [
    ("id", "bigint"),
    ("Name", "string"),
    ("amount", "string"),
    ("customer", "struct<id:int,city:string>"),
    ("tags", "array<string>"),
    ("payload", None),
]


def steps(*documents: dict[str, Any]) -> list[Any]:
    return STEPS.validate_python(list(documents))


def test_no_steps_keep_the_columns() -> None:
    assert transformed_columns(SOURCE, []) == SOURCE


def test_select_rename_and_drop_follow_the_names() -> None:
    assert transformed_columns(SOURCE, steps({"op": "select", "columns": ["amount", "name"]})) == [
        ("amount", "string"),
        ("Name", "string"),  # Spark resolves names ignoring case and keeps the column's own
    ]
    assert transformed_columns(
        SOURCE[:2], steps({"op": "rename", "columns": {"name": "full name"}})
    ) == [("id", "bigint"), ("full name", "string")]
    assert transformed_columns(
        SOURCE, steps({"op": "drop", "columns": ["customer", "tags", "payload"]})
    ) == [("id", "bigint"), ("Name", "string"), ("amount", "string")]


def test_select_keeps_hakiris_provenance_columns() -> None:
    columns = [("id", "bigint"), ("_source_file_hash", "string")]
    assert transformed_columns(columns, steps({"op": "select", "columns": ["id"]})) == columns


def test_cast_gives_the_canonical_spark_type() -> None:
    out = transformed_columns(
        SOURCE[:3],
        steps({"op": "cast", "columns": {"amount": "DECIMAL(12, 2)", "id": "long", "name": "int"}}),
    )
    assert out == [("id", "bigint"), ("Name", "int"), ("amount", "decimal(12,2)")]


def test_filter_and_dedupe_change_no_column() -> None:
    out = transformed_columns(
        SOURCE,
        steps(
            {"op": "filter", "expr": "amount <> '0'"},
            {"op": "dedupe", "keys": ["id"], "order_by": ["amount desc"]},
        ),
    )
    assert out == SOURCE


def test_with_columns_types_what_shows_without_data() -> None:
    out = transformed_columns(
        SOURCE[:3],
        steps(
            {
                "op": "with_columns",
                "columns": {
                    "name": "upper(name)",  # replaced in place, type unknown
                    "copy": "id",
                    "cents": "cast(amount AS decimal(12,2)) * 100",
                    "price": "try_cast(amount AS double)",
                    "source": "'shop'",
                    "flag": "true",
                },
            }
        ),
    )
    assert out == [
        ("id", "bigint"),
        ("name", None),
        ("amount", "string"),
        ("copy", "bigint"),
        ("cents", None),
        ("price", "double"),
        ("source", "string"),
        ("flag", "boolean"),
    ]


def test_flatten_a_known_struct_into_its_fields_in_place() -> None:
    out = transformed_columns(
        SOURCE[2:5], steps({"op": "flatten", "column": "customer", "separator": "."})
    )
    assert out == [
        ("amount", "string"),
        ("customer.id", "int"),
        ("customer.city", "string"),
        ("tags", "array<string>"),
    ]


def test_flatten_of_an_unknown_type_drops_the_column_with_a_note() -> None:
    schema = transform_schema(
        SOURCE[:1] + SOURCE[5:], steps({"op": "flatten", "column": "payload"})
    )

    assert schema.columns is not None
    assert [c.name for c in schema.columns] == ["id"]
    assert schema.notes == (
        "transforms[0] (flatten): the fields of 'payload' are known only at run time; "
        "the plan leaves them out",
    )


def test_explode_gives_the_element_type() -> None:
    assert transformed_columns(
        SOURCE[3:5], steps({"op": "explode", "column": "tags", "alias": "tag"})
    ) == [("customer", "struct<id:int,city:string>"), ("tag", "string")]
    assert transformed_columns(SOURCE[5:], steps({"op": "explode", "column": "payload"})) == [
        ("payload", None)
    ]


def test_steps_that_would_fail_are_noted() -> None:
    schema = transform_schema(
        SOURCE,
        steps(
            {"op": "select", "columns": ["id", "nope", "tags", "amount"]},
            {"op": "flatten", "column": "tags"},
            {"op": "explode", "column": "amount"},
        ),
    )

    assert schema.notes == (
        "transforms[0] (select): no column 'nope' among the source's columns (apply would fail)",
        "transforms[1] (flatten): column 'tags' is array<string>, not a struct (apply would fail)",
        "transforms[2] (explode): column 'amount' is string, not an array (apply would fail)",
    )


def test_unknown_source_columns_stay_unknown_until_a_select_names_them() -> None:
    assert transformed_columns(None, steps({"op": "cast", "columns": {"a": "int"}})) is None
    assert transformed_columns(
        None,
        steps(
            {"op": "select", "columns": ["a", "b"]},
            {"op": "cast", "columns": {"a": "int"}},
        ),
    ) == [("a", "int"), ("b", None)]


def test_a_chain() -> None:
    out = transformed_columns(
        SOURCE,
        steps(
            {"op": "flatten", "column": "customer"},
            {"op": "explode", "column": "tags", "alias": "tag"},
            {"op": "cast", "columns": {"amount": "decimal(10,2)"}},
            {"op": "rename", "columns": {"customer_city": "city"}},
            {"op": "with_columns", "columns": {"label": "concat(city, tag)"}},
            {"op": "drop", "columns": ["payload", "customer_id"]},
        ),
    )
    assert out == [
        ("id", "bigint"),
        ("Name", "string"),
        ("amount", "decimal(10,2)"),
        ("city", "string"),
        ("tag", "string"),
        ("label", None),
    ]


# ------------------------------------------------------------------ in the plan

PG_TARGET = Target("postgres", "orders", "public", "wh")


def _spec(connector: str = "files", **overrides: Any) -> PipelineSpec:
    source: dict[str, Any] = (
        {"connector": "files", "config": {"path": "o/*.csv"}}
        if connector == "files"
        else {"connector": "postgres", "config": {"connection": "src"}}
    )
    document: dict[str, Any] = {
        "id": "orders",
        "source": source,
        "tables": ["orders"],
        "destination": {"connector": "postgres", "config": {"connection": "wh"}},
        **overrides,
    }
    return PipelineSpec.model_validate(document)


def _plan(spec: PipelineSpec, source: SourceObservation, target: TargetObservation):
    table = TableObservation(TableSpec(name="orders"), PG_TARGET, source, target)
    return plan_pipeline(PipelineObservation(spec.id, spec, None, (table,)))


def _source(*columns: tuple[str, str | None]) -> SourceObservation:
    return SourceObservation("orders", tuple(SourceColumn(n, t) for n, t in columns))


TRANSFORMS = [
    {"op": "cast", "columns": {"amount": "decimal(12,2)"}},
    {"op": "rename", "columns": {"code": "order_code"}},
    {"op": "with_columns", "columns": {"email": "lower(email)", "channel": "'web'"}},
    {"op": "drop", "columns": ["internal"]},
]


def test_the_plan_creates_the_target_with_the_transformed_columns() -> None:
    spec = _spec(transforms=TRANSFORMS)
    source = _source(
        ("id", "int64"), ("amount", "string"), ("code", "string"), ("internal", "string")
    )

    plan = _plan(spec, source, TargetObservation("orders", "public", False))

    [target] = plan.targets
    assert target.transformed == [
        Column(name="id", type="bigint"),  # Spark types: the file's int64 is a bigint
        Column(name="amount", type="decimal(12,2)"),
        Column(name="order_code", type="string"),
        Column(name="email", type=None),
        Column(name="channel", type="string"),
    ]
    assert target.create
    assert target.columns == [
        Column(name="id", type="bigint"),
        Column(name="amount", type="numeric(12,2)"),
        Column(name="order_code", type="text"),
        Column(name="email", type=None),
        Column(name="channel", type="text"),
    ]


def test_the_plan_compares_the_transformed_columns_with_an_existing_target() -> None:
    spec = _spec(transforms=TRANSFORMS)
    source = _source(("id", "int64"), ("amount", "string"), ("code", "string"))
    existing = TargetObservation(
        "orders",
        "public",
        True,
        (TargetColumn("id", "bigint"), TargetColumn("amount", "numeric(10,2)")),
    )

    plan = _plan(spec, source, existing)

    [target] = plan.targets
    assert [c.name for c in target.add_columns] == ["order_code", "email", "channel"]
    assert [(w.name, w.from_type, w.to_type) for w in target.widen_columns] == [
        ("amount", "numeric(10,2)", "numeric(12,2)")
    ]


def test_postgres_to_postgres_creates_the_types_spark_stages() -> None:
    # A varchar(12) reaches Spark as a string, and the target is created from the staged
    # columns: text. The plan says what apply creates, not the source's own spelling.
    spec = _spec("postgres", transforms=[{"op": "cast", "columns": {"qty": "bigint"}}])
    source = _source(("code", "character varying(12)"), ("qty", "integer"))

    plan = _plan(spec, source, TargetObservation("orders", "public", False))

    assert plan.targets[0].columns == [
        Column(name="code", type="text"),
        Column(name="qty", type="bigint"),
    ]


def test_what_only_the_data_will_tell_is_a_warning_of_the_plan() -> None:
    spec = _spec(transforms=[{"op": "flatten", "column": "payload"}])
    source = _source(("id", "int64"), ("payload", None))

    plan = _plan(spec, source, TargetObservation("orders", "public", False))

    assert plan.targets[0].columns == [Column(name="id", type="bigint")]
    assert (
        "orders: transforms[0] (flatten): the fields of 'payload' are known only at run time; "
        "the plan leaves them out"
    ) in plan.warnings


def test_without_transforms_the_plan_shows_none() -> None:
    plan = _plan(_spec(), _source(("id", "int64")), TargetObservation("orders", "public", False))

    assert plan.targets[0].transformed is None
    assert plan.targets[0].columns == [Column(name="id", type="bigint")]
