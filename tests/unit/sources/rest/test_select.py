"""Simple JSON paths find records, links and tokens in a response body."""

from __future__ import annotations

import pytest

from hakiri.errors import SourceDataError
from hakiri.sources.rest.select import EVERY, JsonPath, select_records

BODY = {
    "data": {"items": [{"id": 1}, {"id": 2}], "next": None},
    "pages": [{"next": "p2"}, {"next": "p3"}],
    "odd key": {"x": 7},
}


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("$", ()),
        ("", ()),
        ("data.items", ("data", "items")),
        ("$.data.items", ("data", "items")),
        ("$.data[*]", ("data", EVERY)),
        ("$.pages[0].next", ("pages", 0, "next")),
        ("$['odd key'].x", ("odd key", "x")),
        ('$["*"]', ("*",)),  # quoted: a key, not a wildcard
    ],
)
def test_paths_parse_into_steps(text: str, steps: tuple) -> None:
    assert JsonPath.parse(text).steps == steps


@pytest.mark.parametrize("text", ["$..items", "$.items[?(@.id)]", "$.items[1:3]", "data..x"])
def test_what_this_subset_cannot_read_is_refused_with_the_place(text: str) -> None:
    with pytest.raises(ValueError, match="cannot read JSON path"):
        JsonPath.parse(text)


def test_find_and_first() -> None:
    assert JsonPath.parse("$.pages[*].next").find(BODY) == ["p2", "p3"]
    assert JsonPath.parse("pages[-1].next").first(BODY) == "p3"
    assert JsonPath.parse("$['odd key'].x").first(BODY) == 7
    assert JsonPath.parse("data.next").find(BODY) == [None]
    assert JsonPath.parse("data.missing").first(BODY) is None


def test_records_are_a_lists_elements_or_one_object() -> None:
    items = [{"id": 1}, {"id": 2}]

    assert select_records(BODY, JsonPath.parse("data.items"), where="GET /x") == items
    assert select_records(BODY, JsonPath.parse("$.data.items[*]"), where="GET /x") == items
    assert select_records(items, JsonPath.parse("$"), where="GET /x") == items
    assert select_records({"id": 9}, JsonPath.parse("$"), where="GET /x") == [{"id": 9}]
    assert select_records({"items": None}, JsonPath.parse("items"), where="GET /x") == []


def test_a_selector_that_finds_nothing_names_what_the_response_has() -> None:
    with pytest.raises(SourceDataError) as caught:
        select_records(BODY, JsonPath.parse("results"), where="GET /x")

    assert str(caught.value) == (
        "GET /x: the record selector 'results' finds nothing in the response "
        "(it has keys data, pages, odd key)"
    )


def test_records_must_be_objects() -> None:
    with pytest.raises(SourceDataError, match="finds a int, not a JSON object"):
        select_records({"ids": [1, 2]}, JsonPath.parse("ids"), where="GET /x")
