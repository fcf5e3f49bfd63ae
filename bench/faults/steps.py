"""The campaign's steps: what a run can do to its source and its applies, and the seeded
step list of each run.

Steps are generated from the seed alone (never from hakiri's answers), so a step list
replays on its own. Files hold ids `k`*1000 + 0..5 for file `k`, unique in a file; every
version carries a unique `# rev` comment line, so no two versions share bytes (a content
seen before would be a batch id seen before, which is not what these steps test).
"""

from __future__ import annotations

import fnmatch
import math
import random
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from tests.support.load_model import MODES, FileVersion, Row

DESTINATIONS = ("postgres", "context")
SOURCES = ("files", "table")
# Interleaved so that consecutive runs change destination, source and mode.
COMBOS = [(d, m, s) for m in MODES for s in SOURCES for d in DESTINATIONS]

FILE_STEPS = ("new_file", "edit_pending", "edit_loaded", "delete_file", "malformed")
TABLE_STEPS = ("insert_rows", "update_rows", "delete_rows")
APPLY_STEPS = ("apply", "refuse", "kill", "cut", "disk_full")
FAULTS = ("refuse", "kill", "cut", "disk_full")
WEIGHTS = {
    "apply": 20,
    "new_file": 13,
    "edit_pending": 8,
    "edit_loaded": 9,
    "delete_file": 6,
    "malformed": 6,
    "insert_rows": 15,
    "update_rows": 10,
    "delete_rows": 10,
    "refuse": 5,
    "kill": 5,
    "cut": 6,
    "disk_full": 6,
}
# The acceptance bar, per 200 runs (scaled to --runs): at least this many steps of each.
QUOTA_PER_200 = {"kill": 20, "cut": 20, "disk_full": 5}

NAMES = ("ada", "bob", "cy", "dee")
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04")
CLOCK0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def eligible(kind: str, combo: tuple[str, str, str]) -> bool:
    dest, _, source = combo
    if kind in FILE_STEPS:
        return source == "files"
    if kind in TABLE_STEPS:
        return source == "table"
    if kind == "cut":  # needs a PostgreSQL connection to cut
        return dest == "postgres" or source == "table"
    if kind == "disk_full":
        return dest == "context"
    return True


# ============================================================================ steps


@dataclass
class Step:
    kind: str
    path: str | None = None
    version: FileVersion | None = None
    rows: tuple[Row, ...] = ()
    ids: tuple[int, ...] = ()
    strategy: str | None = None  # kill: uniform | in_load; cut: uniform | on_connection
    u: float = 0.0  # where in its window the fault lands, 0..1

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.version is not None:
            data["version"] = {
                "rev": self.version.rev,
                "rows": [list(r) for r in self.version.rows],
                "mtime": self.version.mtime,
            }
        data["rows"] = [list(r) for r in self.rows]
        data["ids"] = list(self.ids)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        version = data.get("version")
        return cls(
            kind=data["kind"],
            path=data.get("path"),
            version=None
            if version is None
            else FileVersion(
                version["rev"], tuple(tuple(r) for r in version["rows"]), version["mtime"]
            ),
            rows=tuple(tuple(r) for r in data.get("rows", ())),
            ids=tuple(data.get("ids", ())),
            strategy=data.get("strategy"),
            u=data.get("u", 0.0),
        )

    def describe(self) -> str:
        if self.version is not None:
            rows = "; ".join(",".join(map(str, r)) for r in self.version.rows)
            return f"{self.kind} {self.path} r{self.version.rev}: {rows}"
        if self.kind == "delete_file":
            return f"delete_file {self.path}"
        if self.rows:
            return f"{self.kind}: " + "; ".join(",".join(map(str, r)) for r in self.rows)
        if self.ids:
            return f"{self.kind}: ids {', '.join(map(str, self.ids))}"
        if self.strategy:
            return f"{self.kind} ({self.strategy}, u={self.u:.2f}) + apply"
        return self.kind + (" + apply" if self.kind in FAULTS else "")


