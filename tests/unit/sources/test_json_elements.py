"""The streaming splitter of a JSON array's elements (what Sail's read of a JSON array runs in
its tasks): the same elements as json.loads, whatever the chunk boundaries, the line each
element starts on, and a file that is not one valid array marked broken."""

from __future__ import annotations

import codecs
import io
import json
import random
from decimal import Decimal
from typing import Any

import pytest

from hakiri.sources.files import json_elements


def _split(text: str) -> list[tuple[Any, ...]]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    return list(json_elements._elements(json_elements._decoded(io.BytesIO(text.encode()), decoder)))


def _documents() -> list[str]:
    rng = random.Random(1)
    documents = []
    for n in range(60):
        elements: list[Any] = []
        for i in range(rng.randint(0, 20)):
            r = rng.random()
            if r < 0.7:
                elements.append(
                    {"id": i, "s": "x" * rng.randint(0, 200) + "\né]", "n": [1.25, None]}
                )
            else:
                elements.append(i if r < 0.85 else "a string, with ] and [")
        indent = rng.choice([None, 1, 2])
        documents.append(
            ("\ufeff \n" if n % 2 else "") + json.dumps(elements, indent=indent) + "\n"
        )
    return documents


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1 << 16])
def test_elements_are_those_json_loads_reads_whatever_the_chunks(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(json_elements, "_CHUNK", chunk)
    for document in _documents():
        found = _split(document)
        assert [value for _, _, _, value, _ in found] == json.loads(
            document.removeprefix("\ufeff"), parse_float=Decimal
        )
        assert [index for index, *_ in found] == list(range(len(found)))
        for _, _, text, value, _ in found:  # each element's own text
            assert json.loads(text, parse_float=Decimal) == value


@pytest.mark.parametrize(
    "text",
    ['[{"a": 1} {"b": 2}]', '[{"a": 1},]', "[1, 2", "[1] x", "[", "[] []", '[{"a": tru}]'],
)
def test_a_file_that_is_not_one_valid_array_ends_with_a_broken_mark(text: str) -> None:
    found = _split(text)
    assert found[-1][0] is None  # the broken mark: no index
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_each_element_has_the_line_it_starts_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_elements, "_CHUNK", 3)
    found = _split('[\n  {"id": 1},\n\n  {"id": 2}, {"id": 3},\n 4\n]')
    assert [(index, line) for index, line, *_ in found] == [(0, 2), (1, 4), (2, 4), (3, 5)]


def test_values_are_checked_by_spark_json_parser_rules() -> None:
    check = json_elements.field_text
    assert check("1", "integral") == (None, True)  # a quoted number is no int
    assert check(Decimal("1.5"), "integral") == (None, True)
    assert check(7, "integral") == ("7", False)
    assert check("Infinity", "fractional") == ("Infinity", False)
    assert check("1.5", "fractional") == (None, True)
    assert check("1.5", "decimal") == ("1.5", False)  # a decimal takes a string
    assert check("true", "boolean") == (None, True)
    assert check(3, "datetime") == (None, True)  # a number is no date
    assert check(1700000000, "timestamp") == ("#1700000000", False)  # but seconds for a timestamp
    assert check({"k": [1, None]}, "string") == ('{"k":[1,null]}', False)
    assert check([1], "object") == (None, True)
    assert check(None, "integral") == (None, False)
