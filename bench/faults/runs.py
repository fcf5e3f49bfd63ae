"""A step list run against the model: after every step the model
(tests/support/load_model.py) says what the target may hold, and the first difference
stops the run. A run that differs is shrunk to fewer steps that still differ alike."""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.support.load_model import LoadModel, State, describe_difference

from .environment import Environment
from .harness import HANG_SECONDS, ApplyOutcome, Harness
from .steps import APPLY_STEPS, Step

TRACE_PATTERNS = (
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r"^\s+at [\w$.<>]+\(.*\)\s*$", re.M),  # a Java stack frame
    re.compile(r"^Caused by: ", re.M),
    re.compile(r"Exception in thread ", re.M),
)


# ============================================================================ results


class Difference(Exception):
    def __init__(self, kind: str, step: int, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.kind, self.step, self.message, self.details = kind, step, message, details


@dataclass
class Stats:
    runs: int = 0
    steps: int = 0
    applies: int = 0
    subprocess_applies: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    landings: Counter[str] = field(default_factory=Counter)
    cuts_hit: int = 0
    connections_cut: int = 0
    failed_applies: int = 0
    exit_codes: Counter[str] = field(default_factory=Counter)
    skipped_faults: Counter[str] = field(default_factory=Counter)
    combos: Counter[str] = field(default_factory=Counter)
    differences: list[dict[str, Any]] = field(default_factory=list)
    lost: int = 0
    doubled: int = 0
    run_seconds: list[float] = field(default_factory=list)
    max_states: int = 0  # the most states the model had to keep at once (crash ambiguity)
    apply_seconds: dict[str, list[float]] = field(default_factory=dict)


# ============================================================================ checking


def stderr_problems(outcome: ApplyOutcome) -> list[str]:
    """A finished apply's stderr: no traceback, and a failure says `error: …` then `hint: …`."""
    problems = []
    if outcome.exception:
        problems.append(
            f"an exception escaped the CLI: {outcome.exception.strip().splitlines()[-1]}"
        )
    text = outcome.stderr
    for pattern in TRACE_PATTERNS:
        if pattern.search(text):
            problems.append(f"stderr holds a traceback ({pattern.pattern!r})")
    if "internal error:" in text:
        problems.append("stderr reports an internal error (not a HakiriError)")
    if outcome.rc == 1:
        lines = text.splitlines()
        at = next((i for i, line in enumerate(lines) if line.startswith("error:")), None)
        if at is None:
            problems.append("exit 1 without an `error:` line")
        elif at + 1 >= len(lines) or not lines[at + 1].strip().startswith("hint:"):
            problems.append("the `error:` line is not followed by a `hint:` line (one line each)")
    return problems


def error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    found = [line for line in lines if line.startswith("error:")]
    return found[-1] if found else (lines[-1] if lines else "")


def closest(mode: str, states: set[State], actual: Any) -> tuple[Any, dict[str, Any]]:
    """The model target nearest to `actual`, and how `actual` differs from it."""
    best: tuple[int, Any, dict[str, Any]] | None = None
    for target in {s.target(mode) for s in states}:
        diff = describe_difference(mode, target, actual)
        size = _size(diff)
        if best is None or size < best[0]:
            best = (size, target, diff)
    assert best is not None
    return best[1], best[2]


def _size(diff: dict[str, Any]) -> int:
    if "keys" in diff:
        return len(diff["keys"])
    return len(diff["lost"]) + len(diff["extra"])


# ============================================================================ one run


@dataclass
class RunResult:
    difference: Difference | None
    seconds: float
    log: list[str]


def execute(
    env: Environment,
    combo: tuple[str, str, str],
    steps: list[Step],
    label: str,
    stats: Stats | None,
    *,
    verbose: bool = False,
    keep: bool = False,
) -> RunResult:
    """Run `steps` on a fresh project; stop at the first difference from the model."""
    dest, mode, source = combo
    model = LoadModel(mode, source)
    harness = Harness(env, combo, label)
    log: list[str] = []
    started = time.monotonic()
    difference: Difference | None = None

    def note(text: str) -> None:
        log.append(text)
        if verbose:
            print(f"  [{label}] {text}", file=sys.stderr, flush=True)

    harness.setup()
    try:
        for index, step in enumerate(steps):
            if stats is not None:
                stats.steps += 1
                stats.kinds[step.kind] += 1
            if step.kind not in APPLY_STEPS:
                harness.mutate(step)
                note(f"{index + 1:2d}. {step.describe()}")
                actual, problems = harness.target()
                narrowed = model.narrow(model.states, actual)
                if not narrowed or problems:
                    raise _target_difference(
                        model, index, step, actual, problems, model.states, "after a source change"
                    )
                model.settle(narrowed)
                continue
            view = harness.view()
            allowed = model.expect(view, None if step.kind == "apply" else "crash")
            outcome = harness.apply(step)
            _count(stats, step, outcome, dest)
            if outcome.rc is not None and step.kind != "kill":
                env.learn(env.inproc_seconds, dest, outcome.seconds)
            note(
                f"{index + 1:2d}. {step.describe()} -> "
                + ("killed" if outcome.rc is None else f"exit {outcome.rc}")
                + (f" [{outcome.landed}]" if outcome.landed else "")
                + (f" [cut {outcome.cut}]" if step.kind == "cut" else "")
                + f" in {outcome.seconds:.1f}s"
                + (f": {error_line(outcome.stderr)}" if outcome.rc == 1 else "")
                + (f" ({outcome.note})" if outcome.note else "")
            )
            problems = stderr_problems(outcome) if outcome.rc is not None else []
            if outcome.seconds > HANG_SECONDS:
                hang = (harness.root / "hang.log").read_text(errors="replace")
                raise Difference(
                    "hang",
                    index,
                    f"step {index + 1} ({step.kind}): the apply took {outcome.seconds:.0f}s "
                    f"(exit {outcome.rc}): {error_line(outcome.stderr)}",
                    {"threads": hang[-4000:]},
                )
            candidates = (
                allowed[0] | allowed[1] if outcome.rc is None else allowed.get(outcome.rc, set())
            )
            actual, validity = harness.target()
            if not candidates:
                expected = sorted(code for code, states in allowed.items() if states)
                raise Difference(
                    "exit",
                    index,
                    f"step {index + 1} ({step.kind}): apply exited {outcome.rc}, the model expects exit "
                    f"{' or '.join(map(str, expected))}",
                    {
                        "stderr": error_line(outcome.stderr),
                        "model_reasons": sorted(
                            {r.failure for r in model.runs(view) if r.failure}
                            or {"(none: every batch loads)"}
                        ),
                        **_diff_details(model, allowed[0] | allowed[1], actual),
                    },
                )
            narrowed = model.narrow(candidates, actual)
            if not narrowed or validity:
                raise _target_difference(
                    model, index, step, actual, validity, candidates, f"after {step.kind}"
                )
            model.settle(narrowed)
            if stats is not None:
                stats.max_states = max(stats.max_states, len(narrowed))
            if problems:
                raise Difference(
                    "stderr",
                    index,
                    f"step {index + 1} ({step.kind}): " + "; ".join(problems),
                    {"stderr": outcome.stderr[-3000:], "exception": outcome.exception},
                )
    except Difference as found:
        difference = found
    finally:
        harness.teardown(keep=keep or difference is not None)
    if difference is not None:
        difference.details["project"] = str(harness.root)
    return RunResult(difference, time.monotonic() - started, log)


def _diff_details(model: LoadModel, states: set[State], actual: Any) -> dict[str, Any]:
    if not states:
        return {}
    expected, diff = closest(model.mode, states, actual)
    return {"model_target": expected, "target": actual, "diff": diff}


def _target_difference(
    model: LoadModel,
    index: int,
    step: Step,
    actual: Any,
    validity: list[str],
    states: set[State],
    when: str,
) -> Difference:
    details = _diff_details(model, states, actual)
    if validity:
        details["validity"] = validity
    diff = details.get("diff", {})
    if "keys" in diff:
        summary = f"{len(diff['keys'])} key(s) differ"
    else:
        summary = f"lost {len(diff.get('lost', []))}, doubled {len(diff.get('doubled', []))}, unexpected {len(diff.get('extra', [])) - len(diff.get('doubled', []))}"
    if validity and not diff.get("lost") and not diff.get("extra") and not diff.get("keys"):
        summary = "; ".join(validity[:3])
    return Difference(
        "target",
        index,
        f"step {index + 1} ({step.kind}) {when}: the target is none of the {len({s.target(model.mode) for s in states})} "
        f"the model allows ({summary})",
        details,
    )


def _count(stats: Stats | None, step: Step, outcome: ApplyOutcome, dest: str) -> None:
    if stats is None:
        return
    stats.applies += 1
    stats.apply_seconds.setdefault(step.kind, []).append(outcome.seconds)
    if step.kind == "kill":
        stats.subprocess_applies += 1
        stats.landings[outcome.landed or "?"] += 1
    if step.kind == "cut" and outcome.cut:
        stats.cuts_hit += 1
        stats.connections_cut += outcome.cut
    if outcome.skipped_fault:
        stats.skipped_faults[step.kind] += 1
    stats.exit_codes[f"{step.kind}:{'killed' if outcome.rc is None else outcome.rc}"] += 1
    if outcome.rc == 1:
        stats.failed_applies += 1


# ============================================================================ shrinking


def shrink(
    env: Environment,
    combo: tuple[str, str, str],
    steps: list[Step],
    found: Difference,
    budget: float,
    verbose: bool,
) -> tuple[list[Step], Difference]:
    """Drop steps while a difference of the same signature persists (greedy, last first)."""
    best, best_found = steps[: found.step + 1], found
    deadline = time.monotonic() + budget
    attempt = 0
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for i in reversed(range(len(best) - 1)):
            if time.monotonic() >= deadline:
                break
            trial = best[:i] + best[i + 1 :]
            attempt += 1
            result = execute(env, combo, trial, f"shrink-{attempt}", None, verbose=False)
            if result.difference is not None and _signature(result.difference) == _signature(found):
                if best_found is not found:  # keep only the smallest reproduction's project
                    shutil.rmtree(best_found.details.get("project", ""), ignore_errors=True)
                best, best_found = trial[: result.difference.step + 1], result.difference
                if verbose:
                    print(
                        f"  shrink: {len(best)} step(s) still differ", file=sys.stderr, flush=True
                    )
                changed = True
                break
            shutil.rmtree(env.work / f"run-shrink-{attempt}", ignore_errors=True)
    return best, best_found


def _signature(found: Difference) -> tuple[str, ...]:
    """What a shrunk reproduction must keep: the kind of difference, and for a target which
    of lost / doubled / unexpected rows (or differing scd2 keys) it shows."""
    diff = found.details.get("diff") or {}
    if found.kind != "target":
        return (found.kind,)
    if "keys" in diff:
        return ("target", "keys")
    doubled = Counter(diff.get("doubled", []))
    unexpected = Counter(diff.get("extra", [])) - doubled
    shown = [
        name
        for name, rows in (
            ("lost", diff.get("lost")),
            ("doubled", doubled),
            ("unexpected", unexpected),
        )
        if rows
    ]
    return ("target", *shown)