class Generator:
    """The seeded step list of one run. It tracks the source itself (never hakiri's answers),
    so a run's steps depend on its seed only, and a step list replays on its own."""

    def __init__(self, rng: random.Random, combo: tuple[str, str, str], count: int) -> None:
        self.rng, self.combo, self.count = rng, combo, count
        self.files: dict[str, FileVersion] = {}
        self.pending: set[str] = set()  # written since the last apply
        self.failed: set[str] = set()  # holding a malformed record
        self.rev = 0
        self.seq = 0
        self.clock = 0
        self.next_file = 0
        self.table: dict[int, Row] = {}
        self.next_id = 1
        self.last_insert: list[int] = []

    def steps(self, forced: Counter[str]) -> list[Step]:
        kinds: list[str | None] = [None] * self.count
        first = "new_file" if self.combo[2] == "files" else "insert_rows"
        kinds[0], kinds[-1] = first, "apply"
        middle = list(range(1, self.count - 3))
        self.rng.shuffle(middle)
        for kind, n in sorted(forced.items()):
            for _ in range(n):
                if middle:
                    kinds[middle.pop()] = kind
        choices = [k for k in WEIGHTS if eligible(k, self.combo)]
        weights = [WEIGHTS[k] for k in choices]
        changes = [k for k in choices if k not in APPLY_STEPS]
        steps = []
        deferred: list[str] = []  # faults waiting for work to hit
        for position, kind in enumerate(kinds):
            last = position == self.count - 1
            if kind is None and deferred and self._has_work():
                kind = deferred.pop(0)
            chosen = kind or self.rng.choices(choices, weights)[0]
            if chosen in FAULTS and not last and not self._has_work() and self.rng.random() < 0.8:
                # A fault on an apply with nothing to load tests little: change the source
                # first, and inject the fault at the next free position.
                deferred.append(chosen)
                chosen = self.rng.choice(changes)
            steps.append(self._make(chosen))
        return steps

    def _has_work(self) -> bool:
        return bool(self.pending or self.failed)

    # -- one step ------------------------------------------------------------------

    def _make(self, kind: str) -> Step:
        self.clock += 1
        if kind in APPLY_STEPS:
            self.pending.clear()
            step = Step(kind)
            if kind == "kill":
                step.strategy = self.rng.choice(("uniform", "in_load"))
                step.u = round(self.rng.random(), 3)
            elif kind == "cut":
                step.strategy = self.rng.choice(("uniform", "on_connection"))
                step.u = round(self.rng.random(), 3)
            return step
        if kind in TABLE_STEPS:
            self.pending.add("table")
            return self._table_step(kind)
        return self._file_step(kind)

    def _file_step(self, kind: str) -> Step:
        waiting = sorted(self.pending | self.failed)
        loaded = sorted(set(self.files) - self.pending - self.failed)
        path: str | None = None
        if kind == "edit_pending":
            path = self.rng.choice(waiting) if waiting else None
        elif kind == "edit_loaded":
            path = self.rng.choice(loaded) if loaded else None
        elif kind == "delete_file":
            p = self.rng.random()
            if not self.files:
                path = None
            elif waiting and p < 0.4:
                path = self.rng.choice(waiting)
            elif p < 0.7:
                # The newest file: the file set goes back to one loaded before.
                path = max(self.files, key=lambda f: self.files[f].rev)
            else:
                path = self.rng.choice(sorted(self.files))
            if path is not None:
                del self.files[path]
                self.pending.discard(path)
                self.failed.discard(path)
                return Step("delete_file", path=path)
        elif kind == "malformed":
            path = self.rng.choice(sorted(self.files)) if self.files else None
        if path is None:
            if kind != "malformed":
                kind = "new_file"
            path = f"data/f{self.next_file:02d}.csv"
            self.next_file += 1
        previous = self.files.get(path)
        rows = self._file_rows(path, previous.rows if previous else None)
        if kind == "malformed":
            at = self.rng.randrange(len(rows))
            bad = rows[at]
            rows = [*rows[:at], (bad[0], bad[1], bad[2], "x" + bad[3], bad[4]), *rows[at + 1 :]]
            self.failed.add(path)
        else:
            self.failed.discard(path)
        self.rev += 1
        version = FileVersion(self.rev, tuple(rows), CLOCK0 + 60 * self.clock)
        self.files[path] = version
        self.pending.add(path)
        return Step(kind, path=path, version=version)

    def _file_rows(self, path: str, previous: tuple[Row, ...] | None) -> list[Row]:
        number = int(path.removeprefix("data/f").removesuffix(".csv"))
        base = [number * 1000 + j for j in range(6)]
        if previous is None:
            ids = self.rng.sample(base, self.rng.randint(1, 4))
            return [self._row(i) for i in sorted(ids)]
        rows: list[Row] = []
        for r in previous:
            if r[3].startswith("x"):  # a malformed value is fixed by the edit
                r = (r[0], r[1], r[2], r[3][1:], r[4])
            p = self.rng.random()
            if p < 0.5:
                rows.append(r)
            elif p < 0.85:
                rows.append(self._row(r[0], like=r))
        free = [i for i in base if i not in {r[0] for r in rows}]
        for i in self.rng.sample(free, min(len(free), self.rng.randint(0 if rows else 1, 2))):
            rows.append(self._row(i))
        return sorted(rows)

    def _row(self, key: int, like: Row | None = None) -> Row:
        if self.seq > 3 and self.rng.random() < 0.2:
            seq = self.rng.randint(1, self.seq)  # an old value: the watermark filters it
        else:
            self.seq += 1
            seq = self.seq
        name = self.rng.choice(NAMES)
        amount = f"{self.rng.randint(0, 99999) / 100:.2f}"
        day = self.rng.choice(DAYS)
        if like is not None and self.rng.random() < 0.5:
            name, day = like[2], like[4]  # a partial change
        return (key, seq, name, amount, day)

    def _table_step(self, kind: str) -> Step:
        live = sorted(self.table)
        if kind == "update_rows" and live:
            rows = []
            for key in self.rng.sample(live, min(len(live), self.rng.randint(1, 2))):
                self.seq += 1
                old = self.table[key]
                name = self.rng.choice(NAMES) if self.rng.random() < 0.6 else old[2]
                row = (
                    key,
                    self.seq,
                    name,
                    f"{self.rng.randint(0, 99999) / 100:.2f}",
                    self.rng.choice(DAYS),
                )
                rows.append(row)
                self.table[key] = row
            return Step(kind, rows=tuple(rows))
        if kind == "delete_rows" and len(live) > 1:
            last = [k for k in self.last_insert if k in self.table]
            if last and len(last) < len(live) and self.rng.random() < 0.7:
                keys = last  # undo the last insert: the table goes back to a state seen before
            else:
                keys = [self.rng.choice(live)]
            for key in keys:
                del self.table[key]
            return Step(kind, ids=tuple(keys))
        rows = []
        for _ in range(self.rng.randint(1, 3)):
            self.seq += 1
            row = (
                self.next_id,
                self.seq,
                self.rng.choice(NAMES),
                f"{self.rng.randint(0, 99999) / 100:.2f}",
                self.rng.choice(DAYS),
            )
            self.table[self.next_id] = row
            self.next_id += 1
            rows.append(row)
        self.last_insert = [r[0] for r in rows]
        return Step("insert_rows", rows=tuple(rows))


