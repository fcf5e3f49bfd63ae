"""The csv/json reading options of a files source (null_value, quote, date_format, column_names, …)
are checked when the manifest loads: `hakiri validate` names each refused one with its file,
line and key, and what to do instead."""

from __future__ import annotations

import pytest

from hakiri.spec.datetime_patterns import pattern_problem
from tests.unit.conftest import MINIMAL, error_lines


def _pipeline(pipeline_id: str, config: str) -> str:
    return f"""
[[pipeline]]
id = "{pipeline_id}"
tables = ["t"]
source = {{ connector = "files", config = {{ {config} }} }}
"""


def test_every_option_accepted_when_it_fits_the_format(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + _pipeline(
            "flights",
            'path = "f.csv", null_value = "NA", nan_value = "n/a", quote = "\'", escape = "\\\\", '
            'comment = "#", date_format = "dd/MM/yyyy", timestamp_format = "yyyy-MM-dd\'T\'HH:mm:ss[.SSS]XXX"',
        )
        + _pipeline(
            "raw", 'path = "r.csv", header = false, column_names = ["id", "name"], quote = ""'
        )
        + _pipeline(
            "events", 'path = "e.json", format = "json", timestamp_format = "dd/MM/yyyy HH:mm"'
        ),
    )

    result = cli("validate")

    assert result.exit_code == 0, result.stderr


def test_csv_options_with_another_format_are_refused(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + _pipeline("a", 'path = "a.json", format = "json", null_value = "NA"')
        + _pipeline("b", 'path = "b.jsonl", format = "jsonl", quote = "\'"')
        + _pipeline("c", 'path = "c.parquet", format = "parquet", date_format = "yyyy-MM-dd"')
        + _pipeline("d", 'path = "d.json", format = "json", column_names = ["x"]'),
    )

    result = cli("validate")

    assert result.exit_code == 1
    assert error_lines(result) == [
        "error: `null_value` applies to csv files, and format is 'json' "
        "(hakiri.toml:7 at pipeline[0].source.config.null_value)",
        "error: `quote` applies to csv files, and format is 'jsonl' "
        "(hakiri.toml:12 at pipeline[1].source.config.quote)",
        "error: `date_format` applies to csv and json and jsonl files, and format is 'parquet' "
        "(hakiri.toml:17 at pipeline[2].source.config.date_format)",
        "error: `column_names` applies to csv files, and format is 'json' "
        "(hakiri.toml:22 at pipeline[3].source.config.column_names)",
        "error: 4 problems in the project manifests",
    ]
    assert "hint: remove `null_value` from the source config" in result.stderr


def test_quote_escape_and_comment_are_one_character(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + """
[[pipeline]]
id = "p"
tables = ["t"]

[pipeline.source]
connector = "files"

[pipeline.source.config]
path = "p.csv"
quote = "''"
escape = ""
comment = "//"
""",
    )

    result = cli("validate")

    assert result.exit_code == 1
    assert error_lines(result) == [
        'error: `quote` must be one character, or "" for no quoting, not "\'\'" '
        "(hakiri.toml:13 at pipeline[0].source.config.quote)",
        "error: `escape` must be one character, not '' "
        "(hakiri.toml:14 at pipeline[0].source.config.escape)",
        "error: `comment` must be one character, not '//' "
        "(hakiri.toml:15 at pipeline[0].source.config.comment)",
        "error: 3 problems in the project manifests",
    ]
    assert 'hint: e.g. quote = "\'"' in result.stderr
    assert 'hint: e.g. escape = "\\\\"' in result.stderr
    assert 'hint: e.g. comment = "#"' in result.stderr


def test_cross_key_rules_point_at_the_key_they_are_about(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + _pipeline("a", 'path = "a.csv", delimiter = "#", comment = "#"')
        + _pipeline("b", 'path = "b.csv", delimiter = "|", quote = "|"')
        + _pipeline("c", 'path = "c.csv", null_value = "NA", nan_value = "NA"')
        + _pipeline("d", 'path = "d.csv", column_names = ["id", "name"]')
        + _pipeline(
            "e",
            'path = "e.csv", header = false, column_names = ["id"], columns = { id = "int" }',
        ),
    )

    result = cli("validate")

    assert result.exit_code == 1
    assert error_lines(result) == [
        "error: `comment` and `delimiter` are both '#' "
        "(hakiri.toml:7 at pipeline[0].source.config.comment)",
        "error: `quote` and `delimiter` are both '|' "
        "(hakiri.toml:12 at pipeline[1].source.config.quote)",
        "error: `null_value` and `nan_value` are both 'NA': a field cannot mean NULL and NaN "
        "at once (hakiri.toml:17 at pipeline[2].source.config.nan_value)",
        "error: `column_names` names the columns of a file without a header, and `header` is "
        "true (hakiri.toml:22 at pipeline[3].source.config.column_names)",
        "error: `column_names` and `columns` both name the columns "
        "(hakiri.toml:27 at pipeline[4].source.config.column_names)",
        "error: 5 problems in the project manifests",
    ]
    assert "hint: set header = false if the files have no header line" in result.stderr
    assert "hint: remove `column_names`: with header = false, `columns` names and types" in (
        result.stderr
    )


