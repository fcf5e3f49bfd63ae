"""Views in the plan: the manifests' definitions against the catalog's live ones, and the
columns each view names that a table or view it reads will not have. Pure: no I/O.

    create   in a manifest, not live in the catalog (version 1, or the next after a drop)
    replace  live, with other SQL or another description (the next version)
    drop     live in the catalog, in no manifest any more
    no-op    as recorded

Apply calls `plan_views` with what it observes then, so it records exactly what plan showed.

Columns are checked with sqlglot's `qualify` over a schema of what plan already knows: each
context-store table's columns after this plan's changes (a rename takes the old name away, a
column the pipeline no longer loads is left out: it stays in the table, NULL in new rows),
and each view's output columns, in the order views are defined. A table whose columns plan
cannot know (a source it could not read, a table no plan was made for) is not checked.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hakiri.catalog.records import ViewDefinition, ViewRecord
from hakiri.planner.model import BrokenColumn, PipelinePlan, ViewAction, ViewPlan
from hakiri.planner.observations import PipelineObservation
from hakiri.spec.views import normalized_sql, view_sql_hash

__all__ = [
    "TableColumns",
    "ViewsObservation",
    "broken_columns",
    "context_columns",
    "plan_views",
    "sql_diff",
    "view_changes",
    "view_counts",
]


@dataclass(frozen=True)
class ViewsObservation:
    """The views plan decides from."""

    manifest: tuple[ViewDefinition, ...]  # in the order they are defined (a view after its reads)
    live: Mapping[str, ViewRecord] = field(default_factory=dict)  # the catalog's live versions
    last_version: Mapping[str, int] = field(default_factory=dict)  # name -> highest recorded


@dataclass(frozen=True)
class TableColumns:
    """A context-store table's columns, now and after this plan (lower case)."""

    pipeline: str
    now: tuple[str, ...] | None  # None: the table does not exist yet
    planned: tuple[str, ...] | None  # None: plan cannot know them
    gone: Mapping[str, str] = field(default_factory=dict)  # column -> 'drops' | 'renames to x'


def plan_views(
    seen: ViewsObservation,
    observations: Sequence[PipelineObservation],
    pipelines: Sequence[PipelinePlan],
    loaded: Sequence[Sequence[Sequence[tuple[str, str | None]] | None]],
) -> tuple[list[PipelinePlan], list[ViewPlan]]:
    """The pipelines' plans, with a warning on each whose change takes away a column a view
    reads, and the views' plans. `loaded`: per pipeline, per table, the columns that reach
    the target (None: not known), as the builder computed them."""
    tables: dict[str, TableColumns] = {}
    for o, p, columns in zip(observations, pipelines, loaded, strict=True):
        tables.update(context_columns(o, p, columns))
    broken = broken_columns(seen.manifest, tables)
    blamed: dict[str, list[str]] = {}
    for found in broken.values():
        for b in found:
            if b.pipeline is not None:
                blamed.setdefault(b.pipeline, []).append(b.message)
    warned = [
        p.model_copy(update={"warnings": [*p.warnings, *blamed[p.id]]}) if p.id in blamed else p
        for p in pipelines
    ]
    views = [
        v.model_copy(
            update={
                "broken": broken.get(v.name, []),
                "warnings": [b.message for b in broken.get(v.name, []) if not b.pipeline],
            }
        )
        for v in view_changes(seen)
    ]
    return warned, views


