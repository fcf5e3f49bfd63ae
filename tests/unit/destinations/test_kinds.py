"""Destination kinds are registered once (`destinations.kinds`); nothing outside
`hakiri.destinations` (and the manifest's own vocabulary in `hakiri.spec`) tests a kind's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import hakiri
from hakiri.destinations.kinds import KINDS, engine_needs, kind_of
from hakiri.errors import HakiriError
from hakiri.spec.pipeline import PipelineSpec

SRC = Path(hakiri.__file__).parent
# `x.kind == "postgres"`, `"context" in kinds`, `destination_kind(...) == "context"` …
_TESTS_A_KIND = re.compile(
    r"""kind\)?\s*[!=]=\s*["'](?:postgres|context)["']|["'](?:postgres|context)["']\s+(?:not\s+)?in\s+\w*kinds"""
)


def test_no_module_outside_destinations_tests_a_kinds_name() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] not in ("destinations", "spec")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _TESTS_A_KIND.search(line)
    ]
    assert offenders == []


def test_each_kind_names_itself_and_is_found_by_name() -> None:
    assert sorted(KINDS) == ["context", "postgres"]
    for name, kind in KINDS.items():
        assert kind.name == name
        assert kind_of(name) is kind
    with pytest.raises(HakiriError, match="unknown destination kind 'bigquery'"):
        kind_of("bigquery")


def test_column_types_come_from_the_kind() -> None:
    assert kind_of("postgres").column_type("decimal(12,2)") == "numeric(12,2)"
    assert kind_of("postgres").type_as_spark("numeric(12,2)") == "decimal(12,2)"
    assert kind_of("context").column_type("bigint") == "long"
    assert kind_of("context").type_as_spark("array<long>") == "array<long>"


def test_history_modes_need_the_engines_delta_history_only_in_the_context_store() -> None:
    spec = PipelineSpec.model_validate(
        {
            "id": "p",
            "source": {"connector": "files", "config": {"path": "d/*.csv"}},
            "tables": ["t"],
            "load": {"mode": "scd2", "key": ["id"]},
        }
    )
    assert engine_needs(spec, ["postgres"]) == []
    assert engine_needs(spec, ["context", "postgres"]) == ["context_history"]
