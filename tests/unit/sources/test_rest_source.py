"""The rest source's pure parts: inferred columns, params filled from a range, walk batches,
and the end a task records for the next batch of a walk."""

from __future__ import annotations

from pathlib import Path

from hakiri.sources.cursors.ranges import CursorRange
from hakiri.sources.rest.engine_read import record_end, recorded_end
from hakiri.sources.rest.paginate import PagePosition
from hakiri.sources.rest.source import WalkPart, _params, infer_columns
from hakiri.spec.rest import RestEndpoint


def test_columns_are_inferred_from_every_record_of_the_page() -> None:
    records = [
        {"id": 1, "score": 1, "at": "2024-05-01T10:00:00Z", "user": {"login": "a"}, "tags": []},
        {"id": 2, "score": 2.5, "at": None, "user": {"login": "b", "id": 7}, "tags": ["x"]},
        {"id": 3, "odd": "text", "flag": True, "when": "2024-05-01"},
    ]
    found = {c.name: c.type for c in infer_columns(records)}
    assert found == {
        "id": "bigint",
        "score": "double",
        "at": "timestamp",
        "user": "struct<`login`: string, `id`: bigint>",
        "tags": "array<string>",
        "odd": "string",
        "flag": "boolean",
        "when": "string",
    }
    assert [c.name for c in infer_columns(records)][:3] == ["id", "score", "at"]


def test_a_field_whose_values_disagree_is_text() -> None:
    found = {c.name: c.type for c in infer_columns([{"v": 1}, {"v": "one"}, {"v": {"a": 1}}])}
    assert found == {"v": "string"}


def test_a_key_that_is_no_plain_name_is_read_by_a_quoted_path() -> None:
    [column] = infer_columns([{"first name": "Ada"}])
    assert column.path == "['first name']"


def _range(lo: str | None, hi: str | None) -> CursorRange:
    return CursorRange("updated_at", "timestamp", "timestamp with time zone", lo, hi, False, True)


def test_params_carry_the_range_and_leave_out_what_it_does_not_have() -> None:
    endpoint = RestEndpoint(
        path="orders",
        params={"since": "{cursor}", "until": "{cursor_end}", "status": "any"},
    )
    chunk = _range("2024-01-01T00:00:00+00:00", "2024-02-01T12:30:00+00:00")
    assert _params(endpoint, chunk) == {
        "since": "2024-01-01T00:00:00Z",
        "until": "2024-02-01T12:30:00Z",
        "status": "any",
    }
    # the first range starts at the epoch: the API is asked for everything
    first = _range("1970-01-01T00:00:00+00:00", "2024-02-01T12:30:00+00:00")
    assert _params(endpoint, first) == {"until": "2024-02-01T12:30:00Z", "status": "any"}
    assert _params(endpoint, None) == {"status": "any"}


def test_walk_batches_have_ids_that_name_their_place() -> None:
    part = WalkPart(2, 3, {"token": "abc"}, 50)
    batch = part.batch("orders")
    assert batch.batch_id == "walk:orders:w2:s3" and batch.kind == "walk"
    assert WalkPart.of(batch) == part
    assert part.describe() == "walk 2: from page token abc, up to 50 page(s)"
    assert WalkPart(1, 0, None, None).describe() == "walk 1: from the first page, to the last page"


def test_a_walk_end_is_recorded_whole_and_read_back(tmp_path: Path) -> None:
    target = tmp_path / "walks" / "p" / "end.json"
    assert recorded_end(str(target)) == (False, None)
    record_end(str(target), PagePosition("token", "t-5"))
    assert recorded_end(str(target)) == (True, {"token": "t-5"})
    record_end(str(target), None)  # the last page: the walk is over
    assert recorded_end(str(target)) == (True, None)
    assert [p.name for p in target.parent.iterdir()] == ["end.json"]
