"""Choosing the engine, and what `validate`, `plan` and `apply` refuse on it (no engine runs)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hakiri.destinations.kinds import engine_needs
from hakiri.errors import SparkSetupError
from hakiri.sources.kinds import engine_needs as source_needs
from hakiri.spark.engines import (
    SAIL,
    SPARK,
    engine_of_session,
    mark_engine,
    pipeline_refusals,
    support,
)
from hakiri.spark.session import IN_PROCESS, engine_of, remote_of
from hakiri.spec.pipeline import PipelineSpec
from hakiri.spec.project import SparkSettings


def _spec(source: dict[str, Any], load: dict[str, Any]) -> PipelineSpec:
    return PipelineSpec.model_validate({"id": "p", "source": source, "tables": ["t"], "load": load})


def _needs(spec: PipelineSpec, destinations: list[str]) -> list[str]:
    """What the pipeline's source and its targets need of the engine (as `validate` asks)."""
    return [*source_needs(spec), *engine_needs(spec, destinations)]


FILES = {"connector": "files", "config": {"path": "data/*.csv"}}


def test_the_engine_comes_from_the_environment_then_the_project() -> None:
    assert engine_of(SparkSettings(), {}) == SPARK
    assert engine_of(SparkSettings(engine="sail"), {}) == SAIL
    assert engine_of(SparkSettings(), {"HAKIRI_SPARK_ENGINE": "Sail"}) == SAIL
    assert engine_of(SparkSettings(engine="sail"), {"HAKIRI_SPARK_ENGINE": "spark"}) == SPARK
    with pytest.raises(SparkSetupError) as raised:
        engine_of(SparkSettings(), {"HAKIRI_SPARK_ENGINE": "flink"})
    assert "'flink' is not an engine" in raised.value.reason
    with pytest.raises(ValueError, match="engine"):
        SparkSettings(engine="flink")  # type: ignore[arg-type]


def test_sail_runs_in_the_command_unless_a_remote_is_named() -> None:
    assert remote_of(SparkSettings(engine="sail"), {}) == "sail"
    assert remote_of(SparkSettings(), {"HAKIRI_SPARK_ENGINE": "sail"}) == "sail"
    # A remote wins: the engine then says what runs behind it.
    sail_remote = SparkSettings(engine="sail", remote="sc://sail-host:50051")
    assert remote_of(sail_remote, {}) == "sc://sail-host:50051"
    assert remote_of(SparkSettings(engine="sail"), {"HAKIRI_SPARK_REMOTE": IN_PROCESS}) is None


def test_a_session_knows_its_engine() -> None:
    class Session:  # any object a session factory hands out
        pass

    session = Session()
    assert engine_of_session(session) == SPARK
    assert engine_of_session(mark_engine(session, SAIL)) == SAIL


def test_nothing_is_refused_on_spark() -> None:
    specs = [
        _spec(
            {"connector": "postgres", "config": {"connection": "wh"}},
            {"mode": "append"},
        ),
        _spec(FILES, {"mode": "scd2", "key": ["id"]}),
        _spec({**FILES, "config": {"path": "d/*.csv", "provenance": True}}, {"mode": "truncate"}),
    ]
    for spec in specs:
        assert pipeline_refusals(spec, SPARK, _needs(spec, ["postgres", "context"])) == []


def test_sail_runs_datetime_formats_and_provenance_of_every_format() -> None:
    formats = _spec(
        {**FILES, "config": {"path": "d/*.csv", "date_format": "dd.MM.yyyy"}}, {"mode": "append"}
    )
    assert pipeline_refusals(formats, SAIL, _needs(formats, ["context"])) == []
    assert support(SAIL, "datetime_formats").status == "works"  # hakiri's parser on both
    # Provenance over a snapshot of several files: each file read on its own, with its name.
    for config in (
        {"path": "d/*.csv", "provenance": True},
        {"path": "d/*.jsonl", "format": "jsonl", "provenance": True, "columns": {"id": "int"}},
        {"path": "d/*.jsonl", "format": "jsonl", "provenance": True},
        {"path": "d/*.parquet", "format": "parquet", "provenance": True},
    ):
        snapshot = _spec({**FILES, "config": config}, {"mode": "truncate"})
        assert pipeline_refusals(snapshot, SAIL, _needs(snapshot, ["postgres"])) == [], config
        assert pipeline_refusals(snapshot, SPARK, _needs(snapshot, [])) == []
    assert support(SAIL, "file_provenance_inferred").status == "neutral"


def test_sail_runs_the_common_loads() -> None:
    latin1 = _spec(
        {**FILES, "config": {"path": "d/*.csv", "encoding": "latin-1"}}, {"mode": "append"}
    )
    assert pipeline_refusals(latin1, SAIL, _needs(latin1, [])) == []  # read through UTF-8 copies
    for mode in (
        {"mode": "append"},
        {"mode": "upsert", "upsert_key": ["id"]},
        {"mode": "truncate"},
    ):
        spec = _spec(FILES, mode)
        assert pipeline_refusals(spec, SAIL, _needs(spec, ["postgres", "context"])) == [], mode
    assert support(SAIL, "context_append").status == "neutral"


def test_plan_on_sail_takes_a_json_file_that_is_one_array(project, cli) -> None:
    # Its shape was refused on Sail; hakiri's engine tasks read it now (json_elements).
    project.write(
        "hakiri.toml",
        """
[project]
name = "shapes"

[spark]
engine = "sail"

[[pipeline]]
id = "events"
source = { connector = "files", config = { path = "data/*.json", format = "json" } }
tables = ["events"]
""",
    )
    project.write("data/lines.json", '{"id": 1}\n{"id": 2}\n')
    project.write("data/array.json", '  \n[{"id": 3}, {"id": 4}]\n')

    planned = cli("plan", "--json")

    assert planned.exit_code == 0, planned.stdout
    [pipeline] = json.loads(planned.stdout)["pipelines"]
    assert pipeline["errors"] == []
    assert support(SAIL, "json_array_source").status == "neutral"
