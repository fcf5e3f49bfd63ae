"""`hakiri plan --format markdown`: the plan as a pull-request comment.

A reviewer reads a summary line, one table row per pipeline (what changes in the spec,
in the target's schema, what data loads, what a keyed load would delete) and the warnings
and errors; the rest (every line of the text plan, the steps apply will take) is folded
under `<details>`. Rendered from the PlanDocument only, so the same plan gives the same
bytes: CI can post it as a sticky comment and update it in place.

GitHub refuses comments over 65,536 characters, so long lists (files, batch ids) are cut
at `LIST_LIMIT` items with a count of the rest.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from hakiri.planner.model import (
    Action,
    ChangePreview,
    Column,
    DeletePreview,
    EnqueueStep,
    EvolveStep,
    LoadStep,
    PendingWork,
    PipelinePlan,
    PlanDocument,
    RestoreStep,
    RetireStep,
    TargetChange,
    ViewAction,
    ViewPlan,
)
from hakiri.spec.sizes import byte_size

__all__ = ["LIST_LIMIT", "plan_markdown", "views_section"]

LIST_LIMIT = 20
NONE = "—"  # an empty cell: a dash reads better than nothing in a rendered table

COLUMNS = (
    "pipeline",
    "action",
    "mode",
    "spec changes",
    "schema changes",
    "data to load",
    "deletes counted",
    "warnings",
    "errors",
)

# Every ASCII punctuation character may be backslash-escaped in CommonMark; these are the
# ones that could start markup inside a table cell or a list item.
_MARKUP = re.compile(r"([\\`*_\[\]<>|&~])")


def plan_markdown(document: PlanDocument) -> str:
    """The whole comment, ending in a newline."""
    parts = [f"### hakiri plan: {text(document.project)}", "", summary_line(document)]
    if not document.catalog.initialized:
        parts += ["", "The catalog does not exist yet: every pipeline is new."]
    if document.pipelines:
        parts += ["", *table(document.pipelines)]
    parts += _notes("Errors", [(p.id, e) for p in document.pipelines for e in p.errors])
    parts += _notes(
        "Warnings",
        [(p.id, w) for p in document.pipelines for w in p.warnings]
        + [(f"view {v.name}", w) for v in document.views or [] for w in v.warnings],
    )
    if document.views:
        parts += ["", *views_section(document.views)]
    if document.sync is not None and document.sync.after_apply:
        parts += [
            "",
            f"Apply publishes the context store to {code(document.sync.bucket)} ([sync]).",
        ]
        if document.sync.missing:
            unset = ", ".join(code(v) for v in document.sync.missing)
            parts += [
                f"> warning: {unset} not set here: the loads would commit, their sync would fail"
            ]
    for hint in document.hints:
        parts += ["", f"> hint: {text(hint)}"]
    for p in document.pipelines:
        parts += ["", *details(p)]
    parts += ["", f"<sub>compared with catalog {code(document.catalog.url)}</sub>"]
    return "\n".join(parts) + "\n"


def summary_line(document: PlanDocument) -> str:
    """`**Plan:** 1 to add, 2 to change, 0 to retire · 3 pipelines · data to load: …`."""
    s = document.summary
    n = len(document.pipelines)
    parts = [
        f"**Plan:** {s.add} to add, {s.change} to change, {s.retire} to retire",
        f"{n:,} {_plural(n, 'pipeline')}",
    ]
    if s.no_op:
        parts.append(f"{s.no_op:,} unchanged")
    data = _data_totals([w for p in document.pipelines for w in p.pending if w.has_work])
    parts.append(f"data to load: {data}" if data else "no data to load")
    if document.views:
        parts.append(
            f"views: {s.view_create} to create, {s.view_replace} to replace, {s.view_drop} to drop"
        )
    if s.errors:
        parts.append(f"**{s.errors:,} {_plural(s.errors, 'error')}**")
    return " · ".join(parts)


def table(pipelines: list[PipelinePlan]) -> list[str]:
    rows = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for p in pipelines:
        cells = [
            code(p.id, cell=True),
            _action(p.action),
            code(p.mode, cell=True) if p.mode else NONE,
            _spec_cell(p),
            _lines(_schema_cell(t) for t in p.targets),
            _lines(_pending_cell(w) for w in p.pending) or _cdc_cell(p),
            _lines(_counted_cell(w) for w in p.pending),
            f"{len(p.warnings):,}" if p.warnings else NONE,
            f"**{len(p.errors):,}**" if p.errors else NONE,
        ]
        rows.append("| " + " | ".join(c or NONE for c in cells) + " |")
    return rows


def views_section(views: list[ViewPlan]) -> list[str]:
    """A row per view that changes (or has a warning), then each replace's SQL diff, folded."""
    shown = [v for v in views if v.action is not ViewAction.NO_OP or v.warnings]
    unchanged = len(views) - len(shown)
    rows = ["**Views**" + (f" ({unchanged:,} unchanged)" if unchanged else "")]
    if not shown:
        return [*rows, "", "No view changes."]
    rows += ["", "| view | action | version | reads |", "|---|---|---|---|"]
    for v in shown:
        version = str(v.version) if v.version is not None else NONE
        if v.action is ViewAction.REPLACE and v.version:
            version = f"{v.version - 1} → {v.version}"
        reads = ", ".join(code(r, cell=True) for r in v.reads) or NONE
        action = f"**{v.action.value}**" if v.action is ViewAction.DROP else v.action.value
        rows.append(f"| {code(v.name, cell=True)} | {action} | {version} | {reads} |")
    for v in shown:
        if v.action is not ViewAction.REPLACE:
            continue
        lines = list(v.sql_diff)
        if v.description != v.before_description:
            lines.append(f"~ description: {_json(v.before_description)} -> {_json(v.description)}")
        summary = html.escape(f"view {v.name} — {v.action.value}")
        rows += ["", f"<details><summary>{summary}</summary>", "", *fenced("diff", lines)]
        rows += ["", "</details>"]
    return rows


