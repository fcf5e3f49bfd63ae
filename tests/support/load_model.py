"""What a target must hold: hakiri's documented load semantics, as a small pure-Python model.

The fault campaign (bench/fault_campaign.py) and the state-machine test
(tests/integration/engine/test_fault_machine.py) drive a project step by step and
ask this model, after every step, what the target may hold. Nothing here imports
hakiri: the model is written from docs/load-modes.md, docs/sources.md and DESIGN.md
("Exactly-once across two databases"), so it can disagree with the code.

What it encodes
---------------

- The catalog's batch queue, in claim order: batches an earlier run left (pending,
  failed or left processing) first, then the batches planned now. A run stops at its
  first failing batch; the batches after it stay queued for the next run.
- Files: one batch per file content (`on_change = "reload"`), planned when the path's
  current content is neither its latest loaded content nor already queued. A batch is
  bound to the content it was planned from: when its file changed or vanished before the
  batch was read, the batch is `superseded` / `gone` and loads nothing (DESIGN.md); the
  current content is a batch of its own. truncate/blue_green plan one snapshot batch of
  every file; a glob matching nothing plans nothing (the target is left alone).
- PostgreSQL tables: append and upsert read past the cursor `seq` (the first run loads
  [MIN, MAX], each later run (planned_to, MAX]); the other modes read the whole table as
  one snapshot batch. While any batch of an earlier plan is unfinished, a run only works
  that queue ("backfilling", docs/sources.md), and a queued batch reads the table as it
  is when it runs. A snapshot equal to the last one loaded is a no-op.
- Modes: append adds rows; upsert keeps the latest row per `id`; truncate and blue_green
  hold the rows of the last snapshot loaded (an empty one is refused); incremental_watermark
  inserts the rows whose `seq` is above the largest `seq` loaded so far; scd2 keeps a version
  per change of a key's tracked (non-key) values, closing a key missing from a table
  snapshot (`deletes = "close"`; files use `deletes = "ignore"`); replace_window (values)
  deletes the target rows whose `day` the batch has, then inserts the batch.
- A crash (SIGKILL, a dropped connection, a full disk, a refused connection) may end a
  run anywhere: before it enqueued anything, or after any prefix of its queue (a commit
  whose acknowledgement was lost counts as committed: the destination's ledger tells the
  next run). `LoadModel` keeps the SET of states the system may be in and narrows it with
  what the target is observed to hold.

Rows are `(id, seq, name, amount, day)` with `amount` as text ("4.50") and `day` as ISO
text, so a malformed amount ("x4.50") can be planted in a file.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "COLUMNS",
    "MODES",
    "SNAPSHOT_MODES",
    "Batch",
    "FileVersion",
    "LoadModel",
    "Row",
    "Run",
    "State",
    "canonical_history",
    "canonical_rows",
    "describe_difference",
]

Row = tuple[int, int, str, str, str]  # id, seq, name, amount ("4.50"), day ("2026-01-02")
COLUMNS = ("id", "seq", "name", "amount", "day")
HEADER = ",".join(COLUMNS)
MODES = (
    "append",
    "upsert",
    "truncate",
    "blue_green",
    "incremental_watermark",
    "scd2",
    "replace_window",
)
SNAPSHOT_MODES = frozenset({"truncate", "blue_green"})
CURSOR_MODES = frozenset({"append", "upsert"})  # a table source reads these past `seq`
_AMOUNT = re.compile(r"^-?\d+\.\d{2}$")

# scd2 history: per key, its versions' tracked values (seq, name, amount, day) in order,
# and whether the last version is closed (is_current = false).
Version = tuple[int, str, str, str]
History = tuple[tuple[int, tuple[Version, ...], bool], ...]


@dataclass(frozen=True)
class FileVersion:
    """One content of one file. `rev` is unique per version, and written into the file as a
    comment line (the source reads with `comment = "#"`), so no two versions share bytes:
    every version is a batch of its own."""

    rev: int
    rows: tuple[Row, ...]
    mtime: float = 0.0

    @property
    def malformed(self) -> bool:
        return any(not _AMOUNT.match(r[3]) for r in self.rows)

    def text(self) -> str:
        lines = [HEADER, *(",".join(str(v) for v in r) for r in self.rows), f"# rev {self.rev}"]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Batch:
    """A batch in the catalog, as the model sees it. `n` is its claim order."""

    n: int
    kind: str  # file | snapshot (of files) | chunk (table range) | table (whole-table snapshot)
    path: str | None = None
    rev: int | None = None
    files: tuple[tuple[str, int], ...] | None = None
    lo: int | None = None  # chunk: seq > lo (None: from the start) and seq <= hi
    hi: int | None = None
    fingerprint: frozenset[Row] | None = None
    status: str = "pending"  # pending (or failed: tried again) | committed | dead (superseded/gone)

    def describe(self) -> str:
        if self.kind == "file":
            return f"file {self.path}@r{self.rev}"
        if self.kind == "snapshot":
            return "snapshot{" + ", ".join(f"{p}@r{r}" for p, r in self.files or ()) + "}"
        if self.kind == "chunk":
            return f"chunk({'-inf' if self.lo is None else self.lo}, {self.hi}]"
        return f"table snapshot of {len(self.fingerprint or ())} row(s)"


@dataclass(frozen=True)
class State:
    """One state the system may be in: the target, and the catalog facts that decide
    what the next runs do."""

    rows: tuple[Row, ...] = ()  # the target, sorted (a multiset); unused for scd2
    history: History = ()  # scd2's target
    batches: tuple[Batch, ...] = ()
    loaded: tuple[tuple[str, int], ...] = ()  # files: path -> latest rev loaded
    last_snapshot: Any = None  # files: the (path, rev) set last loaded; tables: its fingerprint
    planned_to: int | None = None  # table cursor

    def target(self, mode: str) -> Any:
        return self.history if mode == "scd2" else self.rows

    def queued(self) -> list[Batch]:
        return [b for b in self.batches if b.status == "pending"]


@dataclass
class Run:
    """What one apply does from one state: `pre` (nothing happened yet), then the state after
    enqueueing and after each batch of the queue, in order (`after[0]` = enqueued, nothing
    loaded). `failed_at` is the index in the queue of a batch that fails on its own (a
    malformed record, an empty snapshot refused), which ends the run with exit 1."""

    pre: State
    after: list[State]
    queue: list[Batch]
    failed_at: int | None = None
    failure: str | None = None

    @property
    def final(self) -> State:
        return self.after[-1]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed_at is not None else 0


# ---------------------------------------------------------------------------- the model


@dataclass
class LoadModel:
    """The set of states a (mode, source) pipeline may be in, narrowed by observations."""

    mode: str
    source: str  # "files" | "table"
    states: set[State] = field(default_factory=lambda: {State()})

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}")
        if self.source not in ("files", "table"):
            raise ValueError(f"unknown source {self.source!r}")

    # -- one apply ------------------------------------------------------------

    def run(self, state: State, view: Mapping[Any, Any]) -> Run:
        """The apply from `state`, with the source as `view` (files: path -> FileVersion;
        table: id -> Row)."""
        enqueued = self._plan(state, view)
        queue = enqueued.queued()
        after = [enqueued]
        current = enqueued
        for index, batch in enumerate(queue):
            outcome = self._load(current, batch, view)
            if isinstance(outcome, str):
                return Run(state, after, queue, failed_at=index, failure=outcome)
            current = outcome
            after.append(current)
        return Run(state, after, queue)

    def expect(self, view: Mapping[Any, Any], fault: str | None) -> dict[int, set[State]]:
        """exit code -> the states the system may be in after an apply under `fault`:
        None (a plain apply: exactly what the model says), or "crash" (the run may end
        anywhere: SIGKILL, a cut connection, a full disk, a refused connection)."""
        allowed: dict[int, set[State]] = {0: set(), 1: set()}
        for state in self.states:
            run = self.run(state, view)
            allowed[run.exit_code].add(run.final)
            if fault is not None:
                allowed[1].add(run.pre)
                allowed[1].update(run.after)
        return allowed

    def runs(self, view: Mapping[Any, Any]) -> list[Run]:
        return [self.run(s, view) for s in self.states]

    def narrow(self, states: Iterable[State], target: Any) -> set[State]:
        """The states among `states` whose target is `target` (canonical form)."""
        return {s for s in states if s.target(self.mode) == target}

    def settle(self, states: set[State]) -> None:
        """Go on from `states` (those `narrow` kept). They all hold the observed target and
        differ only in the catalog facts a crash leaves unknown; each later observation
        narrows them again, so the set stays small."""
        self.states = states

    # -- planning -------------------------------------------------------------

    def _plan(self, state: State, view: Mapping[Any, Any]) -> State:
        """The state after the run enqueued its new batches (and, for a cursor, planned_to)."""
        n = len(state.batches)
        if self.source == "files":
            new = self._plan_files(state, view, n)
        else:
            new = self._plan_table(state, view, n)
        if not new:
            return state
        planned_to = state.planned_to
        if new[-1].kind == "chunk":
            planned_to = new[-1].hi
        return replace(state, batches=state.batches + tuple(new), planned_to=planned_to)

    def _plan_files(self, state: State, files: Mapping[str, FileVersion], n: int) -> list[Batch]:
        if not files:
            return []  # a glob matching nothing plans nothing
        if self.mode in SNAPSHOT_MODES:
            listing = tuple(sorted((path, v.rev) for path, v in files.items()))
            if listing == state.last_snapshot:
                return []  # the files are as they were when last loaded
            if any(b.files == listing for b in state.queued()):
                return []
            return [Batch(n, "snapshot", files=listing)]
        loaded = dict(state.loaded)
        known = {b.rev for b in state.batches if b.kind == "file"}
        new: list[Batch] = []
        for path in sorted(files):
            version = files[path]
            if loaded.get(path) == version.rev or version.rev in known:
                continue
            new.append(Batch(n + len(new), "file", path=path, rev=version.rev))
        return new

    def _plan_table(self, state: State, table: Mapping[int, Row], n: int) -> list[Batch]:
        if state.queued():
            return []  # an earlier plan is unfinished: this run only works its queue
        if self.mode in CURSOR_MODES:
            if not table:
                return []
            high = max(r[1] for r in table.values())
            if state.planned_to is not None and high <= state.planned_to:
                return []
            return [Batch(n, "chunk", lo=state.planned_to, hi=high)]
        fingerprint = frozenset(table.values())
        if fingerprint == state.last_snapshot:
            return []
        return [Batch(n, "table", fingerprint=fingerprint)]

    # -- loading one batch -----------------------------------------------------

    def _load(self, state: State, batch: Batch, view: Mapping[Any, Any]) -> State | str:
        """The state after `batch` loads, or the reason it fails (the run stops there)."""
        extra: dict[str, Any] = {}
        close_missing = False
        if batch.kind == "file":
            version = view.get(batch.path)
            if version is None or version.rev != batch.rev:
                return _mark(state, batch, "dead")  # gone / superseded: no row of it loads
            assert version is not None
            if version.malformed:
                return f"{batch.path} holds a malformed record"
            rows: Sequence[Row] = version.rows
            loaded = dict(state.loaded)
            loaded[batch.path] = batch.rev
            extra["loaded"] = tuple(sorted(loaded.items()))
        elif batch.kind == "snapshot":
            assert batch.files is not None
            if any(
                (version := view.get(path)) is None or version.rev != rev
                for path, rev in batch.files
            ):
                return _mark(state, batch, "dead")
            versions = [view[path] for path, _ in batch.files]
            if any(v.malformed for v in versions):
                return "a file of the snapshot holds a malformed record"
            rows = [r for v in versions for r in v.rows]
            extra["last_snapshot"] = batch.files
        elif batch.kind == "chunk":
            rows = [
                r
                for r in view.values()
                if (batch.lo is None or r[1] > batch.lo) and r[1] <= (batch.hi or 0)
            ]
        else:
            rows = list(view.values())
            extra["last_snapshot"] = batch.fingerprint
            close_missing = True
        if not rows and self.mode in SNAPSHOT_MODES:
            return "the source produced 0 rows"  # the empty-source guard
        if not rows and self.mode == "scd2" and close_missing and _live(state.history):
            return "an empty snapshot would close every key"  # the delete guard
        if self.mode == "scd2":
            extra["history"] = _scd2(state.history, rows, close_missing)
        else:
            extra["rows"] = _apply_rows(self.mode, state.rows, rows)
        return _mark(replace(state, **extra), batch, "committed")


def _mark(state: State, batch: Batch, status: str) -> State:
    batches = tuple(replace(b, status=status) if b.n == batch.n else b for b in state.batches)
    return replace(state, batches=batches)


def _live(history: History) -> bool:
    return any(not closed for _, _, closed in history)


def _apply_rows(mode: str, target: tuple[Row, ...], rows: Sequence[Row]) -> tuple[Row, ...]:
    if mode == "append":
        return tuple(sorted((*target, *rows)))
    if mode == "upsert":
        by_key = {r[0]: r for r in target}
        by_key.update({r[0]: r for r in rows})
        return tuple(sorted(by_key.values()))
    if mode in SNAPSHOT_MODES:
        return tuple(sorted(rows))
    if mode == "incremental_watermark":
        mark = max((r[1] for r in target), default=0)
        return tuple(sorted((*target, *(r for r in rows if r[1] > mark))))
    if mode == "replace_window":
        days = {r[4] for r in rows}
        return tuple(sorted((*(r for r in target if r[4] not in days), *rows)))
    raise ValueError(mode)


def _scd2(history: History, rows: Sequence[Row], close_missing: bool) -> History:
    keys = {key: (list(versions), closed) for key, versions, closed in history}
    present = {r[0] for r in rows}
    if close_missing:
        for key, (versions, closed) in keys.items():
            if not closed and key not in present:
                keys[key] = (versions, True)
    for r in rows:
        values: Version = (r[1], r[2], r[3], r[4])
        versions, closed = keys.get(r[0], ([], False))
        if not versions or closed or versions[-1] != values:
            keys[r[0]] = ([*versions, values], False)
    return tuple(sorted((key, tuple(v), closed) for key, (v, closed) in keys.items()))


# ---------------------------------------------------------------------------- observations


def canonical_rows(records: Iterable[Mapping[str, Any]]) -> tuple[Row, ...]:
    """A target's rows (dicts with the COLUMNS) in the model's form, sorted."""
    return tuple(sorted(_row(r) for r in records))


def _row(r: Mapping[str, Any]) -> Row:
    amount = r["amount"]
    day = r["day"]
    return (
        int(r["id"]),
        int(r["seq"]),
        "" if r["name"] is None else str(r["name"]),
        "" if amount is None else f"{amount:.2f}",
        "" if day is None else day.isoformat() if hasattr(day, "isoformat") else str(day),
    )


def canonical_history(records: Iterable[Mapping[str, Any]]) -> tuple[History, list[str]]:
    """An scd2 target (rows with COLUMNS + valid_from, valid_to, is_current) in the model's
    form, and the problems of its validity columns: per key, versions ordered by valid_from,
    every version but the last ended (valid_to set, not after the next start, not current),
    the last current exactly when its valid_to is NULL."""
    by_key: dict[int, list[Mapping[str, Any]]] = {}
    for r in records:
        by_key.setdefault(int(r["id"]), []).append(r)
    problems: list[str] = []
    history = []
    for key in sorted(by_key):
        versions = sorted(by_key[key], key=lambda r: r["valid_from"])
        for earlier, later in itertools.pairwise(versions):
            if earlier["valid_from"] == later["valid_from"]:
                problems.append(f"id {key}: two versions start at {earlier['valid_from']}")
            if earlier["is_current"] or earlier["valid_to"] is None:
                problems.append(f"id {key}: a version that is not the last is still open")
            elif earlier["valid_to"] > later["valid_from"]:
                problems.append(f"id {key}: a version ends after the next one starts")
        last = versions[-1]
        if bool(last["is_current"]) != (last["valid_to"] is None):
            problems.append(f"id {key}: is_current disagrees with valid_to on the last version")
        values = tuple(_row(r)[1:] for r in versions)
        history.append((key, values, not bool(last["is_current"])))
    return tuple(history), problems


def describe_difference(mode: str, expected: Any, actual: Any) -> dict[str, Any]:
    """Rows the target lacks (lost) and rows it holds too often (doubled, or never expected)."""
    if mode == "scd2":
        want = {key: (v, c) for key, v, c in expected}
        got = {key: (v, c) for key, v, c in actual}
        keys = sorted(set(want) | set(got))

        def shown(entry: tuple[tuple[Version, ...], bool] | None) -> str | None:
            if entry is None:
                return None
            versions, closed = entry
            return (
                f"{len(versions)} version(s) {list(versions)}, {'closed' if closed else 'current'}"
            )

        diffs = {
            k: {"model": shown(want.get(k)), "target": shown(got.get(k))}
            for k in keys
            if want.get(k) != got.get(k)
        }
        lost = sum(
            max(0, len(want[k][0]) - len(got.get(k, ((), False))[0])) for k in diffs if k in want
        )
        extra = sum(
            max(0, len(got[k][0]) - len(want.get(k, ((), False))[0])) for k in diffs if k in got
        )
        return {"keys": diffs, "lost": lost, "doubled": extra}
    want, got = Counter(expected), Counter(actual)
    lost = want - got
    extra = got - want
    doubled = Counter({r: n for r, n in extra.items() if r in want})
    return {
        "lost": sorted(lost.elements()),
        "extra": sorted(extra.elements()),
        "doubled": sorted(doubled.elements()),
    }
