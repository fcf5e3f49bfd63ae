"""What `plan` says apply will do is what apply does: the same steps (enqueue, evolve, load),
the same batches, in the form `plan --json` and `apply --json` print them.

Plan observes the catalog and the sources as `hakiri plan` does (`services.plan`), and sees
the target as the fake destination holds it (`FakeDestination.observe`), where `hakiri plan`
would inspect PostgreSQL or the context store; the planner is the same pure function.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hakiri.planner.builder import build_plan
from hakiri.services.plan import observe_project
from tests.unit.engine.conftest import Bench


def _plan(bench: Bench) -> list[dict[str, Any]]:
    seen = observe_project(bench.root, env={})
    [pipeline] = seen.pipelines
    tables = tuple(
        replace(t, target_now=bench.destination.observe(t.target.table, t.target.schema))
        for t in pipeline.tables
    )
    document = build_plan(seen.project, seen.catalog, [replace(pipeline, tables=tables)])
    [planned] = document.pipelines
    assert not planned.errors, planned.errors
    return [step.model_dump(mode="json") for step in planned.steps]


def _kinds(steps: list[dict[str, Any]]) -> list[str]:
    return [step["step"] for step in steps]


def _declared(bench: Bench, columns: str) -> None:
    """Declared types: plan reads no data, so without them it could not say a column's type."""
    bench.manifest(source=f'{{ path = "data/*.csv", format = "csv", columns = {{ {columns} }} }}')


def test_apply_executes_the_steps_plan_showed(bench: Bench) -> None:
    _declared(bench, 'id = "int", name = "string"')
    bench.write("data/a.csv", "id,name\n1,ada\n2,grace\n")
    planned = _plan(bench)

    applied = bench.apply()

    assert _kinds(planned) == ["enqueue", "evolve", "load"]  # the target is created
    assert applied.steps == planned
    assert applied.rows == 2

    # A new file with a new column: plan shows the column added and the one batch loaded.
    _declared(bench, 'id = "int", name = "string", email = "string"')
    bench.write("data/b.csv", "id,name,email\n3,edsger,e@utexas.edu\n")
    planned = _plan(bench)

    applied = bench.apply()

    assert _kinds(planned) == ["enqueue", "evolve", "load"]
    assert [c["name"] for c in planned[1]["add_columns"]] == ["email"]
    assert applied.steps == planned
    [load] = [s for s in planned if s["step"] == "load"]
    assert len(load["batches"]) == applied.batches == 1
    assert sorted(r["id"] for r in bench.rows()) == [1, 2, 3]

    # Nothing new: plan shows no step, and apply takes none.
    assert _plan(bench) == [] == bench.apply().steps
