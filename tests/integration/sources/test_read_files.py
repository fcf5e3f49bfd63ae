"""A batch of files read by Spark as the source config declares: formats, options, malformed records."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hakiri.errors import SourceDataError
from hakiri.sources.base import SourceFile
from hakiri.sources.files.inspect import hash_file
from hakiri.sources.files.reader import FileRead, read_files
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _write(root: Path, relative: str, content: str | bytes, encoding: str = "utf-8") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode(encoding) if isinstance(content, str) else content)


@dataclass(frozen=True)
class Read:
    read: FileRead  # its frame reads the files only while the read is kept (copies, links)
    malformed: int  # what the read's verdict said once its frame was consumed

    @property
    def frame(self) -> DataFrame:
        return self.read.frame


def _read(spark: SparkSession, root: Path, *names: str, **config: Any) -> Read:
    """Read the files, consume the frame once (as staging does), then take the read's verdict."""
    files = [SourceFile(n, (root / n).stat().st_size, hash_file(root / n)) for n in names]
    read: FileRead = read_files(spark, root, FilesConfig(path="data/*", **config), files)
    try:
        read.frame.write.format("noop").mode("overwrite").save()
    except Exception as exc:  # as the staging pass is explained (`sources.base.explained_by`)
        explained = read.explain(exc)
        if explained is None:
            raise
        raise explained from exc
    return Read(read, read.verify())


def _rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    # Test data is a handful of rows; collecting them is what the assertion needs.
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def _fails(spark: SparkSession, root: Path, *names: str, **config: Any) -> SourceDataError:
    with pytest.raises(SourceDataError) as raised:
        _read(spark, root, *names, **config)
    error = raised.value
    assert "\n" not in error.reason
    assert error.hint
    return error


# ---------------------------------------------------------------- csv


def test_csv_infers_types_from_every_row(spark: SparkSession, tmp_path: Path) -> None:
    _write(
        tmp_path,
        "data/orders.csv",
        "id,name,amount,at,flag\n"
        "1,Ann,10.5,2024-01-02 03:04:05,true\n"
        "2,Bob,7,2024-02-03 00:00:00,false\n",
    )

    read = _read(spark, tmp_path, "data/orders.csv")

    assert read.malformed == 0
    assert read.frame.dtypes == [
        ("id", "int"),
        ("name", "string"),
        ("amount", "double"),
        ("at", "timestamp"),
        ("flag", "boolean"),
    ]
    assert _rows(read.frame) == [
        (1, "Ann", 10.5, dt.datetime(2024, 1, 2, 3, 4, 5), True),
        (2, "Bob", 7.0, dt.datetime(2024, 2, 3), False),
    ]