def details(p: PipelinePlan) -> list[str]:
    """One folded section per pipeline: the text plan's lines in a `diff` block (GitHub
    colours `+` and `-`), then the steps apply will take."""
    route = " → ".join(part for part in (p.source, p.destination) if part)
    mode = f" ({p.mode})" if p.mode else ""
    where = f": {route}{mode}" if route or mode else ""
    summary = html.escape(f"{p.id} — {p.action.value}{where}")
    lines = plan_lines(p)
    steps = step_lines(p)
    body = [f"<details><summary>{summary}</summary>", ""]
    if lines:
        body += fenced("diff", lines)
    if steps:
        numbered = [f"{i}. {step}" for i, step in enumerate(steps, 1)]
        body += ["", "Steps apply will take:", "", *fenced("text", numbered)]
    if not lines and not steps:
        body.append("Nothing to change, nothing to load.")
    return [*body, "", "</details>"]


def plan_lines(p: PipelinePlan) -> list[str]:
    """The text plan of one pipeline, without colour: `+` adds, `-` removes, `~` changes."""
    out: list[str] = []
    for change in p.diff:
        if change.kind == "added":
            out.append(f"+ {change.path}: {_json(change.after)}")
        elif change.kind == "removed":
            out.append(f"- {change.path}: {_json(change.before)}")
        else:
            out.append(f"~ {change.path}: {_json(change.before)} -> {_json(change.after)}")
    for t in p.targets:
        if t.transformed is not None:
            columns = ", ".join(_column(c.name, c.type) for c in t.transformed)
            out.append(f"  transforms {t.table} -> {columns or 'no columns'}")
        if t.waiting:
            out.append(f"  {t.target}: waiting for its first file")
        if t.create:
            if t.create_schema:
                out.append(f"+ create schema {t.create_schema}")
            out.append(f"+ create {t.target} ({_columns(t.columns)})")
        out += [
            f"+ column {t.target}.{c.name} {c.type or '(type from data)'}" for c in t.add_columns
        ]
        out += [f"~ rename {t.target}.{r}" for r in t.rename_columns]
        out += [
            f"~ retype {t.target}.{r.name} {r.from_type} -> {r.to_type} (accepted)"
            for r in t.retype_columns
        ]
        out += [
            f"~ widen {t.target}.{w.name} {w.from_type} -> {w.to_type}" for w in t.widen_columns
        ]
        out += [f"! incompatible: {problem}" for problem in t.incompatible]
    for w in p.pending:
        if not w.has_work:
            continue
        out.append(f"  data {w.table}: {_pending_words(w)}")
        out += _limited([f"    + {f}" for f in w.new_files], "new file(s)")
        out += _limited([f"    ~ {f}" for f in w.changed_files], "changed file(s)")
        if w.deletes is not None:
            refused = (
                " (over max_delete_fraction: apply will refuse it)" if w.deletes.refused else ""
            )
            out.append(f"- deletes {w.table}: {_deletes(w.deletes)}{refused}")
        if w.changes is not None:
            out.append(f"  changes {w.table}: {_changes(w.changes)}")
    if p.cdc is not None:
        out.append(f"  cdc {p.cdc.describe()}")
    out += [f"  drift: {d['message']}" for d in p.drift if isinstance(d.get("message"), str)]
    out += [f"  warning: {w}" for w in p.warnings]
    out += [f"! error: {e}" for e in p.errors]
    return out


