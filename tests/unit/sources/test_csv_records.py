"""CSV records split line by line as Apache Spark's reader takes them (what Sail's read under
on_malformed = "drop" runs in its tasks): a record of the wrong width is kept aside with its
line, a quoted newline ends the record, empty fields are NULL (quoted ones are empty strings
once `null_value` is set)."""

from __future__ import annotations

from pathlib import Path

from hakiri.sources.files.csv_records import _records
from hakiri.spec.pipeline import FilesConfig


def _split(tmp_path: Path, text: str, **config: object) -> list[tuple[str | None, ...]]:
    path = tmp_path / "a.csv"
    path.write_bytes(text.encode())
    return list(_records(FilesConfig(path="*.csv", **config), str(path), "utf-8", 3))


def test_records_of_the_wrong_width_are_kept_aside_with_their_line(tmp_path: Path) -> None:
    text = '\ufeffid,name,note\r\n1,a,x\n2,b\n\n3,"c, d","line one\nline two"\n4,e,f,g\n'
    assert _split(tmp_path, text) == [
        ("1", "a", "x", None),
        (None, None, None, "2,b"),
        ("3", "c, d", "line one", None),  # the quote ends with its line, as Spark reads it
        (None, None, None, 'line two"'),
        (None, None, None, "4,e,f,g"),
    ]


def test_empty_fields_are_null_and_quoted_ones_empty_once_null_value_is_set(
    tmp_path: Path,
) -> None:
    text = 'id,name,note\n1,,""\n2,NA,"a ""q"""\n'
    assert _split(tmp_path, text) == [("1", None, None, None), ("2", "NA", 'a "q"', None)]
    assert _split(tmp_path, text, null_value="NA") == [
        ("1", None, "", None),
        ("2", None, 'a "q"', None),
    ]


def test_comments_and_header_less_files(tmp_path: Path) -> None:
    text = "# a comment\n1,a,x\n#2,b\n3,c\n"
    assert _split(tmp_path, text, header=False, comment="#") == [
        ("1", "a", "x", None),
        (None, None, None, "3,c"),
    ]
