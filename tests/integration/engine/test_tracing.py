"""A real `apply` traced with OpenTelemetry: the span tree of a table backfill, the chunk
attributes against the catalog, the trace id on the run record, and the run metrics."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hakiri import observability
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.services.apply import apply_project
from tests.support.project import Project
from tests.support.tables import make_source, table_project


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        return [
            s
            for s in self.spans.get_finished_spans()
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]

    def points(self, metric: str) -> list:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for m in scope.metrics
            if m.name == metric
            for point in m.data.data_points
        ]


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    """hakiri's providers with in-memory exporters; `apply` finds them configured and keeps them."""
    observability.shutdown()
    found = Telemetry(InMemorySpanExporter(), InMemoryMetricReader())
    observability.configure(
        {}, span_processors=[SimpleSpanProcessor(found.spans)], metric_readers=[found.metrics]
    )
    yield found
    observability.shutdown()


def batch_ids(project: Project) -> set[str]:
    url = catalog_url(project.root, None, os.environ)
    with Catalog.open(url, migrate=False) as catalog:
        return {b.batch_id for b in catalog.batches("p")}


def test_a_backfill_is_one_run_span_with_a_chunk_span_per_batch(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, telemetry: Telemetry
) -> None:
    project = table_project(
        tmp_path,
        pg_url,
        pg_schema,
        body=f"""
        [pipeline.backfill]
        window = "4h"

        [pipeline.quarantine]
        enabled = true

        [[pipeline.validate.rules]]
        type = "range"
        column = "amount"
        max = 495
        on_fail = "skip"

        [[pipeline.validate.dataset]]
        type = "row_count"
        min = 1

        [[pipeline.hooks.post]]
        type = "sql"
        statement = "ANALYZE {pg_schema}.dst"
        """,
    )
    make_source(project, 1_000)  # amount = id / 2: ids 991..1000 break the range rule

    [outcome] = apply_project(project.root)
    assert (outcome.status, outcome.rows, outcome.quarantined) == ("success", 990, 10)

    [run] = telemetry.named("hakiri.run")
    assert run.parent is None
    assert dict(run.attributes or {}) == {
        "hakiri.pipeline_id": "p",
        "hakiri.run_id": outcome.run_id,
        "hakiri.load_mode": "upsert",
        "hakiri.trigger": "apply",
        "hakiri.rows": 990,
        "hakiri.status": "success",
    }

    # The trace id users see on the run (`hakiri runs --json`) is the trace's.
    trace_id = format(run.context.trace_id, "032x")
    [recorded] = json.loads(project.cli("runs", "p", "--json").stdout)
    assert recorded["trace_id"] == trace_id
    assert {s.context.trace_id for s in telemetry.spans.get_finished_spans()} == {
        run.context.trace_id
    }

    # 16h40 of rows in 4h windows: five chunks (the catalog's batches), then the post hook.
    assert sorted(s.name for s in telemetry.children(run)) == ["hakiri.chunk"] * 5 + [
        "hakiri.hooks"
    ]
    chunks = telemetry.named("hakiri.chunk")
    attributes = [dict(c.attributes or {}) for c in chunks]
    assert {a["hakiri.chunk_id"] for a in attributes} == batch_ids(project)
    assert {
        (a["hakiri.pipeline_id"], a["hakiri.run_id"], a["hakiri.table"]) for a in attributes
    } == {("p", outcome.run_id, "src")}
    assert sum(a["hakiri.chunk.rows"] for a in attributes) == len(project.rows("dst")) == 990
    assert {a["hakiri.chunk.attempts"] for a in attributes} == {1}
    assert {a["hakiri.chunk.wait_ms"] for a in attributes} == {0}  # no rate_budget
    predicates = sorted(a["hakiri.chunk.predicate"] for a in attributes)
    assert predicates[0] == (
        "(updated_at >= 2024-01-01T00:01:00+00:00 AND updated_at < 2024-01-01T04:01:00+00:00) "
        "OR updated_at IS NULL"
    )
    assert predicates[-1] == (
        "updated_at >= 2024-01-01T16:01:00+00:00 AND updated_at <= 2024-01-01T16:40:00+00:00"
    )

    for chunk in chunks:
        stages = {s.name: s for s in telemetry.children(chunk)}
        assert sorted(stages) == ["hakiri.commit", "hakiri.read", "hakiri.stage"]
        [validate] = telemetry.children(stages["hakiri.commit"])
        assert validate.name == "hakiri.validate"

    [hooks] = telemetry.named("hakiri.hooks")
    assert hooks.attributes == {"hakiri.hook.slot": "post", "hakiri.hook.count": 1}

    pipeline = {"hakiri.pipeline_id": "p"}
    [loaded] = telemetry.points("hakiri.rows.loaded")
    assert (loaded.attributes, loaded.value) == (pipeline, 990)
    [quarantined] = telemetry.points("hakiri.rows.quarantined")
    assert quarantined.value == 10
    [duration] = telemetry.points("hakiri.run.duration")
    assert (duration.attributes, duration.count) == ({**pipeline, "hakiri.status": "success"}, 1)
    [lag] = telemetry.points("hakiri.chunk.lag")
    assert lag.count == 5 and lag.min >= 0