def step_lines(p: PipelinePlan) -> list[str]:
    out: list[str] = []
    for step in p.steps:
        if isinstance(step, EnqueueStep):
            ids = _limited([b.id for b in step.batches], "batch(es)")
            n = len(step.batches)
            line = f"enqueue {n} {_plural(n, 'batch', 'batches')} of {step.table}"
            out.append(line + (f": {', '.join(ids)}" if ids else ""))
            out += [f"end queued batch {r.id}: {r.status} ({r.reason})" for r in step.retired]
        elif isinstance(step, RestoreStep):
            n = len(step.batches)
            out.append(
                f"restore {step.target} ({step.reason}): load {n} committed "
                f"{_plural(n, 'batch', 'batches')} again"
            )
        elif isinstance(step, EvolveStep):
            out.append(f"evolve {step.table}: {_evolve(step)}")
        elif isinstance(step, LoadStep):
            n = len(step.batches)
            at_once = f", {step.parallelism} at a time" if step.parallelism > 1 else ""
            out.append(f"load {n} {_plural(n, 'batch', 'batches')}{at_once}")
        elif isinstance(step, RetireStep):
            out.append("retire: mark the pipeline retired; its state and tables stay")
    return out


# ---------------------------------------------------------------- escaping


def text(value: str) -> str:
    """Plain text for a table cell or a list item: markup characters escaped, a newline
    written as `<br>` (a line break inside a cell would end the row)."""
    escaped = _MARKUP.sub(r"\\\1", value)
    return "<br>".join(escaped.splitlines()) if escaped else escaped


def code(value: str, *, cell: bool = False) -> str:
    """A code span that holds any text: a fence longer than the longest run of backticks,
    newlines as spaces; in a table cell `|` escaped (GFM splits rows on it even in code
    spans, and drops the backslash)."""
    flat = " ".join(value.splitlines())
    if cell:
        flat = flat.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def fenced(info: str, lines: list[str]) -> list[str]:
    body = "\n".join(lines)
    fence = "`" * max(3, max((len(run) + 1 for run in re.findall(r"`{3,}", body)), default=3))
    return [f"{fence}{info}", *body.splitlines(), fence]


# ---------------------------------------------------------------- cells
# Cells are built escaped: names from a manifest go through `code`, free text through `text`.


def _action(action: Action) -> str:
    return f"**{action.value}**" if action in (Action.CHANGE, Action.RETIRE) else action.value


def _spec_cell(p: PipelinePlan) -> str:
    if not p.diff:
        return ""
    paths = [code(c.path, cell=True) for c in p.diff[:3]]
    more = f" +{len(p.diff) - 3} more" if len(p.diff) > 3 else ""
    return f"{len(p.diff)}: {', '.join(paths)}{more}"


def _schema_cell(t: TargetChange) -> str:
    parts: list[str] = []
    if t.create:
        n = len(t.columns)
        parts.append(f"create ({n} {_plural(n, 'column')})" if n else "create")
    for label, items in (
        ("added", t.add_columns),
        ("widened", t.widen_columns),
        ("renamed", t.rename_columns),
        ("retyped", t.retype_columns),
    ):
        if items:
            parts.append(f"{len(items)} {_plural(len(items), 'column')} {label}")
    if t.incompatible:
        parts.append(f"**{len(t.incompatible)} incompatible**")
    return f"{code(t.target, cell=True)}: {', '.join(parts)}" if parts else ""


def _pending_cell(w: PendingWork) -> str:
    words = _pending_words(w)
    return f"{code(w.table, cell=True)}: {text(words)}" if words else ""


def _counted_cell(w: PendingWork) -> str:
    if w.changes is not None:
        counted = text(_changes(w.changes, short=True))
    elif w.deletes is not None:
        refused = " **refused**" if w.deletes.refused else ""
        counted = text(_deletes(w.deletes)) + refused
    else:
        return ""
    return f"{code(w.table, cell=True)}: {counted}"


