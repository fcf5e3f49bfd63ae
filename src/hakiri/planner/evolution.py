"""Schema evolution: what the source's columns (after transforms) mean for an existing target.

Decided (by the engine) before a batch is staged, recorded in the catalog's schema log, then applied
by the destination (`Destination.evolve`) before any row of the batch moves:

| source vs target | evolve | discard_columns | freeze |
|---|---|---|---|
| a new column | added (NULL in older rows) | left out of the load | refused |
| a column gone from the source | kept, NULL in new rows | same | refused |
| a wider type (int -> bigint, ...) | the target column widens | same | refused |
| a narrower or fitting type | loads as is | same | loads as is |
| an incompatible type | refused, unless accepted | same | refused |
| a declared rename (old -> new) | the target column is renamed | same | refused |

Refusals raise SchemaIncompatible before anything is written. `hakiri schema accept ID`
records an `accept` event for the changes the last refusal named; the next run applies
exactly those (an incompatible type is converted in place, values that do not convert
fail the change). A change of the upsert key is never evolved: it needs a migration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hakiri.catalog.records import SchemaEvent
from hakiri.destinations.base import ColumnRetype, SchemaChange, TargetColumn
from hakiri.errors import SchemaIncompatible
from hakiri.planner.types import compare_types, destination_type

__all__ = [
    "APPLIED_KINDS",
    "Blocked",
    "SchemaDecision",
    "SchemaRefused",
    "accepted_changes",
    "check_upsert_key",
    "decide",
    "destination_type",
    "followed_renames",
    "upsert_key_change",
]

# Events that change the target: an accept is used up by the next one of these.
APPLIED_KINDS = frozenset({"add_column", "widen", "rename", "retype"})


def accepted_changes(events: Iterable[SchemaEvent], table: str) -> set[tuple[str, str]]:
    """(kind, column) pairs accepted for `table` and not applied since."""
    accepted: set[tuple[str, str]] = set()
    for event in events:  # oldest first
        if event.table_name != table:
            continue
        if event.kind == "accept":
            accepted |= {(kind, column) for kind, column in event.detail.get("changes", [])}
        elif event.kind in APPLIED_KINDS:
            column = (
                event.detail.get("to") if event.kind == "rename" else event.detail.get("column")
            )
            kind = "incompatible" if event.kind == "retype" else event.kind
            accepted.discard((kind, str(column)))
    return accepted


def followed_renames(names: Iterable[str], renames: Mapping[str, str]) -> dict[str, str]:
    """`renames = {old = "new"}`: the source columns (old -> new) that take their new name now:
    the source still sends `old` and not `new`."""
    present = set(names)
    return {old: new for old, new in renames.items() if old in present and new not in present}


def upsert_key_change(applied: Sequence[str] | None, now: Sequence[str] | None) -> str | None:
    """An upsert key is never evolved: a change of it on an existing target needs a migration."""
    if applied and list(applied) != list(now or []):
        return (
            f"upsert_key changed from ({', '.join(applied)}) to ({', '.join(now or [])}) "
            "on an existing target"
        )
    return None


def check_upsert_key(applied: Sequence[str] | None, now: Sequence[str] | None, where: str) -> None:
    change = upsert_key_change(applied, now)
    if change is not None:
        raise SchemaIncompatible(
            f"{where}: {change}",
            "a key change needs an explicit migration: change the target's key yourself, or "
            "load into a new target table",
        )


@dataclass(frozen=True)
class Blocked:
    """A change the policy (or an incompatible type) refuses; `hakiri schema accept` can allow it."""

    kind: str  # 'add_column' | 'drop_column' | 'widen' | 'rename' | 'incompatible'
    column: str
    detail: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        d = self.detail
        if self.kind == "incompatible":
            return f"{self.column}: {d['source_type']} cannot load into {d['target_type']}"
        if self.kind == "widen":
            return f"{self.column}: {d['from']} would widen to {d['to']}"
        if self.kind == "rename":
            return f"{d['from']} would be renamed to {self.column}"
        if self.kind == "drop_column":
            return f"{self.column} is no longer in the source"
        return f"{self.column} ({d.get('type')}) is new in the source"

    def key(self) -> tuple[str, str]:
        return (self.kind, self.column)

    def refusal(self, policy: str) -> str:
        """One line for `plan` and `apply --json`: the change and what refuses it."""
        if self.kind == "incompatible":
            return self.describe()
        return f"{self.describe()} (schema_policy = '{policy}' refuses it)"


class SchemaRefused(SchemaIncompatible):
    """SchemaIncompatible that also carries the blocked changes (logged for `schema accept`)."""

    def __init__(self, reason: str, hint: str, blocked: list[Blocked]) -> None:
        super().__init__(reason, hint)
        self.blocked = blocked


@dataclass
class SchemaDecision:
    change: SchemaChange = field(default_factory=SchemaChange)
    discard: list[str] = field(default_factory=list)  # source columns left out of the load
    missing: list[str] = field(default_factory=list)  # target columns the source no longer has
    blocked: list[Blocked] = field(default_factory=list)

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """(kind, detail) for the schema log: what this decision does."""
        found: list[tuple[str, dict[str, Any]]] = []
        for old, new in self.change.rename:
            found.append(("rename", {"from": old, "to": new}))
        for column in self.change.add:
            found.append(("add_column", {"column": column.name, "type": column.type}))
        for retype in self.change.widen:
            found.append(("widen", _retype(retype)))
        for retype in self.change.retype:
            found.append(("retype", _retype(retype)))
        for name in self.discard:
            found.append(("discard_column", {"column": name}))
        for name in self.missing:
            found.append(("missing_column", {"column": name}))
        return found


def _retype(retype: ColumnRetype) -> dict[str, Any]:
    return {"column": retype.column, "from": retype.old_type, "to": retype.new_type}


def decide(
    source: Sequence[tuple[str, str]],
    target: Sequence[TargetColumn],
    *,
    destination_kind: str,
    policy: str,
    renames: Mapping[str, str],
    accepted: set[tuple[str, str]],
    where: str,
    guessed: frozenset[str] = frozenset(),
) -> SchemaDecision:
    """Compare the source's (name, Spark type) columns with an existing target's; `apply`
    decides with the batch's columns, `plan` with the source's observed ones.

    Raises SchemaIncompatible, naming every blocked change, when any is not accepted.
    `guessed` names source columns whose type was inferred from the batch's values: a type
    change of one of them is refused with a hint to declare the types, never to accept it.
    """
    decision = SchemaDecision()
    by_name = {c.name: c for c in target}
    source_names = {name for name, _ in source}
    renamed_from = {new: old for old, new in renames.items()}
    add: list[TargetColumn] = []
    widen: list[ColumnRetype] = []
    retype: list[ColumnRetype] = []
    rename: list[tuple[str, str]] = []

    for name, spark_type in source:
        # '' is a type only the data will tell (`plan` of a CSV without declared columns): the
        # column's presence is judged, its type is not.
        wanted = (
            (destination_type(spark_type, destination_kind) or spark_type) if spark_type else ""
        )
        current = by_name.get(name)
        old = renamed_from.get(name)
        if current is None and old is not None and old in by_name and old not in source_names:
            current = by_name[old]
            _gate(decision, policy, accepted, Blocked("rename", name, {"from": old}), frozen=True)
            rename.append((old, name))
        if current is None:
            if policy == "discard_columns":
                decision.discard.append(name)
                continue
            _gate(decision, policy, accepted, Blocked("add_column", name, {"type": wanted}), True)
            add.append(TargetColumn(name, wanted))
            continue
        verdict = compare_types(wanted, current.type) if wanted else "same"
        if verdict == "widen":
            blocked = Blocked("widen", name, {"from": current.type, "to": wanted})
            _gate(decision, policy, accepted, blocked, frozen=True)
            widen.append(ColumnRetype(current.name, current.type, wanted))
        elif verdict == "incompatible":
            blocked = Blocked(
                "incompatible", name, {"source_type": wanted, "target_type": current.type}
            )
            if blocked.key() in accepted:
                retype.append(ColumnRetype(current.name, current.type, wanted))
            else:
                decision.blocked.append(blocked)

    renamed_old = {old for old, _ in rename}
    for column in target:
        if column.name not in source_names and column.name not in renamed_old:
            decision.missing.append(column.name)
            _gate(decision, policy, accepted, Blocked("drop_column", column.name), frozen=True)

    decision.change = SchemaChange(tuple(add), tuple(widen), tuple(rename), tuple(retype))
    if decision.blocked:
        raise SchemaRefused(
            f"{where}: the source's columns changed in a way the schema policy '{policy}' refuses: "
            + "; ".join(b.describe() for b in decision.blocked),
            _refusal_hint(decision.blocked, policy, guessed),
            decision.blocked,
        )
    return decision


def _refusal_hint(blocked: Sequence[Blocked], policy: str, guessed: frozenset[str]) -> str:
    retyped = [b.column for b in blocked if b.kind in ("incompatible", "widen")]
    inferred = [column for column in retyped if column in guessed]
    if inferred:
        # Accepting would retype the target after a guess (a file of whole numbers reads as int,
        # an empty or all-NULL column as string): the next file would disagree again.
        return (
            f"the source's type of {', '.join(inferred)} is inferred from this batch's values; "
            "declare the column types in the source's `columns` (or cast them in a transform) "
            "so every file reads the same way"
        )
    return (
        ("set schema_policy = 'evolve', " if policy == "freeze" else "")
        + "cast the column in a transform, or accept the change deliberately with "
        "`hakiri schema accept <pipeline>`"
    )


def _gate(
    decision: SchemaDecision,
    policy: str,
    accepted: set[tuple[str, str]],
    blocked: Blocked,
    frozen: bool,
) -> None:
    """Under `freeze`, every change is blocked unless it was accepted."""
    if frozen and policy == "freeze" and blocked.key() not in accepted:
        decision.blocked.append(blocked)
