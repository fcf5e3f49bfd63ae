"""A files source seen by `plan`: which files the glob matches, their hashes, and the columns a header tells."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from hakiri.errors import SourceUnreachable
from hakiri.sources.base import SourceColumn
from hakiri.sources.files.inspect import has_records, hash_file, inspect_files
from hakiri.spec.pipeline import FilesConfig, TableSpec


def _write(root: Path, relative: str, content: str | bytes, encoding: str = "utf-8") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode(encoding)
    path.write_bytes(content)
    return path


def _inspect(root: Path, path: str, table_path: str | None = None, **config: Any):
    return inspect_files(
        root, FilesConfig(path=path, **config), TableSpec(name="orders", path=table_path)
    )


def _names(observation) -> list[str]:
    assert observation.columns is not None
    return [c.name for c in observation.columns]


# ---------------------------------------------------------------- matching and hashing


def test_files_are_listed_sorted_with_size_and_sha256(tmp_path: Path) -> None:
    _write(tmp_path, "data/b.csv", "id\n2\n")
    _write(tmp_path, "data/a.csv", "id\n1\n")
    _write(tmp_path, "data/notes.txt", "not a match")

    seen = _inspect(tmp_path, "data/*.csv")

    assert [f.path for f in seen.files] == ["data/a.csv", "data/b.csv"]
    first = seen.files[0]
    assert first.size == len(b"id\n1\n")
    assert first.content_hash == "sha256:" + hashlib.sha256(b"id\n1\n").hexdigest()
    assert seen.table == "orders" and seen.notes == ()


def test_hash_file_streams_large_files_and_equals_hashlib(tmp_path: Path) -> None:
    # Over two 1 MiB blocks, ending mid-block.
    content = bytes(range(256)) * (10 * 1024 + 7)
    path = _write(tmp_path, "big.bin", content)

    assert hash_file(path) == "sha256:" + hashlib.sha256(content).hexdigest()
    assert hash_file(str(path)) == hash_file(path)
    assert (
        hash_file(_write(tmp_path, "empty.bin", b"")) == "sha256:" + hashlib.sha256(b"").hexdigest()
    )


def test_double_star_matches_nested_directories_and_skips_directories(tmp_path: Path) -> None:
    _write(tmp_path, "data/2024/01/x.csv", "id\n1\n")
    _write(tmp_path, "data/2024/y.csv", "id\n2\n")
    _write(tmp_path, "data/z.csv", "id\n3\n")
    (tmp_path / "data" / "dir.csv").mkdir()

    seen = _inspect(tmp_path, "data/**/*.csv")

    assert [f.path for f in seen.files] == ["data/2024/01/x.csv", "data/2024/y.csv", "data/z.csv"]


def test_table_path_overrides_the_config_path(tmp_path: Path) -> None:
    _write(tmp_path, "data/orders/o.csv", "id\n1\n")
    _write(tmp_path, "data/other/p.csv", "id\n1\n")

    seen = _inspect(tmp_path, "data/other/*.csv", table_path="data/orders/*.csv")

    assert [f.path for f in seen.files] == ["data/orders/o.csv"]


def test_absolute_globs_show_paths_relative_inside_and_absolute_outside_the_project(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    _write(project, "data/in.csv", "id\n1\n")
    outside = _write(tmp_path, "shared/out.csv", "id\n1\n")

    inside = _inspect(project, str(project / "data" / "*.csv"))
    beyond = _inspect(project, str(tmp_path / "shared" / "*.csv"))
    climbing = _inspect(project, "../shared/*.csv")

    assert [f.path for f in inside.files] == ["data/in.csv"]
    assert [f.path for f in beyond.files] == [outside.as_posix()]
    assert [f.path for f in climbing.files] == [outside.as_posix()]


def test_a_glob_matching_nothing_is_a_note_not_an_error(tmp_path: Path) -> None:
    seen = _inspect(tmp_path, "data/x/*.csv")

    assert seen.files == ()
    assert seen.columns is None
    assert seen.notes == ("glob 'data/x/*.csv' matched no file",)


# ---------------------------------------------------------------- csv


def test_csv_header_with_bom_and_semicolons(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", '\ufeffid;Prix €;"quoted;name"\r\n1;2,50;x\r\n')

    seen = _inspect(tmp_path, "d/*.csv", delimiter=";")

    assert seen.columns == (
        SourceColumn("id", None),
        SourceColumn("Prix €", None),
        SourceColumn("quoted;name", None),
    )


def test_csv_header_in_another_encoding(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", "id,année\n1,2024\n", encoding="latin-1")

    assert _names(_inspect(tmp_path, "d/*.csv", encoding="latin-1")) == ["id", "année"]


def test_csv_without_header_is_named_like_spark(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", "\n1,Ada,3.5\n2,Grace,4\n")

    assert _names(_inspect(tmp_path, "d/*.csv", header=False)) == ["_c0", "_c1", "_c2"]


def test_csv_blank_and_duplicate_header_names_follow_spark(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", "id,,Name,name,amount\n")

    assert _names(_inspect(tmp_path, "d/*.csv")) == ["id", "_c1", "Name2", "name3", "amount"]


def test_an_empty_first_file_lets_the_next_one_name_the_columns(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", "")
    _write(tmp_path, "d/b.csv", "id,amount\n1,2\n")

    assert _names(_inspect(tmp_path, "d/*.csv")) == ["id", "amount"]


def test_only_empty_files_give_no_columns_and_say_why(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", "\n\n")

    seen = _inspect(tmp_path, "d/*.csv")

    assert seen.columns is None and len(seen.files) == 1
    assert seen.notes == ("no csv record in the matched files to take column names from",)


def test_a_header_that_does_not_decode_is_one_line_error_naming_the_file(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", b"id,ann\xe9e\n")

    with pytest.raises(SourceUnreachable) as caught:
        _inspect(tmp_path, "d/*.csv")

    assert caught.value.reason.startswith("cannot read d/a.csv: 'utf-8' codec can't decode")
    assert "\n" not in caught.value.reason
    assert "encoding" in (caught.value.hint or "")


def test_an_unknown_encoding_is_named(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", "id\n")

    with pytest.raises(SourceUnreachable, match="unknown encoding 'klingon'"):
        _inspect(tmp_path, "d/*.csv", encoding="klingon")


# ---------------------------------------------------------------- declared columns


def test_declared_columns_win_and_no_file_is_parsed(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.csv", b"\xff\xfe not even text \x00")

    seen = _inspect(tmp_path, "d/*.csv", columns={"id": "bigint", "amount": "decimal(12,2)"})

    assert seen.columns == (SourceColumn("id", "bigint"), SourceColumn("amount", "decimal(12,2)"))
    assert len(seen.files) == 1


def test_declared_columns_are_known_even_before_any_file_arrives(tmp_path: Path) -> None:
    seen = _inspect(tmp_path, "d/*.csv", columns={"id": "bigint"})

    assert seen.columns == (SourceColumn("id", "bigint"),)
    assert seen.files == () and seen.notes == ("glob 'd/*.csv' matched no file",)


# ---------------------------------------------------------------- json


def test_jsonl_columns_are_the_union_of_keys_in_first_seen_order(tmp_path: Path) -> None:
    lines = [{"id": 1, "name": "a"}, {"id": 2, "amount": 3.5}, {"name": "c", "tags": [], "id": 3}]
    _write(tmp_path, "d/a.jsonl", "\ufeff" + "\n".join(json.dumps(r) for r in lines) + "\n\n")

    seen = _inspect(tmp_path, "d/*.jsonl", format="jsonl")

    assert seen.columns == tuple(SourceColumn(n) for n in ["id", "name", "amount", "tags"])


def test_only_the_first_hundred_json_records_count(tmp_path: Path) -> None:
    records = [{"id": i} for i in range(100)] + [{"id": 100, "late": True}]
    _write(tmp_path, "d/a.jsonl", "\n".join(json.dumps(r) for r in records))

    assert _names(_inspect(tmp_path, "d/*.jsonl", format="jsonl")) == ["id"]


def test_the_sample_continues_into_the_next_file(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.jsonl", '{"id": 1}\n')
    _write(tmp_path, "d/b.jsonl", '{"id": 2, "extra": "x"}\n')

    assert _names(_inspect(tmp_path, "d/*.jsonl", format="jsonl")) == ["id", "extra"]


def test_json_array_files_are_read_as_arrays_of_objects(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.json", ' \n [ {"id": 1, "b": {"nested": 1}},\n {"c": null, "id": 2} ]\n')

    assert _names(_inspect(tmp_path, "d/*.json", format="json")) == ["id", "b", "c"]


def test_json_without_an_array_is_json_lines(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.json", '{"id": 1}\n{"x": 2}\n')

    assert _names(_inspect(tmp_path, "d/*.json", format="json")) == ["id", "x"]


def test_a_large_json_array_is_decoded_across_chunks(tmp_path: Path) -> None:
    big = "x" * 200_000  # one element larger than a read chunk
    records = [{"id": 0, "blob": big}] + [{"id": i, f"k{i}": i} for i in range(1, 150)]
    _write(tmp_path, "d/a.json", json.dumps(records, indent=1))

    names = _names(_inspect(tmp_path, "d/*.json", format="json"))

    assert names == ["id", "blob"] + [f"k{i}" for i in range(1, 100)]


def test_an_empty_json_array_gives_no_columns(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.json", "[ ]")

    assert _inspect(tmp_path, "d/*.json", format="json").columns is None


def test_a_malformed_json_line_fails_with_its_line_number(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.jsonl", '{"id": 1}\n\n{"id": 2,,}\n')

    with pytest.raises(SourceUnreachable) as caught:
        _inspect(tmp_path, "d/*.jsonl", format="jsonl")

    assert caught.value.reason.startswith("cannot read d/a.jsonl: line 3:")
    assert "on_malformed" in (caught.value.hint or "")


def test_malformed_records_are_skipped_when_the_source_drops_them(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.jsonl", '{"id": 1}\nnot json\n[1, 2]\n{"x": 2}\n')

    seen = _inspect(tmp_path, "d/*.jsonl", format="jsonl", on_malformed="drop")

    assert _names(seen) == ["id", "x"]


def test_an_unclosed_json_array_is_malformed(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.json", '[{"id": 1}, {"id": 2')

    with pytest.raises(
        SourceUnreachable, match=r"^cannot read d/a\.json: element 2 of the JSON array"
    ):
        _inspect(tmp_path, "d/*.json", format="json")


# ---------------------------------------------------------------- parquet


def test_parquet_columns_come_from_the_footer_with_arrow_types(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": pa.array([1], pa.int64()),
            "name": pa.array(["a"], pa.string()),
            "amount": pa.array([None], pa.decimal128(12, 2)),
            "at": pa.array([0], pa.timestamp("us", tz="UTC")),
        }
    )
    (tmp_path / "d").mkdir()
    pq.write_table(table, tmp_path / "d" / "part-0.parquet")

    seen = _inspect(tmp_path, "d/*.parquet", format="parquet")

    assert seen.columns == (
        SourceColumn("id", "int64"),
        SourceColumn("name", "string"),
        SourceColumn("amount", "decimal128(12, 2)"),
        SourceColumn("at", "timestamp[us, tz=UTC]"),
    )


def test_a_file_that_is_not_parquet_is_one_line_error(tmp_path: Path) -> None:
    _write(tmp_path, "d/a.parquet", "id,amount\n1,2\n")

    with pytest.raises(SourceUnreachable) as caught:
        _inspect(tmp_path, "d/*.parquet", format="parquet")

    assert caught.value.reason.startswith("cannot read d/a.parquet: ")
    assert "\n" not in caught.value.reason


def test_wildcard_characters_in_the_project_directory_are_not_wildcards(tmp_path: Path) -> None:
    project = tmp_path / "proj[1]*"
    _write(project, "data/a.csv", "id\n1\n")

    assert [f.path for f in _inspect(project, "data/*.csv").files] == ["data/a.csv"]


@pytest.mark.parametrize(
    ("fmt", "content", "expected"),
    [
        ("csv", "id,name\n", False),
        ("csv", "id,name\r\n\r\n", False),
        ("csv", "\ufeffid,name\n1,a\n", True),
        ("csv", "", False),
        ("json", "[]", False),
        ("json", " [\n\n ]\n", False),
        ("json", '[{"id": 1}]', True),
        ("json", "\n", False),
        ("jsonl", "\n\n  \n", False),
        ("jsonl", '{"id": 1}\n', True),
        ("jsonl", "not json\n", True),  # a malformed record is still data: the read judges it
    ],
)
def test_has_records_reads_only_up_to_the_first_record(
    tmp_path: Path, fmt: str, content: str, expected: bool
) -> None:
    path = _write(tmp_path, f"f.{fmt}", content)
    assert has_records(FilesConfig(path="f", format=fmt), path, "f") is expected


def test_has_records_of_a_headerless_csv_counts_the_first_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "f.csv", "1,a\n")
    assert has_records(FilesConfig(path="f", header=False), path, "f")


def test_has_records_of_parquet_reads_the_footer(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": pa.array([], pa.int64())}), tmp_path / "e.parquet")
    pq.write_table(pa.table({"id": [1]}), tmp_path / "f.parquet")
    config = FilesConfig(path="x", format="parquet")
    assert not has_records(config, tmp_path / "e.parquet", "e.parquet")
    assert has_records(config, tmp_path / "f.parquet", "f.parquet")
