"""The project-wide checks of views: one name each, SQL the query guard accepts, reads that
exist (context-store tables a pipeline loads, or other views), and no cycle.

Each problem points at the view's `sql` key, plus the line inside the SQL the guard names
(a multi-line TOML string starting on the line after `sql = '''` counts from there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hakiri.errors import UnsafeQuery
from hakiri.spec.views import ViewSpec

__all__ = ["ViewProblem", "check_views", "view_order", "view_reads"]


@dataclass(frozen=True)
class ViewProblem:
    message: str
    file: Path
    line: int | None
    path: tuple[str | int, ...]
    hint: str | None = None


def view_reads(view: ViewSpec) -> tuple[str, ...]:
    """The tables and views a (valid) view reads."""
    from hakiri.guards.context_sql import check_context_sql

    return check_context_sql(view.sql).reads


def view_order(views: Mapping[str, ViewSpec]) -> list[str]:
    """The views' names, each after the views it reads (they have no cycle)."""
    done: dict[str, None] = {}

    def visit(name: str) -> None:
        if name in done:
            return
        for read in view_reads(views[name]):
            if read in views and read != name:
                visit(read)
        done[name] = None

    for name in views:
        visit(name)
    return list(done)


def check_views(
    entries: Sequence[tuple[ViewSpec, Any, tuple[str | int, ...], Any]],
    tables: Mapping[str, str],
) -> list[ViewProblem]:
    """`entries`: (view, origin, key path of the view in its file, its document)."""
    from hakiri.guards.context_sql import check_context_sql

    problems: list[ViewProblem] = []
    first: dict[str, Any] = {}
    reads: dict[str, tuple[str, ...]] = {}
    where: dict[str, tuple[Any, tuple[str | int, ...], Any]] = {}
    for view, origin, path, doc in entries:
        at = _sql_line(doc, path)
        if view.name in first:
            problems.append(
                ViewProblem(
                    f"view `{view.name}` defined in two places: {first[view.name]} and {origin}",
                    doc.file,
                    doc.index.line_of((*path, "name")),
                    (*path, "name"),
                    "keep one definition",
                )
            )
            continue
        first[view.name] = origin
        where[view.name] = (origin, path, doc)
        if view.name in tables:
            problems.append(
                ViewProblem(
                    f"view `{view.name}` has the name of the table pipeline "
                    f"`{tables[view.name]}` loads into the context store",
                    doc.file,
                    doc.index.line_of((*path, "name")),
                    (*path, "name"),
                    "give the view another name",
                )
            )
        try:
            reads[view.name] = check_context_sql(view.sql).reads
        except UnsafeQuery as exc:
            line = at[0] + (exc.line - 1 if exc.line else 0) + (at[1] if exc.line else 0)
            problems.append(
                ViewProblem(
                    f"view `{view.name}`: {exc.reason}", doc.file, line, (*path, "sql"), exc.hint
                )
            )
    for name, names in reads.items():
        _, path, doc = where[name]
        for read in names:
            if read not in tables and read not in reads:
                known = ", ".join(sorted(tables)) or "none"
                views = ", ".join(sorted(v for v in reads if v != name)) or "none"
                problems.append(
                    ViewProblem(
                        f"view `{name}` reads `{read}`, which is neither a context-store table "
                        "a pipeline loads nor a view",
                        doc.file,
                        _sql_line(doc, path)[0],
                        (*path, "sql"),
                        f"tables: {known}; views: {views}",
                    )
                )
    for cycle in _cycles(reads):
        _, path, doc = where[cycle[0]]
        problems.append(
            ViewProblem(
                "views read each other in a cycle: " + " -> ".join(f"`{n}`" for n in cycle),
                doc.file,
                _sql_line(doc, path)[0],
                (*path, "sql"),
                "a view may read tables and views defined without it",
            )
        )
    return problems


def _sql_line(doc: Any, path: tuple[str | int, ...]) -> tuple[int, int]:
    """(line of the `sql` key, 1 if its multi-line string starts on the next line)."""
    line = doc.index.line_of((*path, "sql")) or doc.index.line_of(path) or 1
    try:
        text = doc.file.read_text(encoding="utf-8").splitlines()[line - 1]
    except (OSError, IndexError, UnicodeDecodeError):
        return line, 0
    return line, int(text.rstrip().endswith(("'''", '"""')))


def _cycles(reads: Mapping[str, tuple[str, ...]]) -> list[list[str]]:
    """Each cycle among the views once, as the names along it (first name repeated last)."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def walk(name: str, trail: list[str]) -> None:
        for read in reads.get(name, ()):
            if read not in reads:
                continue
            if read in trail:
                cycle = [*trail[trail.index(read) :], read]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    found.append(cycle)
                continue
            walk(read, [*trail, read])

    for name in reads:
        walk(name, [name])
    return found