def test_csv_semicolons_and_latin1(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/clients.csv", "id;nom;ville\n1;José;Besançon\n2;Zoë;Köln\n", "latin-1")

    read = _read(spark, tmp_path, "data/clients.csv", delimiter=";", encoding="latin-1")

    assert _rows(read.frame) == [(1, "José", "Besançon"), (2, "Zoë", "Köln")]


def test_csv_in_an_encoding_spark_only_reads_as_a_java_charset(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/prices.csv", "item,price\ncafé,3 €\n", "cp1252")

    read = _read(spark, tmp_path, "data/prices.csv", encoding="cp1252")

    assert _rows(read.frame) == [("café", "3 €")]


def test_csv_declared_schema_selects_and_types_the_declared_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The header has an extra column and another order than the declaration.
    _write(
        tmp_path,
        "data/orders.csv",
        "note,amount,id,day\nfirst,10.50,1,2024-01-02\nsecond,0.25,2,2024-01-03\n",
    )
    columns = {"id": "bigint", "amount": "decimal(10,2)", "day": "date"}

    read = _read(spark, tmp_path, "data/orders.csv", columns=columns)

    assert read.frame.dtypes == [("id", "bigint"), ("amount", "decimal(10,2)"), ("day", "date")]
    assert _rows(read.frame) == [
        (1, Decimal("10.50"), dt.date(2024, 1, 2)),
        (2, Decimal("0.25"), dt.date(2024, 1, 3)),
    ]


def test_csv_column_names_keep_spaces_dots_and_unicode(spark: SparkSession, tmp_path: Path) -> None:
    _write(
        tmp_path,
        "data/t.csv",
        "\ufefforder id,Prénom,montant.total,日付\n1,Zoë,2.5,2024-01-01\n",
    )

    inferred = _read(spark, tmp_path, "data/t.csv")
    declared = _read(
        spark,
        tmp_path,
        "data/t.csv",
        columns={"montant.total": "double", "order id": "int", "Prénom": "string"},
    )

    assert inferred.frame.columns == ["order id", "Prénom", "montant.total", "日付"]
    assert _rows(inferred.frame) == [(1, "Zoë", 2.5, dt.date(2024, 1, 1))]
    assert declared.frame.columns == ["montant.total", "order id", "Prénom"]
    assert _rows(declared.frame) == [(2.5, 1, "Zoë")]


def test_csv_quotes_are_rfc_4180(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/q.csv", 'id,text\n1,"say ""hi"", then go"\n2,"two\\\\slashes"\n')

    read = _read(spark, tmp_path, "data/q.csv")

    assert _rows(read.frame) == [(1, 'say "hi", then go'), (2, "two\\\\slashes")]


def test_csv_without_header_takes_declared_names_by_position(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/n.csv", "1,a\n2,b\n")

    read = _read(
        spark, tmp_path, "data/n.csv", header=False, columns={"id": "int", "code": "string"}
    )

    assert read.frame.columns == ["id", "code"]
    assert _rows(read.frame) == [(1, "a"), (2, "b")]


def test_csv_files_with_different_header_orders_are_united_by_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/a.csv", "id,name\n1,a\n")
    _write(tmp_path, "data/b.csv", "name,id\nb,2\n")
    _write(tmp_path, "data/empty.csv", "")

    read = _read(
        spark,
        tmp_path,
        "data/a.csv",
        "data/b.csv",
        "data/empty.csv",
        columns={"id": "int", "name": "string"},
    )

    assert _rows(read.frame) == [(1, "a"), (2, "b")]


def test_file_names_that_look_like_globs_are_read_literally(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Spark is given the name escaped; Sail, which has no escape, a plain-named link to it.
    _write(tmp_path, "data/x[1] {a,b}.csv", "id\n1\n")
    _write(tmp_path, "data/x1 a.csv", "id\n99\n")
    _write(tmp_path, "data/y*?.csv", "id\n2\nnot a number\n")

    read = _read(spark, tmp_path, "data/x[1] {a,b}.csv")
    assert _rows(read.frame) == [(1,)]
    error = _fails(spark, tmp_path, "data/y*?.csv", columns={"id": "int"})
    assert error.reason.startswith("data/y*?.csv:3: malformed csv record")


def test_a_path_with_a_colon_is_read(spark: SparkSession, tmp_path: Path) -> None:
    # Hadoop takes what precedes a ':' for a URI scheme: the engine reads a link instead.
    _write(tmp_path, "data/12:00/a:b.csv", "id\n7\n")

    read = _read(spark, tmp_path, "data/12:00/a:b.csv")

    assert _rows(read.frame) == [(7,)]


def test_only_empty_files_give_an_empty_frame(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/empty.csv", "")

    read = _read(spark, tmp_path, "data/empty.csv", columns={"id": "int"})

    assert read.frame.columns == ["id"]
    assert read.frame.count() == 0


# ---------------------------------------------------------------- csv problems


BAD_CSV = (
    "id,name,amount\n"  # line 1
    "1,a,1.5\n"
    "2,b,2.5\n"
    "3,c\n"  # line 4: a field short
    "4,d,x\n"  # line 5: not a number
    "5,e,5.5\n"
)


@pytest.mark.spark_only(
    "Sail's CSV parser stops at the first record of the wrong width: its count covers those records only"
)
def test_malformed_csv_fails_naming_file_and_line(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/bad.csv", BAD_CSV)

    error = _fails(spark, tmp_path, "data/bad.csv", columns={"id": "int", "amount": "double"})

    assert error.reason.startswith("data/bad.csv:4: malformed csv record")
    assert "2 fields where 3 are expected" in error.reason
    assert "2 malformed records in this batch" in error.reason
    assert 'on_malformed = "drop"' in (error.hint or "")


def test_a_value_of_the_wrong_type_is_malformed_too(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/ok.csv", "id,amount\n1,2.5\n")
    _write(tmp_path, "data/typed.csv", "id,amount\n1,2.5\n2,3.5\n3,lots\n")

    error = _fails(spark, tmp_path, "data/ok.csv", "data/typed.csv", columns={"amount": "double"})

    assert error.reason == (
        "data/typed.csv:4: malformed csv record: amount: 'lots' is not double "
        "(1 malformed record in this batch)"
    )


def test_records_dropped_are_counted_once_however_often_the_frame_runs(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Sail counts them in the pass itself (one count per Spark partition), Apache Spark with
    # observed metrics: a second action over the same frame must not double the count.
    _write(tmp_path, "data/a.csv", "id,amount\n1,2.5\n2,lots\n3,3.5\n4,x\n")
    files = [SourceFile("data/a.csv", (tmp_path / "data/a.csv").stat().st_size, "sha256:0")]
    config = FilesConfig(path="data/*", columns={"amount": "double"}, on_malformed="drop")
    read = read_files(spark, tmp_path, config, files)

    read.frame.write.format("noop").mode("overwrite").save()
    read.frame.write.format("noop").mode("overwrite").save()

    assert read.verify() == 2
    assert sorted(_rows(read.frame)) == [(2.5,), (3.5,)]


def test_a_mistyped_value_is_named_in_json_lines_and_json_arrays(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/a.jsonl", '{"id": 1, "amount": 2.5}\n{"id": 2, "amount": "x4.50"}\n')
    _write(tmp_path, "data/b.json", '[{"id": 3, "amount": 1.25},\n {"id": "four", "amount": 1}]')
    columns = {"id": "int", "amount": "decimal(10,2)"}

    lines = _fails(spark, tmp_path, "data/a.jsonl", format="jsonl", columns=columns)
    array = _fails(spark, tmp_path, "data/b.json", format="json", columns=columns)

    assert lines.reason == (
        'data/a.jsonl:2: malformed jsonl record: amount: "x4.50" is not decimal(10,2) '
        "(1 malformed record in this batch)"
    )
    assert array.reason == (
        'data/b.json:2: malformed json record: element 2 of the array: id: "four" is not int '
        "(1 malformed record in this batch)"
    )
    kept = _read(
        spark, tmp_path, "data/a.jsonl", format="jsonl", columns=columns, on_malformed="drop"
    )
    assert kept.malformed == 1
    assert _rows(kept.frame) == [(1, Decimal("2.50"))]


def test_a_parquet_value_that_does_not_convert_is_malformed(
    spark: SparkSession, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir()
    table = pa.table({"id": [1, 2, 3], "amount": ["1.50", "x4.50", None]})
    pq.write_table(table, tmp_path / "data" / "t.parquet")
    columns = {"id": "int", "amount": "decimal(10,2)"}

    error = _fails(spark, tmp_path, "data/t.parquet", format="parquet", columns=columns)
    kept = _read(
        spark, tmp_path, "data/t.parquet", format="parquet", columns=columns, on_malformed="drop"
    )

    assert error.reason == (
        "data/t.parquet: malformed parquet record: amount: 'x4.50' is not decimal(10,2) "
        "(1 malformed record in this batch)"
    )
    assert kept.malformed == 1
    assert _rows(kept.frame) == [(1, Decimal("1.50")), (3, None)]


def test_inferred_csv_counts_rows_with_the_wrong_number_of_fields(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/bad.csv", "id,name\n1,a\n2,b,extra\n3,c\n")

    error = _fails(spark, tmp_path, "data/bad.csv")

    assert error.reason.startswith("data/bad.csv:3: malformed csv record: 3 fields where 2")


def test_malformed_csv_records_are_dropped_and_counted(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/bad.csv", BAD_CSV)

    read = _read(
        spark,
        tmp_path,
        "data/bad.csv",
        columns={"id": "int", "amount": "double"},
        on_malformed="drop",
    )

    assert read.malformed == 2
    assert _rows(read.frame) == [(1, 1.5), (2, 2.5), (5, 5.5)]


def test_a_declared_column_missing_from_the_header(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/orders.csv", "id,amount\n1,2\n")

    error = _fails(spark, tmp_path, "data/orders.csv", columns={"id": "int", "customer": "string"})

    assert error.reason == "data/orders.csv: declared column 'customer' is not in the CSV header"
    assert "'id', 'amount'" in (error.hint or "")


def test_a_declared_type_spark_does_not_know(spark: SparkSession, tmp_path: Path) -> None:
    """`validate` refuses it first (tests/unit/spec/test_transforms_spec.py); the reader still
    names it, for a config that did not come through a manifest."""
    _write(tmp_path, "data/orders.csv", "id\n1\n")
    config = FilesConfig.model_construct(
        **{**FilesConfig(path="data/*").model_dump(), "columns": {"id": "integerish"}}
    )
    files = [SourceFile("data/orders.csv", 3, hash_file(tmp_path / "data/orders.csv"))]

    with pytest.raises(SourceDataError) as raised:
        read = read_files(spark, tmp_path, config, files)
        read.frame.write.format("noop").mode("overwrite").save()
        read.verify()
    error = raised.value

    assert "'id'" in error.reason and "'integerish'" in error.reason


def test_a_file_gone_since_the_plan(spark: SparkSession, tmp_path: Path) -> None:
    files = [SourceFile("data/gone.csv", 10, "sha256:00")]

    with pytest.raises(SourceDataError) as raised:
        read_files(spark, tmp_path, FilesConfig(path="data/*.csv"), files)

    assert raised.value.reason == "data/gone.csv does not exist (any more)"


def test_an_unknown_encoding(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/a.csv", "id\n1\n")

    error = _fails(spark, tmp_path, "data/a.csv", encoding="klingon-8")

    assert "klingon-8" in error.reason


def test_bytes_the_encoding_cannot_decode_name_their_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/a.csv", "id,nom\n1,Jose\n2,José\n", "latin-1")

    error = _fails(spark, tmp_path, "data/a.csv", on_malformed="drop")

    assert error.reason == "data/a.csv:3: bytes that are not valid utf-8"
    assert "encoding" in (error.hint or "")


def test_bytes_an_encoding_other_than_utf8_cannot_decode_name_their_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/a.csv", "id,nom\n1,Jose\n2,José\n", "latin-1")

    error = _fails(spark, tmp_path, "data/a.csv", encoding="ascii")

    assert error.reason == "data/a.csv:3: bytes that are not valid ascii"


def test_a_replacement_character_that_is_really_in_the_file_is_data(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/a.csv", "id,text\n1,\ufffd\n")

    read = _read(spark, tmp_path, "data/a.csv")

    assert _rows(read.frame) == [(1, "\ufffd")]


# ---------------------------------------------------------------- json


def test_json_lines_infer_types_and_keep_the_files_key_order(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(
        tmp_path,
        "data/e.jsonl",
        '{"zeta": 1, "Prénom": "Zoë", "a b": 1.5}\n\n{"zeta": 2, "a b": 2, "extra": true}\n',
    )

    read = _read(spark, tmp_path, "data/e.jsonl", format="jsonl")

    assert read.frame.columns == ["zeta", "Prénom", "a b", "extra"]
    assert dict(read.frame.dtypes) == {
        "zeta": "bigint",
        "Prénom": "string",
        "a b": "double",
        "extra": "boolean",
    }
    assert _rows(read.frame) == [(1, "Zoë", 1.5, None), (2, None, 2.0, True)]


def test_json_declared_schema_leaves_absent_keys_null(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/e.json", '{"id": 1, "at": "2024-01-02T03:04:05Z"}\n{"id": 2}\n')

    read = _read(
        spark, tmp_path, "data/e.json", format="json", columns={"id": "bigint", "at": "timestamp"}
    )

    assert _rows(read.frame) == [(1, dt.datetime(2024, 1, 2, 3, 4, 5)), (2, None)]


def test_a_json_array_file_is_read_element_by_element(spark: SparkSession, tmp_path: Path) -> None:
    records = [{"id": 1, "tags": {"a": 1}}, {"id": 2, "name": "b"}]
    _write(tmp_path, "data/array.json", "\ufeff  " + json.dumps(records, indent=2))
    _write(tmp_path, "data/lines.json", '{"id": 3, "name": "c"}\n')
    _write(tmp_path, "data/empty.json", "[]")

    read = _read(
        spark, tmp_path, "data/array.json", "data/lines.json", "data/empty.json", format="json"
    )

    assert sorted(read.frame.columns) == ["id", "name", "tags"]
    got = sorted((r["id"], r["name"]) for r in read.frame.collect())
    assert got == [(1, None), (2, "b"), (3, "c")]


def test_json_lines_in_latin1(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/e.jsonl", '{"nom": "José"}\r\n{"nom": "Zoë"}\r\n', "latin-1")

    read = _read(spark, tmp_path, "data/e.jsonl", format="jsonl", encoding="latin-1")

    assert _rows(read.frame) == [("José",), ("Zoë",)]


BAD_JSONL = (
    '{"id": 1}\n'
    '{"id": 2}\n'
    '{"id": 3,\n'  # line 3: cut short
    "[4]\n"  # line 4: not an object
    '{"id": 5}\n'
)


def test_malformed_json_lines_fail_naming_file_and_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/e.jsonl", BAD_JSONL)

    inferred = _fails(spark, tmp_path, "data/e.jsonl", format="jsonl")
    declared = _fails(spark, tmp_path, "data/e.jsonl", format="jsonl", columns={"id": "int"})

    for error in (inferred, declared):
        assert error.reason.startswith("data/e.jsonl:3: malformed jsonl record: not valid JSON")
        assert "2 malformed records" in error.reason


def test_malformed_json_lines_are_dropped_and_counted(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/e.jsonl", BAD_JSONL + '{"id": "six"}\n')

    read = _read(
        spark, tmp_path, "data/e.jsonl", format="jsonl", columns={"id": "int"}, on_malformed="drop"
    )

    assert read.malformed == 3
    assert _rows(read.frame) == [(1,), (2,), (5,)]


def test_json_lines_that_are_all_malformed_drop_to_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/e.jsonl", "not json\n[1, 2]\n")

    read = _read(spark, tmp_path, "data/e.jsonl", format="jsonl", on_malformed="drop")

    assert read.malformed == 2
    assert read.frame.count() == 0


def test_an_array_element_of_the_wrong_type(spark: SparkSession, tmp_path: Path) -> None:
    _write(
        tmp_path, "data/a.json", '[\n  {"id": 1},\n  {"id": 2},\n  {"id": "three"},\n  {"id": 4}\n]'
    )

    error = _fails(spark, tmp_path, "data/a.json", format="json", columns={"id": "int"})
    dropped = _read(
        spark, tmp_path, "data/a.json", format="json", columns={"id": "int"}, on_malformed="drop"
    )

    assert error.reason.startswith("data/a.json:4: malformed json record: element 3")
    assert dropped.malformed == 1
    assert _rows(dropped.frame) == [(1,), (2,), (4,)]


def test_a_broken_json_array_fails_even_when_dropping(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/a.json", '[\n  {"id": 1},\n  {"id": 2}\n  {"id": 3}\n]')

    error = _fails(spark, tmp_path, "data/a.json", format="json", on_malformed="drop")

    assert error.reason.startswith("data/a.json:4: not a valid JSON array")


# ---------------------------------------------------------------- parquet


def test_parquet_written_by_pyarrow(spark: SparkSession, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    at = dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "nom é": pa.array(["a", "b"]),
            "at_ns": pa.array([at, None], pa.timestamp("ns")),
            "at_utc_ns": pa.array([at, at], pa.timestamp("ns", tz="UTC")),
            "at_us": pa.array([at, at], pa.timestamp("us")),
            "amount": pa.array([1.5, 2.5]),
        }
    )
    (tmp_path / "data").mkdir()
    pq.write_table(table, tmp_path / "data" / "t.parquet")

    read = _read(spark, tmp_path, "data/t.parquet", format="parquet")
    declared = _read(
        spark,
        tmp_path,
        "data/t.parquet",
        format="parquet",
        columns={"amount": "decimal(6,2)", "id": "int"},
    )

    assert read.frame.dtypes == [
        ("id", "bigint"),
        ("nom é", "string"),
        ("at_ns", "timestamp_ntz"),
        ("at_utc_ns", "timestamp"),
        ("at_us", "timestamp_ntz"),
        ("amount", "double"),
    ]
    assert _rows(read.frame) == [
        (1, "a", at, at, at, 1.5),
        (2, "b", None, at, at, 2.5),
    ]
    assert _rows(declared.frame) == [(Decimal("1.50"), 1), (Decimal("2.50"), 2)]


def test_nanoseconds_are_floored_to_microseconds_before_1970_too(
    spark: SparkSession, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir()
    ns = pa.array([-1_500, 1_999], pa.timestamp("ns"))  # 1.5 µs before the epoch, 1.999 µs after
    pq.write_table(pa.table({"id": [1, 2], "at": ns}), tmp_path / "data" / "a.parquet")
    pq.write_table(pa.table({"id": [3], "more": ["x"]}), tmp_path / "data" / "b.parquet")

    read = _read(spark, tmp_path, "data/a.parquet", "data/b.parquet", format="parquet")

    epoch = dt.datetime(1970, 1, 1)
    assert _rows(read.frame) == [
        (1, epoch - dt.timedelta(microseconds=2), None),
        (2, epoch + dt.timedelta(microseconds=1), None),
        (3, None, "x"),
    ]


def test_parquet_declared_column_missing(spark: SparkSession, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "data" / "t.parquet")

    error = _fails(spark, tmp_path, "data/t.parquet", format="parquet", columns={"name": "string"})

    assert error.reason == "data/t.parquet: declared column 'name' is not in the file"


# ---------------------------------------------------------------- line numbers in large files


def test_the_first_malformed_record_of_a_file_split_across_tasks(
    spark: SparkSession, tmp_path: Path
) -> None:
    lines = ["id,name"] + [f"{i},name-{i}" for i in range(1, 30_000)]
    lines[20_000] = "20000,two,commas"
    lines[4_321] = "4321"
    _write(tmp_path, "data/big.csv", "\r\n".join(lines) + "\r\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "65536")  # about ten splits
    try:
        error = _fails(spark, tmp_path, "data/big.csv")
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")

    assert error.reason.startswith("data/big.csv:4322: malformed csv record: 1 field where 2")


@pytest.mark.spark_only("Sail's JSON reader refuses a byte order mark in inferred JSON Lines")
def test_json_lines_with_a_byte_order_mark(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path, "data/e.jsonl", '\ufeff{"id": 1}\n{"id": 2}')

    read = _read(spark, tmp_path, "data/e.jsonl", format="jsonl")

    assert read.malformed == 0
    assert _rows(read.frame) == [(1,), (2,)]


def test_json_array_values_are_typed_by_spark_json_rules(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Sail splits and checks the elements in hakiri's tasks: the same verdicts as Spark's parser.
    _write(
        tmp_path,
        "data/a.json",
        "[\n"
        ' {"id": 1, "at": 1700000000, "f": "Infinity", "s": 1.5, "b": true},\n'
        ' {"id": 2, "at": "2024-01-02T03:04:05", "f": 1, "s": "x", "b": false},\n'
        ' {"id": 3, "at": "1700000000"},\n'  # a timestamp's text, not a number of seconds
        ' {"id": 4, "b": "true"},\n'  # a quoted boolean
        ' {"id": 5, "f": "1.5"},\n'  # a quoted double
        ' {"id": 6, "s": {"k": [1, null]}}\n'
        "]",
    )
    columns = {"id": "int", "at": "timestamp", "f": "double", "s": "string", "b": "boolean"}

    read = _read(
        spark, tmp_path, "data/a.json", format="json", columns=columns, on_malformed="drop"
    )

    assert read.malformed == 3
    rows = sorted(read.frame.collect(), key=lambda r: r["id"])
    assert [(r["id"], r["f"], r["s"], r["b"]) for r in rows] == [
        (1, float("inf"), "1.5", True),
        (2, 1.0, "x", False),
        (6, None, '{"k":[1,null]}', None),
    ]
    assert rows[1]["at"] == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert rows[0]["at"] - rows[1]["at"] == dt.datetime.fromtimestamp(1700000000) - dt.datetime(
        2024, 1, 2, 3, 4, 5
    )


def test_an_undeclared_json_array_is_typed_as_spark_infers_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    records = [
        {"a": 1, "b": {"x": 1, "y": [1, 2.5]}, "c": None, "d": [], "e": {}},
        {"a": 2.5, "b": {"x": "s"}, "c": None, "f": 99999999999999999999},
    ]
    _write(tmp_path, "data/a.json", json.dumps(records, indent=1))

    read = _read(spark, tmp_path, "data/a.json", format="json")

    assert read.frame.dtypes == [
        ("a", "double"),
        ("b", "struct<x:string,y:array<double>>"),
        ("c", "string"),
        ("d", "array<string>"),
        ("f", "decimal(20,0)"),
    ]
    assert [tuple(r) for r in sorted(read.frame.collect(), key=lambda r: r["a"])] == [
        (1.0, (("1", [1.0, 2.5])), None, [], None),
        (2.5, ("s", None), None, None, Decimal("99999999999999999999")),
    ]


def test_dropping_csv_records_keeps_what_null_value_says_of_empty_fields(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(tmp_path, "data/a.csv", 'id,name,note\n1,,""\n2,NA,x\n3,b\n')
    columns = {"id": "int", "name": "string", "note": "string"}

    read = _read(
        spark, tmp_path, "data/a.csv", columns=columns, null_value="NA", on_malformed="drop"
    )

    assert read.malformed == 1
    assert _rows(read.frame) == [(1, None, ""), (2, None, "x")]


def test_an_undeclared_json_array_infers_timestamps_with_timestamp_format(
    spark: SparkSession, tmp_path: Path
) -> None:
    _write(
        tmp_path,
        "data/a.json",
        '[{"id": 1, "at": "02.01.2024 03:04", "note": "02.01.2024 03:04"},\n'
        ' {"id": 2, "at": "03.01.2024 00:00", "note": "soon"}]',
    )

    read = _read(spark, tmp_path, "data/a.json", format="json", timestamp_format="dd.MM.yyyy HH:mm")

    assert read.frame.dtypes == [("id", "bigint"), ("at", "timestamp"), ("note", "string")]
    assert _rows(read.frame.select("id", "at")) == [
        (1, dt.datetime(2024, 1, 2, 3, 4)),
        (2, dt.datetime(2024, 1, 3)),
    ]