def context_columns(
    obs: PipelineObservation,
    plan: PipelinePlan,
    loaded: Sequence[Sequence[tuple[str, str | None]] | None],
) -> dict[str, TableColumns]:
    """The pipeline's context-store tables (lower case), with their columns now and after the
    plan: what the evolution `plan` shows does (renames, added columns; a column the source
    no longer has stays, NULL in new rows, so a view reading it is told); a refused change
    does nothing."""
    found: dict[str, TableColumns] = {}
    if obs.spec is None:
        return found
    pid = obs.spec.id
    for t, change, columns in zip(obs.tables, plan.targets, loaded, strict=True):
        if not t.target.in_context_store or t.target_now is None:
            continue
        seen = t.target_now
        now = tuple(c.name.lower() for c in seen.columns) if seen.exists else None
        names = None if columns is None else [n.lower() for n, _ in columns]
        if now is None:
            found[t.target.table.lower()] = TableColumns(
                pid, None, None if names is None else tuple(names)
            )
            continue
        if names is None or change.incompatible:
            found[t.target.table.lower()] = TableColumns(pid, now, now)
            continue
        gone = renamed(change.rename_columns)
        gone |= {c: "drops" for c in now if c not in names and c not in gone}
        planned = [c for c in now if c not in gone]
        planned += [r.partition(" -> ")[2].lower() for r in change.rename_columns]
        planned += [c.name.lower() for c in change.add_columns if c.name.lower() not in planned]
        found[t.target.table.lower()] = TableColumns(pid, now, tuple(planned), gone)
    return found


def view_changes(seen: ViewsObservation) -> list[ViewPlan]:
    """One ViewPlan per view: the manifests' in definition order, then the drops by name."""
    plans = []
    for view in seen.manifest:
        live = seen.live.get(view.name)
        sql = normalized_sql(view.sql)
        common = dict(name=view.name, reads=list(view.reads), sql=sql, description=view.description)
        if live is None:
            version = seen.last_version.get(view.name, 0) + 1
            plans.append(ViewPlan(action=ViewAction.CREATE, version=version, **common))
        elif live.sql_hash != view_sql_hash(sql) or live.description != view.description:
            plans.append(
                ViewPlan(
                    action=ViewAction.REPLACE,
                    version=seen.last_version.get(view.name, live.version) + 1,
                    before_sql=live.sql,
                    before_description=live.description,
                    sql_diff=sql_diff(view.name, live, sql),
                    **common,
                )
            )
        else:
            plans.append(ViewPlan(action=ViewAction.NO_OP, version=live.version, **common))
    defined = {v.name for v in seen.manifest}
    for name, live in sorted(seen.live.items()):
        if name not in defined:
            plans.append(
                ViewPlan(
                    name=name,
                    action=ViewAction.DROP,
                    reads=list(live.reads),
                    version=live.version,
                    before_sql=live.sql,
                    before_description=live.description,
                )
            )
    return plans


def view_counts(plans: Sequence[ViewPlan]) -> dict[str, int]:
    """The Summary's view_* counts."""
    return {
        f"view_{action.value.replace('-', '_')}": sum(v.action is action for v in plans)
        for action in ViewAction
    }


def sql_diff(name: str, live: ViewRecord, sql: str) -> list[str]:
    """The live version's SQL to the manifest's, as `diff -u` shows it (empty: same SQL)."""
    if live.sql_hash == view_sql_hash(sql):
        return []
    return list(
        difflib.unified_diff(
            live.sql.splitlines(),
            sql.splitlines(),
            fromfile=f"{name} (version {live.version}, applied)",
            tofile=f"{name} (manifests)",
            lineterm="",
        )
    )


# ---------------------------------------------------------------- columns


def broken_columns(
    views: Sequence[ViewDefinition], tables: Mapping[str, TableColumns]
) -> dict[str, list[BrokenColumn]]:
    """Per view (in definition order), the columns it names that a table or view it reads
    will not have after this plan. Views that read a table of unknown columns are checked
    only against the others."""
    planned: dict[str, tuple[str, ...]] = {
        name: t.planned for name, t in tables.items() if t.planned is not None
    }
    before: dict[str, tuple[str, ...]] = {
        name: t.now if t.now is not None else t.planned
        for name, t in tables.items()
        if (t.now if t.now is not None else t.planned) is not None
    }
    found: dict[str, list[BrokenColumn]] = {}
    for view in views:
        checked = _check(view, planned, before, tables)
        found[view.name] = checked.broken
        if checked.outputs is not None:
            planned[view.name] = checked.outputs
        outputs_before = _check(view, before, before, tables).outputs
        if outputs_before is not None:
            before[view.name] = outputs_before
    return found


