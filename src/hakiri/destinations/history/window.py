"""replace_window, written once: which target rows a batch replaces.

With a range (`window = 'range'`), the rows whose `window_column` lies in the batch's
cursor range (bounds inclusive or not, cast to the column's type), or IS NULL when the
window takes the NULLs (`range_predicate`); a batch with no rows in its range refuses to
empty that range (`check_empty_window`). Without one, the rows whose value the batch has,
NULL included (`batch_values`, `same_value`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from sqlglot import exp

from hakiri.destinations.base import Window
from hakiri.destinations.history.render import all_of, cast, column, null_safe_equal
from hakiri.errors import EmptySource, LoadError
from hakiri.spec.load import LoadSpec

__all__ = [
    "batch_values",
    "check_empty_window",
    "check_window_column",
    "in_batch_values",
    "range_predicate",
    "same_value",
]


def check_window_column(
    name: str, staged: Collection[str], target_type: str | None, target: str
) -> str:
    """The window column's type in the target; refused when it is not staged or not there."""
    if target_type is None or name not in staged:
        where = "target" if target_type is None else "staged rows"
        raise LoadError(
            f"window_column {name!r} is not in the {where} of {target}",
            "fix `window_column`, or select that column in the transforms",
        )
    return target_type


def range_predicate(window: Window, name: str, type_name: str, alias: str = "t") -> exp.Expr:
    """The target rows (alias) in the batch's range: `type_name` is the column's type as
    the target names it, the bounds are cast to it."""
    value = column(name, alias)
    parts: list[exp.Expr] = []
    if window.lo is not None:
        lo = cast(exp.Literal.string(window.lo), type_name)
        parts.append(
            exp.GTE(this=value, expression=lo)
            if window.lo_inclusive
            else exp.GT(this=value, expression=lo)
        )
    if window.hi is not None:
        hi = cast(exp.Literal.string(window.hi), type_name)
        parts.append(
            exp.LTE(this=value, expression=hi)
            if window.hi_inclusive
            else exp.LT(this=value, expression=hi)
        )
    inside = all_of(parts)
    if window.nulls:
        return exp.paren(exp.or_(exp.paren(inside), value.copy().is_(exp.null())))
    return inside


def batch_values(name: str, staged: exp.Table) -> exp.Select:
    """The window: the distinct values of the column the batch has (NULL is a value too)."""
    return exp.select(column(name, "s")).distinct().from_(staged.as_("s", quoted=True))


def same_value(name: str, left: str, right: str) -> exp.Expr:
    return null_safe_equal(column(name, left), column(name, right))


def in_batch_values(name: str, staged: exp.Table, alias: str = "t") -> exp.Expr:
    """The target rows (alias) whose value of the column the batch has."""
    present = (
        exp.select(exp.Literal.number(1))
        .from_(staged.as_("s", quoted=True))
        .where(same_value(name, "s", alias))
    )
    return exp.Exists(this=present)


def check_empty_window(
    load: LoadSpec, window: Window, staged: int, rows_inside: Callable[[], int], target: str
) -> None:
    """A batch with no rows in its range must not empty that range of the target (unless
    `fail_on_empty_source = false`); `rows_inside` counts the target's rows in it."""
    if staged or not load.fail_on_empty_source:
        return
    inside = rows_inside()
    if inside:
        raise EmptySource(
            f"the source has 0 rows in {window.describe()}; refusing to empty that window of "
            f"{target} ({inside:,} rows)",
            "if the window really is empty now, set `fail_on_empty_source = false` in "
            "[pipeline.load]",
        )