# ============================================================================ the campaign's plan


def plan_runs(
    seed: int, runs: int, steps: int, only: list[str]
) -> list[tuple[tuple[str, str, str], list[Step], str]]:
    """Every run's combination and steps, up front: the quota of faults is met by
    forcing them into runs that can host them, as late as the deficit requires."""
    combos = [c for c in COMBOS if not only or any(fnmatch.fnmatch("/".join(c), p) for p in only)]
    if not combos:
        raise SystemExit(f"--only {only} matches none of {['/'.join(c) for c in COMBOS]}")
    offset = seed % len(combos)
    chosen = [combos[(offset + r) % len(combos)] for r in range(runs)]
    quota = {k: math.ceil(v * runs / 200) for k, v in QUOTA_PER_200.items()}
    made: Counter[str] = Counter()
    plans = []
    for r, combo in enumerate(chosen):
        forced: Counter[str] = Counter()
        for kind, target in quota.items():
            if not eligible(kind, combo):
                continue
            hosts_left = sum(1 for c in chosen[r:] if eligible(kind, c))
            needed = target - made[kind]
            if needed > 0:
                forced[kind] = math.ceil(needed / hosts_left)
        run_seed = f"{seed}:{r}"
        generated = Generator(random.Random(run_seed), combo, steps).steps(forced)
        made.update(s.kind for s in generated)
        plans.append((combo, generated, run_seed))
    return plans