def test_chunks_loaded_by_parallel_workers_stay_in_the_run_trace(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, telemetry: Telemetry
) -> None:
    project = table_project(
        tmp_path,
        pg_url,
        pg_schema,
        body="""
        [pipeline.backfill]
        window = "5h"
        parallelism = 2
        """,
    )
    make_source(project, 1_000)

    [outcome] = apply_project(project.root)
    assert (outcome.status, outcome.batches) == ("success", 4)

    [run] = telemetry.named("hakiri.run")
    chunks = telemetry.named("hakiri.chunk")
    assert len(chunks) == 4
    assert all(c.parent is not None and c.parent.span_id == run.context.span_id for c in chunks)
    assert sum((c.attributes or {})["hakiri.chunk.rows"] for c in chunks) == 1_000
    [recorded] = json.loads(project.cli("runs", "p", "--json").stdout)
    assert recorded["trace_id"] == format(run.context.trace_id, "032x")


@pytest.mark.parametrize("destination", [None, '{ connector = "context" }'])
def test_a_failed_run_is_an_error_span_and_keeps_its_trace_id(
    tmp_path: Path,
    pg_url: str,
    pg_schema: str,
    spark,
    telemetry: Telemetry,
    destination: str | None,
) -> None:
    project = table_project(
        tmp_path,
        pg_url,
        pg_schema,
        body="""
        [[pipeline.validate.dataset]]
        type = "row_count"
        max = 10
        on_fail = "abort"
        """,
        destination=destination,
    )
    make_source(project, 100)

    [outcome] = apply_project(project.root)
    assert outcome.status == "failed"

    [run] = telemetry.named("hakiri.run")
    assert run.attributes is not None and run.attributes["hakiri.status"] == "failed"
    assert not run.status.is_ok
    [chunk] = telemetry.named("hakiri.chunk")
    [commit] = telemetry.named("hakiri.commit")
    [validate] = telemetry.named("hakiri.validate")
    assert validate.parent is not None and validate.parent.span_id == commit.context.span_id
    assert not chunk.status.is_ok
    assert [e.name for e in chunk.events] == ["exception"]
    assert validate.status.is_ok  # the probe ran; the destination refused the verdict
    [recorded] = json.loads(project.cli("runs", "p", "--json").stdout)
    assert (recorded["status"], recorded["trace_id"]) == (
        "failed",
        format(run.context.trace_id, "032x"),
    )
    [duration] = telemetry.points("hakiri.run.duration")
    assert duration.attributes == {"hakiri.pipeline_id": "p", "hakiri.status": "failed"}
