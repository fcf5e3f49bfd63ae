"""The planner is a pure function: observations in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hakiri.catalog.records import Phase, PipelineState
from hakiri.destinations.base import TargetColumn, TargetObservation
from hakiri.planner.builder import build_plan, plan_pipeline
from hakiri.planner.diff import spec_diff
from hakiri.planner.model import Action, CatalogInfo
from hakiri.planner.observations import PipelineObservation, TableObservation
from hakiri.sources.base import SourceColumn, SourceFile, SourceObservation, TablePlan
from hakiri.sources.files.batches import plan_file_batches
from hakiri.spec.connections import Target
from hakiri.spec.fingerprint import normalized_spec, spec_hash
from hakiri.spec.pipeline import PipelineSpec, TableSpec

PG_TARGET = Target("postgres", "orders", "public", "wh")


def _spec(**overrides: Any) -> PipelineSpec:
    document: dict[str, Any] = {
        "id": "orders",
        "source": {
            "connector": "files",
            "config": {"path": "o/*.csv", "columns": {"id": "bigint", "amount": "decimal(12,2)"}},
        },
        "tables": ["orders"],
        "destination": {"connector": "postgres", "config": {"connection": "wh"}},
        "load": {"mode": "upsert", "upsert_key": ["id"]},
    }
    document.update(overrides)
    return PipelineSpec.model_validate(document)


def _applied(spec: PipelineSpec) -> PipelineState:
    return PipelineState(
        spec.id,
        spec_hash(spec),
        normalized_spec(spec),
        Phase.STREAMING,
        datetime(2026, 1, 1, tzinfo=UTC),
    )


def _source(
    *columns: tuple[str, str | None], files: tuple[SourceFile, ...] = ()
) -> SourceObservation:
    return SourceObservation("orders", tuple(SourceColumn(n, t) for n, t in columns), files)


def _target(
    *columns: tuple[str, str], pk: tuple[str, ...] = ("id",), views: tuple[str, ...] = ()
) -> TargetObservation:
    return TargetObservation(
        "orders", "public", True, tuple(TargetColumn(n, t) for n, t in columns), pk, views, 10
    )


MISSING = TargetObservation("orders", "public", False)
SOURCE = _source(("id", "bigint"), ("amount", "decimal(12,2)"))
TARGET = _target(("id", "bigint"), ("amount", "numeric(12,2)"))


def _obs(
    spec: PipelineSpec,
    state: PipelineState | None,
    source=SOURCE,
    target=TARGET,
    committed=None,
    errors=(),
):
    table = TableObservation(TableSpec(name="orders"), PG_TARGET, source, target, committed or {})
    return PipelineObservation(spec.id, spec, state, (table,), tuple(errors))


def test_a_never_applied_pipeline_is_added_with_its_table_to_create() -> None:
    plan = plan_pipeline(_obs(_spec(), None, target=MISSING))
    assert plan.action is Action.ADD
    [target] = plan.targets
    assert target.create and [(c.name, c.type) for c in target.columns] == [
        ("id", "bigint"),
        ("amount", "numeric(12,2)"),
    ]


def test_an_applied_unchanged_pipeline_is_a_no_op() -> None:
    spec = _spec()
    plan = plan_pipeline(_obs(spec, _applied(spec)))
    assert plan.action is Action.NO_OP
    assert plan.diff == [] and not plan.targets[0].changes_structure


def test_keys_a_newer_hakiri_added_at_their_defaults_are_no_change() -> None:
    spec = _spec()
    stored = normalized_spec(spec)
    for key in ("on_empty", "null_value", "quote", "escape", "column_names"):
        del stored["source"]["config"][key]  # as an earlier hakiri applied and stored it
    state = PipelineState(spec.id, "sha256:older", stored, Phase.STREAMING, datetime.now(UTC))
    plan = plan_pipeline(_obs(spec, state))
    assert plan.action is Action.NO_OP and plan.diff == []


def test_an_edited_spec_shows_the_field_diff() -> None:
    before = _spec()
    after = _spec(
        schedule="every 1h",
        load={"mode": "upsert", "upsert_key": ["id"], "backup_before_load": True},
    )
    plan = plan_pipeline(_obs(after, _applied(before)))
    assert plan.action is Action.CHANGE
    assert [(d.path, d.kind, d.before, d.after) for d in plan.diff] == [
        ("schedule", "changed", None, "every 1h"),
        ("load.backup_before_load", "changed", False, True),
    ]


def test_a_new_source_column_is_a_column_to_add() -> None:
    spec = _spec(source={"connector": "files", "config": {"path": "o/*.csv"}})
    source = _source(("id", None), ("amount", None), ("coupon", None))
    plan = plan_pipeline(_obs(spec, _applied(spec), source=source))
    assert plan.action is Action.CHANGE
    assert [c.name for c in plan.targets[0].add_columns] == ["coupon"]


def test_a_dropped_target_of_an_applied_pipeline_is_recreated() -> None:
    spec = _spec()
    plan = plan_pipeline(_obs(spec, _applied(spec), target=MISSING))
    assert plan.action is Action.CHANGE and plan.targets[0].create


def test_widening_and_incompatible_types() -> None:
    spec = _spec(
        source={
            "connector": "files",
            "config": {"path": "o/*.csv", "columns": {"id": "bigint", "amount": "string"}},
        }
    )
    target = _target(("id", "integer"), ("amount", "numeric(12,2)"))
    [change] = plan_pipeline(
        _obs(
            spec,
            _applied(spec),
            source=_source(("id", "bigint"), ("amount", "string")),
            target=target,
        )
    ).targets
    # One refused change stops the table's load, so nothing (not the widening) is applied.
    assert change.widen_columns == []
    assert change.incompatible == ["amount: text cannot load into numeric(12,2)"]
    [step] = [s for s in _obs_steps(spec, target) if s.step == "evolve"]
    assert step.refused == change.incompatible


def test_a_widening_alone_is_an_evolve_step() -> None:
    spec = _spec()
    target = _target(("id", "integer"), ("amount", "numeric(12,2)"))
    [change] = plan_pipeline(_obs(spec, _applied(spec), target=target)).targets
    assert [(w.name, w.from_type, w.to_type) for w in change.widen_columns] == [
        ("id", "integer", "bigint")
    ]


def _obs_steps(spec: PipelineSpec, target: TargetObservation) -> list[Any]:
    files = (SourceFile("o/a.csv", 10, "sha256:a"),)
    observed = _obs(
        spec,
        _applied(spec),
        source=_source(("id", "bigint"), ("amount", "string"), files=files),
        target=target,
    )
    return plan_pipeline(_with_batches(observed, files)).steps


def test_upsert_key_change_on_an_existing_target_is_incompatible() -> None:
    before = _spec()
    after = _spec(load={"mode": "upsert", "upsert_key": ["id", "amount"]})
    [change] = plan_pipeline(_obs(after, _applied(before))).targets
    assert any("upsert_key changed" in p for p in change.incompatible)


def test_schema_policy_freeze_flags_new_columns() -> None:
    spec = _spec(schema_policy="freeze")
    source = _source(("id", "bigint"), ("amount", "decimal(12,2)"), ("extra", "string"))
    [change] = plan_pipeline(_obs(spec, _applied(spec), source=source)).targets
    assert change.add_columns == [] and "freeze" in change.incompatible[0]


def test_pending_files_new_and_changed() -> None:
    spec = _spec()
    files = (
        SourceFile("o/a.csv", 10, "sha256:a"),
        SourceFile("o/b.csv", 20, "sha256:b2"),
        SourceFile("o/c.csv", 5, "sha256:c"),
    )
    observed = _obs(
        spec,
        _applied(spec),
        source=_source(("id", "bigint"), ("amount", "decimal(12,2)"), files=files),
        committed={"o/b.csv": "sha256:b1", "o/c.csv": "sha256:c"},
    )
    with_batches = _with_batches(observed, files)
    plan = plan_pipeline(with_batches)
    [work] = plan.pending
    assert (work.new_files, work.changed_files, work.bytes) == (["o/a.csv"], ["o/b.csv"], 30)
    # data waiting is not a change to the pipeline, and no no-op either: the label says load
    assert plan.action is Action.LOAD
    document = build_plan("p", CatalogInfo(url="sqlite://", initialized=True), [with_batches])
    summary = document.summary
    # ... which `plan --detailed-exitcode` does not count as a change (exit 0, not 2)
    assert (summary.load, summary.changes, summary.pending) == (1, 0, 1)
    enqueue, load = plan.steps
    assert [b.file for b in enqueue.batches] == ["o/a.csv", "o/b.csv"]
    assert load.batches == [b.id for b in enqueue.batches]


def _with_batches(obs: PipelineObservation, files: tuple[SourceFile, ...]) -> PipelineObservation:
    """The observation with the batches the files source plans (as `Source.plan_batches` does)."""
    spec = obs.spec
    assert spec is not None
    [table] = obs.tables
    config = spec.source.config
    batches = plan_file_batches("orders", spec.load.mode, config, files, table.committed_files)
    return replace(obs, tables=(replace(table, batch_plan=TablePlan(batches=batches)),))


def test_live_target_rules_and_lock_warnings() -> None:
    spec = _spec(load={"mode": "upsert", "upsert_key": ["order_id"]})
    plan = plan_pipeline(_obs(spec, None))
    assert any("upsert key column(s) order_id not in the target" in w for w in plan.warnings)
    swap = _spec(load={"mode": "blue_green"})
    plan = plan_pipeline(
        _obs(
            swap,
            None,
            target=_target(
                ("id", "bigint"), ("amount", "numeric(12,2)"), views=("public.v_orders",)
            ),
        )
    )
    assert any("ACCESS EXCLUSIVE" in w and "public.v_orders" in w for w in plan.warnings)


def test_long_identifiers_and_collisions_are_warned() -> None:
    long_a, long_b = "a" * 63 + "_first", "a" * 63 + "_second"
    spec = _spec(
        source={"connector": "files", "config": {"path": "o/*.csv"}}, load={"mode": "append"}
    )
    plan = plan_pipeline(
        _obs(
            spec, None, source=_source(("id", None), (long_a, None), (long_b, None)), target=MISSING
        )
    )
    assert sum("PostgreSQL's limit is 63" in w for w in plan.warnings) == 2
    assert any("collide after truncation" in w for w in plan.warnings)


def test_retire_and_summary() -> None:
    spec = _spec()
    retired = PipelineObservation("legacy", None, _applied(_spec(id="legacy")))
    failing = _obs(
        _spec(id="broken"), None, errors=["cannot connect to PostgreSQL at postgresql://u:***@h/db"]
    )
    document = build_plan(
        "p", CatalogInfo(url="sqlite:///x", initialized=True), [_obs(spec, None), retired, failing]
    )
    assert [(p.id, p.action) for p in document.pipelines] == [
        ("broken", Action.ADD),
        ("legacy", Action.RETIRE),
        ("orders", Action.ADD),
    ]
    assert (
        document.summary.add,
        document.summary.retire,
        document.summary.errors,
        document.summary.changes,
    ) == (2, 1, 1, 3)


def test_diff_of_lists_of_tables_is_per_item() -> None:
    before = {"validate": {"rules": [{"type": "not_null", "column": "id", "on_fail": "abort"}]}}
    after = {
        "validate": {
            "rules": [{"type": "not_null", "column": "id", "on_fail": "warn"}, {"type": "regex"}]
        }
    }
    assert [(c.path, c.kind) for c in spec_diff(before, after)] == [
        ("validate.rules[0].on_fail", "changed"),
        ("validate.rules[1]", "added"),
    ]


def test_what_the_destination_cannot_do_is_a_plan_error_as_apply_refuses_it() -> None:
    spec = _spec(
        destination={"connector": "context"},
        hooks={"pre": [{"type": "sql", "statement": "SELECT 1"}]},
    )
    context = Target("context", "orders", None, None)
    table = TableObservation(TableSpec(name="orders"), context, SOURCE, MISSING)

    plan = plan_pipeline(PipelineObservation(spec.id, spec, None, (table,)))

    assert plan.errors == [
        "pre hooks: sql and refresh_mat_view hooks need a PostgreSQL destination; the context "
        "store has no SQL engine"
    ]
