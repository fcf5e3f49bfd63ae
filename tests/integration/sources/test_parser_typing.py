"""Sail's typed CSV parser types a declared column only where it reads every value as hakiri's
conversion does (`csv_files.parser_typed`).

A property test: hypothesis writes CSV files whose declared columns hold values of every
shape (signs, leading zeros, surrounding spaces, quoting, overflow at each integer width,
exponents, NaN and infinities, '' against the null value, garbage), and reads each file
twice on Sail, as `read_files` does: through the parser-typed read and through the
all-text read with hakiri's conversion. What a user would see must be the same: the same
rows, or the same error (file, line, value and count of the first malformed record).
Also: the types left to the conversion each hold a value the two parsers read differently,
which is why they are left to it.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from hakiri.errors import SourceDataError
from hakiri.sources.base import SourceFile
from hakiri.sources.files.csv_files import csv_parts, parser_typed
from hakiri.sources.files.malformed import Check
from hakiri.sources.files.reader import FileRead
from hakiri.sources.files.stand_ins import locate
from hakiri.spec.pipeline import FilesConfig

pytestmark = pytest.mark.sail_only(
    "the typed parser is Sail's; on Apache Spark every column is converted by hakiri"
)

BOUNDS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
TYPES = (*BOUNDS, "float", "double")
GARBAGE = ["x", "1.0", "1e2", "0x10", " ", "+", "-", "--1", "1 2", "\u0661", "1_0", "1.5d", "0x1p3"]
FLOATS = ["NaN", "nan", "-NaN", "inf", "-inf", "Infinity", "-Infinity", "INF", "1e309", "-1e309"]
FLOATS += [
    "1e-400",
    ".5",
    "5.",
    "+2",
    "1E5",
    "1e+5",
    "-0",
    "0.0",
    "3.4e39",
    "1.7976931348623157e308",
]


def _integer(kind: str) -> st.SearchStrategy[str]:
    bits = BOUNDS[kind]
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    edges = st.sampled_from([low, high, low - 1, high + 1, 0, -1, 2 * high, 2 * low])
    number = st.one_of(st.integers(low, high), st.integers(2 * low, 2 * high), edges)
    return st.builds(
        lambda n, plus, zeros: (
            ("+" if plus and n >= 0 else "") + ("-" if n < 0 else "") + "0" * zeros + str(abs(n))
        ),
        number,
        st.booleans(),
        st.integers(0, 2),
    )


def _float() -> st.SearchStrategy[str]:
    shaped = st.floats(allow_nan=False, allow_infinity=False).flatmap(
        lambda x: st.sampled_from([repr(x), f"{x:e}", f"{x:.3f}", f"{x:E}"])
    )
    return st.one_of(shaped, st.sampled_from(FLOATS), st.integers().map(str))


def _value(kind: str, null_value: str | None, nan_value: str | None) -> st.SearchStrategy[str]:
    typed = _integer(kind) if kind in BOUNDS else _float()
    special = ["", null_value or "", nan_value or "NaN"]
    return st.one_of(
        typed,
        typed.map(lambda v: f" {v}"),
        typed.map(lambda v: f"{v} "),
        st.sampled_from(GARBAGE + special),
        st.text(string.digits + "+-.eE ", max_size=4),
    )


def _field(value: str, quoted: bool) -> str:
    return f'"{value}"' if quoted or value != value.strip() or "," in value else value


@st.composite
def _files(draw: Any) -> tuple[FilesConfig, str]:
    null_value = draw(st.sampled_from([None, "NA", "\\N"]))
    nan_value = draw(st.sampled_from([None, "NaN", "n/a"]))
    kinds = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=4))
    names = [f"c{i}" for i in range(len(kinds))]
    rows = draw(
        st.lists(
            st.tuples(
                *[st.tuples(_value(kind, null_value, nan_value), st.booleans()) for kind in kinds]
            ),
            min_size=1,
            max_size=6,
        )
    )
    # A string column beside them: '' and the null value read alike on both paths.
    lines = [",".join([*names, "s"])]
    for number, row in enumerate(rows):
        fields = [_field(value, quoted) for value, quoted in row]
        lines.append(",".join([*fields, f"r{number}"]))
    columns = {**dict(zip(names, kinds, strict=True)), "s": "string"}
    config = FilesConfig(
        path="data/*.csv", columns=columns, null_value=null_value, nan_value=nan_value
    )
    return config, "\n".join(lines) + "\n"


def _seen(spark: SparkSession, root: Path, config: FilesConfig, parser_typing: bool) -> Any:
    """What a user sees of the batch: its rows in file order, or the error's one line."""
    located = [locate(root, SourceFile("data/a.csv", 0, "h"))]
    parts = csv_parts(spark, config, "UTF-8", located, False, parser_typing)
    checks = tuple(Check(config, part, observed=False, tallied=True) for part in parts)
    read = FileRead(checks[0].frame(), checks=checks)
    try:
        rows = [tuple(row) for row in read.frame.collect()]
        read.verify()
    except SourceDataError as exc:
        return ("error", exc.reason)
    except Exception as exc:
        explained = read.explain(exc)
        if explained is None:
            raise
        return (
            "error",
            str(explained.reason if isinstance(explained, SourceDataError) else explained),
        )
    return ("rows", [tuple("NaN" if v != v else v for v in row) for row in rows])


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=_files())
@example(  # found by the property: Sail's typed parser fails on a null value in an int column
    batch=(
        FilesConfig(
            path="data/*.csv", columns={"c0": "int", "c1": "int", "s": "string"}, null_value="NA"
        ),
        "c0,c1,s\n0,NA,r0\n",
    )
)
def test_the_parser_typed_read_equals_the_conversion(
    spark: SparkSession, tmp_path: Path, batch: tuple[FilesConfig, str]
) -> None:
    config, text = batch
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "a.csv").write_text(text)
    converted = _seen(spark, tmp_path, config, parser_typing=False)
    assert _seen(spark, tmp_path, config, parser_typing=True) == converted, text