def test_column_names_must_differ_beyond_case_and_be_non_empty(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + _pipeline("a", 'path = "a.csv", header = false, column_names = ["id", "Name", "NAME"]')
        + _pipeline("b", 'path = "b.csv", header = false, column_names = []')
        + _pipeline("c", 'path = "c.csv", null_value = ""'),
    )

    result = cli("validate")

    assert result.exit_code == 1
    assert error_lines(result) == [
        "error: `column_names` names 'Name' and 'NAME': Spark compares column names without "
        "case, so they are one column twice (hakiri.toml:7 at pipeline[0].source.config.column_names)",
        "error: [] should be non-empty (hakiri.toml:12 at pipeline[1].source.config.column_names)",
        "error: expected a non-empty string, got an empty one "
        "(hakiri.toml:17 at pipeline[2].source.config.null_value)",
        "error: 3 problems in the project manifests",
    ]


def test_datetime_patterns_outside_hakiris_language_are_caught_in_json_manifests_too(
    project, cli
) -> None:
    project.write("hakiri.toml", MINIMAL)
    project.write(
        "pipelines/p.json",
        """
    {
      "id": "p",
      "source": {"connector": "files", "config": {
        "path": "p.csv",
        "date_format": "YYYY-MM-dd",
        "timestamp_format": "yyyy-MM-ddTHH:mm:ss"
      }},
      "tables": ["t"]
    }
    """,
    )

    result = cli("validate")

    assert result.exit_code == 1
    assert error_lines(result) == [
        "error: `date_format`: the pattern letter 'Y' (week-based year) in 'YYYY-MM-dd' is not "
        "in hakiri's datetime patterns (pipelines/p.json:5 at source.config.date_format)",
        "error: `timestamp_format`: 'T' is not a datetime pattern letter "
        "('yyyy-MM-ddTHH:mm:ss') (pipelines/p.json:6 at source.config.timestamp_format)",
        "error: 2 problems in the project manifests",
    ]
    assert "hint: use y; see the pattern table in docs/sources.md" in result.stderr
    assert "hint: put literal letters in single quotes, e.g. yyyy-MM-dd'T'HH:mm:ss" in (
        result.stderr
    )


# hakiri's pattern language (spec.datetime_patterns; docs/sources.md): what it reads.
@pytest.mark.parametrize(
    "pattern",
    [
        "yyyy-MM-dd",
        "dd/MM/yyyy HH.mm.ss",
        "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
        "yyyy[-MM[-dd]]",
        "'o''clock' H",
        "MMM d, yyyy h:mm a",
        "EEE, dd MMM yyyy HH:mm:ss Z",
        "EEEE d MMMM yy",
        "yyyyMMddHHmmss",
        "yyyy-DDD",
        "yyyy-MM-dd HH:mm:ss.SSSSSSSSSx",
    ],
)
def test_patterns_in_hakiris_language_are_accepted(pattern: str) -> None:
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("yyyy-MM-dd'T", "has an unclosed single quote"),
        ("yyyy-ww", "the pattern letter 'w' (week of week-based year)"),
        ("yyyy QQ", "the pattern letter 'Q' (quarter)"),
        ("yyyy-MM-dd HH:mm:ss.n", "the pattern letter 'n' (nano of second)"),
        ("yyyy-MM-dd HH:mm z", "the pattern letter 'z' (zone name)"),
        ("yy.MM.dd kk:mm", "the pattern letter 'k' (clock hour 1-24)"),
        ("yyyy-MM-dd]", "closes an optional part with ']' that no '[' opened"),
        ("yyyy[-MM", "opens an optional part with '[' that no ']' closes"),
        ("yyyy #", "'#' is reserved"),
        ("ddd/MM/yyyy", "'ddd' in 'ddd/MM/yyyy': hakiri takes 1 to 2 'd' in a row"),
        ("MMMMM yyyy", "1 to 4 'M' in a row"),
        ("yyyyy", "1 to 4 'y' in a row"),
        ("yyyy-MM-dd HH:mm:ss.SSSSSSSSSS", "1 to 9 'S' in a row"),
        ("yyyy-MM-dd at HH", "'t' is not a datetime pattern letter"),
        ("hh:mm", "has h (hour 1-12) without a (AM/PM)"),
        ("HH:mm a", "has a (AM/PM) without h"),
        ("yyyy-DDD-MM", "has D (day of year) together with M or d"),
        ("yyyy-MM-dd yyyy", "has 'y' twice"),
        ("HH:mm X Z", "has an offset twice"),
    ],
)
def test_patterns_outside_hakiris_language_are_named(pattern: str, reason: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None
    assert reason in problem[0]
    assert problem[1]