@dataclass
class _Checked:
    broken: list[BrokenColumn]
    outputs: tuple[str, ...] | None  # the view's columns; None: not known


def _check(
    view: ViewDefinition,
    schema: Mapping[str, tuple[str, ...]],
    before: Mapping[str, tuple[str, ...]],
    tables: Mapping[str, TableColumns],
) -> _Checked:
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.qualify import qualify
    from sqlglot.optimizer.scope import traverse_scope

    known = {name: {c: "STRING" for c in columns} for name, columns in schema.items() if columns}
    try:
        tree = qualify(
            sqlglot.parse_one(view.sql, read="spark"),
            schema=known,
            dialect="spark",
            allow_partial_qualification=True,
            validate_qualify_columns=False,
            quote_identifiers=False,
        )
        scopes = traverse_scope(tree)
    except (SqlglotError, RecursionError, ValueError):
        return _Checked([], None)  # the guard read it; qualify cannot: nothing to tell
    missing: dict[tuple[str, str], None] = {}
    for scope in scopes:
        tables_here = {
            alias: source.name.lower()
            for alias, source in scope.sources.items()
            if isinstance(source, exp.Table)
        }
        only_tables = len(tables_here) == len(scope.sources)
        # `… AS spent … ORDER BY spent`: a name the select list makes (not `total AS total`,
        # which qualify writes for every plain column).
        made = {
            s.alias.lower(): s
            for s in getattr(scope.expression, "selects", [])
            if isinstance(s, exp.Alias)
            and not (isinstance(s.this, exp.Column) and s.this.name.lower() == s.alias.lower())
        }
        for column in scope.columns:
            name = column.name.lower()
            if column.table:
                table = tables_here.get(column.table)
                if table in known and name not in known[table]:
                    missing[(table, name)] = None
                continue
            if not only_tables or not tables_here:
                continue
            if name in made and not _inside(column, made[name]):
                continue
            if any(t not in known for t in tables_here.values()):
                continue  # it may be a column of the table plan cannot see
            if any(name in known[t] for t in tables_here.values()):
                continue  # ambiguous, not missing: Spark says so when it runs
            had = [t for t in tables_here.values() if name in before.get(t, ())]
            missing[((had or sorted(tables_here.values()))[0], name)] = None
    outputs = None
    if isinstance(tree, exp.Query):
        names = [n.lower() for n in tree.named_selects]
        if names and "*" not in names and all(names):
            outputs = tuple(names)
    return _Checked([_broken(view, t, c, before, tables) for t, c in missing], outputs)


def _inside(node: Any, ancestor: Any) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False


def _broken(
    view: ViewDefinition,
    table: str,
    column: str,
    before: Mapping[str, tuple[str, ...]],
    tables: Mapping[str, TableColumns],
) -> BrokenColumn:
    said = f"view {view.name} reads column {table}.{column}"
    owner = tables.get(table)
    if owner is not None and column in owner.gone:
        change = owner.gone[column]
        what = (
            f"which pipeline {owner.pipeline} drops (it no longer loads it: the column stays, "
            "NULL in new rows)"
            if change == "drops"
            else f"which pipeline {owner.pipeline} {change}"
        )
        return BrokenColumn(
            table=table,
            column=column,
            pipeline=owner.pipeline,
            change=change,
            message=f"{said}, {what}",
        )
    if owner is not None:
        verb = "does not have" if owner.now is not None else "will not have when it is created"
        what = f"which table {table} (pipeline {owner.pipeline}) {verb}"
    elif column in before.get(table, ()):
        what = f"which view {table} no longer returns"
    else:
        what = f"which view {table} does not return"
    return BrokenColumn(table=table, column=column, change="missing", message=f"{said}, {what}")


def renamed(pairs: Iterable[str]) -> dict[str, str]:
    """Plan's 'old -> new' renames as old -> 'renames to new'."""
    found = {}
    for pair in pairs:
        old, _, new = pair.partition(" -> ")
        found[old.lower()] = f"renames to {new}"
    return found