def test_a_refused_value_is_named_as_the_conversion_names_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = FilesConfig(path="data/*.csv", columns={"id": "bigint", "n": "int", "x": "double"})
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("id,n,x\n1,2,0.5\n2,2147483648,1\n3,x,2\n")
    assert parser_typed(config, _schema(spark, config)) == {"id", "n", "x"}
    seen = _seen(spark, tmp_path, config, parser_typing=True)
    assert seen == _seen(spark, tmp_path, config, parser_typing=False)
    assert seen == (
        "error",
        "data/a.csv:3: malformed csv record: n: '2147483648' is not int "
        "(2 malformed records in this batch)",
    )


def _schema(spark: SparkSession, config: FilesConfig) -> Any:
    from hakiri.sources.files.part import spark_schema

    assert config.columns is not None
    return spark_schema(spark, list(config.columns.items()))


# A value each type left to the conversion reads differently through Sail's typed parser
# (a different value, or one parser refusing what the other takes): why they are left to it.
DIFFERENT = {
    "decimal(10,2)": ["2.555", "1e2", " .5"],
    "boolean": ["yes", "t", "1"],
    "date": ["20240105", "2024-01-05T10:00:00", "2024-01-05 10:00"],
    "timestamp": ["2024-01-05 10:00"],
}


@pytest.mark.parametrize("kind", sorted(DIFFERENT))
def test_the_types_left_to_the_conversion_read_differently_through_the_parser(
    spark: SparkSession, tmp_path: Path, kind: str
) -> None:
    from pyspark.sql import functions as F

    config = FilesConfig(path="data/*.csv", columns={"k": "int", "v": kind})
    assert parser_typed(config, _schema(spark, config)) == {"k"}
    for number, value in enumerate(DIFFERENT[kind]):
        path = tmp_path / f"{number}.csv"
        path.write_text(f'k,v\n1,"{value}"\n')
        reader = spark.read.option("header", True)
        converted = (
            reader.schema("k string, v string")
            .csv(str(path))
            .select(F.col("v").try_cast(kind))
            .first()[0]  # type: ignore[index]
        )
        try:
            parsed = reader.schema(f"k int, v {kind}").csv(str(path)).first()[1]  # type: ignore[index]
        except Exception:
            parsed = "refused"
        assert parsed != converted, (kind, value)
