"""Destination capabilities: what plan reports and the engine refuses before any data moves."""

from __future__ import annotations

from typing import Any

import pytest

from hakiri.destinations.base import LoadRequest, QuarantineTable, StagedBatch
from hakiri.destinations.capabilities import (
    CONTEXT,
    POSTGRES,
    check_replay,
    refusals,
)
from hakiri.destinations.commit_checks import check_upsert_key, check_validators, quarantine_of
from hakiri.destinations.kinds import kind_of
from hakiri.errors import HakiriError, LoadError, ValidationFailed
from hakiri.quality.verdicts import ProbeResult
from hakiri.spec.load import LoadMode, LoadSpec
from hakiri.spec.pipeline import PipelineSpec


def _spec(**hooks: Any) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {
            "id": "p",
            "source": {"connector": "files", "config": {"path": "d/*.csv"}},
            "tables": ["t"],
            "load": {"mode": "append"},
            "hooks": hooks,
        }
    )


def test_sql_hooks_are_refused_by_the_context_store_and_run_by_postgres() -> None:
    spec = _spec(post=[{"type": "sql", "statement": "ANALYZE t"}])

    [refusal] = refusals(spec, CONTEXT)

    assert refusal.reason.startswith("post hooks: sql and refresh_mat_view hooks need a PostgreSQL")
    assert refusals(spec, POSTGRES) == []
    assert (
        refusals(_spec(post=[{"type": "webhook", "url": "https://example.com/h"}]), CONTEXT) == []
    )


def test_replay_is_a_postgres_capability() -> None:
    check_replay(kind_of("postgres").capabilities)
    with pytest.raises(HakiriError, match="replay into the context store is not supported yet"):
        check_replay(kind_of("context").capabilities)


def test_the_upsert_key_is_checked_against_target_then_staged_columns() -> None:
    load = LoadSpec(mode=LoadMode.UPSERT, upsert_key=["id"])
    assert check_upsert_key(load, ["id", "name"], ["id", "name"], "t") == ("id",)
    with pytest.raises(LoadError, match="'id' does not exist in the target t"):
        check_upsert_key(load, ["id", "name"], ["name"], "t")
    with pytest.raises(LoadError, match="'id' is not among the staged columns for t"):
        check_upsert_key(load, ["name"], None, "t")
    with pytest.raises(LoadError, match="covers every loaded column of t"):
        check_upsert_key(load, ["id"], ["id"], "t")
    # Key columns only, into a wider target: new keys are inserted, nothing is refused.
    assert check_upsert_key(load, ["id"], ["id", "name"], "t") == ("id",)


def test_a_failed_abort_validator_stops_the_load_and_a_warn_does_not() -> None:
    warn = ProbeResult("row_count", "warn", False, "row_count: 0 rows", 0)
    abort = ProbeResult("row_count", "abort", False, "row_count: 0 rows, expected 1", 0)
    assert check_validators([warn], "t") == [warn]
    with pytest.raises(ValidationFailed, match="nothing was loaded into t"):
        check_validators([warn, abort], "t")


def test_staged_violations_are_committed_only_with_a_quarantine_and_rows_in_it() -> None:
    quarantine = QuarantineTable(None, "t_quarantine", "t")
    request = LoadRequest("x", "p", "r", "b", None, "t", LoadSpec(), quarantine=quarantine)
    staged = StagedBatch("b", None, "stg", 3, (), quarantine_table="stg_q", quarantined=2)
    assert quarantine_of(staged, request) == quarantine
    assert quarantine_of(StagedBatch("b", None, "stg", 3, ()), request) is None
    assert quarantine_of(staged, LoadRequest("x", "p", "r", "b", None, "t", LoadSpec())) is None