def _cdc_cell(p: PipelinePlan) -> str:
    return text(f"cdc {p.cdc.describe()}") if p.cdc is not None else ""


def _lines(values: Any) -> str:
    """Several targets or tables in one cell, one per line."""
    return "<br>".join(v for v in values if v)


def _notes(title: str, items: list[tuple[str, str]]) -> list[str]:
    if not items:
        return []
    return ["", f"**{title}**", "", *(f"- {code(pid)}: {text(msg)}" for pid, msg in items)]


# ---------------------------------------------------------------- words


def _pending_words(w: PendingWork) -> str:
    """`2 new files, 99.3 KiB`, `3 new batches, ~1,200 rows; 1 queued`; empty: nothing to load."""
    if not w.has_work:
        return ""
    parts: list[str] = []
    if w.new_files or w.changed_files:
        kinds = [
            f"{len(w.new_files):,} new" if w.new_files else "",
            f"{len(w.changed_files):,} changed" if w.changed_files else "",
        ]
        n = len(w.new_files) + len(w.changed_files)
        kind = ", ".join(k for k in kinds if k)
        parts.append(f"{kind} {_plural(n, 'file')}, {byte_size(w.bytes)}")
    elif w.new_batches:
        exact = "" if w.estimate == "counted" else "~"
        rows = f", {exact}{w.estimated_rows:,} rows" if w.estimated_rows else ""
        parts.append(f"{w.new_batches:,} new {_plural(w.new_batches, 'batch', 'batches')}{rows}")
    if w.queued_batches:
        parts.append(f"{w.queued_batches:,} queued")
    if w.reload_batches:
        parts.append(f"{w.reload_batches:,} to load again")
    return "; ".join(parts)


def _data_totals(work: list[PendingWork]) -> str:
    files = sum(len(w.new_files) + len(w.changed_files) for w in work)
    size = sum(w.bytes for w in work if w.new_files or w.changed_files)
    rows = sum(w.estimated_rows or 0 for w in work)
    batches = sum(w.new_batches + w.queued_batches + w.reload_batches for w in work)
    parts = []
    if files:
        parts.append(f"{files:,} {_plural(files, 'file')}, {byte_size(size)}")
    if rows:
        parts.append(f"~{rows:,} rows")
    if batches and not files:
        parts.append(f"{batches:,} {_plural(batches, 'batch', 'batches')}")
    return ", ".join(parts)


def _deletes(d: DeletePreview) -> str:
    share = f" ({d.rows / d.of:.0%})" if d.of else ""
    return f"{d.verb} {d.rows:,} of {d.of:,}{share}"


def _changes(c: ChangePreview, *, short: bool = False) -> str:
    parts = [f"+{c.insert:,} insert", f"~{c.update:,} update"]
    if c.delete is not None:
        parts.append(f"-{c.delete:,} {c.verb or 'delete'}")
    parts.append(f"{c.unchanged:,} unchanged")
    counted = ", ".join(parts)
    return counted if short else f"next batch {c.batch}: {counted} (counted)"


def _evolve(step: EvolveStep) -> str:
    parts = []
    if step.create:
        parts.append(f"create ({_columns(step.columns)})")
    parts += [f"add {_column(c.name, c.type)}" for c in step.add_columns]
    parts += [f"widen {w.name} {w.from_type} -> {w.to_type}" for w in step.widen_columns]
    parts += [f"rename {r}" for r in step.rename_columns]
    parts += [f"retype {r.name} {r.from_type} -> {r.to_type}" for r in step.retype_columns]
    parts += [f"discard {c}" for c in step.discard_columns]
    parts += [f"refused: {r}" for r in step.refused]
    return "; ".join(parts) or "as it is"


def _columns(columns: list[Column]) -> str:
    """As the text plan writes a table to create: types when any is known."""
    if any(c.type for c in columns):
        return ", ".join(_column(c.name, c.type) for c in columns)
    if columns:
        return ", ".join(c.name for c in columns) + "; types from the data"
    return "columns from the data"


def _column(name: str, type_: str | None) -> str:
    return f"{name} {type_ or '(type from the data)'}"


def _limited(items: list[str], noun: str) -> list[str]:
    if len(items) <= LIST_LIMIT:
        return items
    return [*items[:LIST_LIMIT], f"… and {len(items) - LIST_LIMIT:,} more {noun}"]


def _plural(n: int, one: str, many: str | None = None) -> str:
    return one if n == 1 else (many or one + "s")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
