"""The types plan guesses for an undeclared CSV, by apply's inference rules, from a sample."""

from __future__ import annotations

from hakiri.sources.files.csv_sample import SAMPLE_ROWS, sample_csv_types
from hakiri.spec.pipeline import FilesConfig


def _config(**options: object) -> FilesConfig:
    return FilesConfig(path="data/*.csv", **options)  # type: ignore[arg-type]


def _types(records: list[list[str]], **options: object) -> dict[str, str]:
    names = ["a", "b", "c", "d", "e", "f", "g"][: len(records[0])]
    sample = sample_csv_types(_config(**options), names, records)
    assert sample is not None
    return dict(sample.types)


def test_the_narrowest_type_every_value_fits() -> None:
    records = [
        ["1", "3000000000", "1.5", "true", "2024-01-02", "2024-01-02T03:04:05Z", "x"],
        ["-2", "7", "2", "FALSE", "2024-02-29", "2024-01-02", "1"],
        ["", "", "", "", "", "", ""],
    ]
    assert _types(records) == {
        "a": "int",
        "b": "bigint",
        "c": "double",
        "d": "boolean",
        "e": "date",
        "f": "timestamp",
        "g": "string",
    }


def test_edge_values() -> None:
    assert _types([["99999999999999999999"], ["1"]]) == {"a": "decimal(38,0)"}
    assert _types([["NaN"], ["1e5"], ["-Infinity"]]) == {"a": "double"}
    assert _types([["2024-02-30"]]) == {"a": "string"}  # no such day
    assert _types([["1_000"]]) == {"a": "string"}
    assert _types([["NA"], ["1"]], null_value="NA") == {"a": "int"}
    # a custom date pattern is Java's: the sample leaves the column to apply
    sample = sample_csv_types(_config(date_format="dd.MM.yyyy"), ["a"], [["02.01.2024"]])
    assert sample is not None and sample.unjudged == ("a",)


def test_money_by_name_or_by_cents_and_a_bounded_sample() -> None:
    sample = sample_csv_types(
        _config(), ["amount", "ratio", "score"], [["1.25", "0.125", "3.10"], ["2", "1.5", "4.00"]]
    )
    assert sample is not None and sample.money == ("amount", "score")
    many = ([str(i)] for i in range(SAMPLE_ROWS * 5))
    sample = sample_csv_types(_config(), ["a"], many)
    assert sample is not None and sample.rows == SAMPLE_ROWS
    assert sample_csv_types(_config(), ["a", "b"], [["only one field"]]) is None
