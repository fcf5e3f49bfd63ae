"""A randomized fault-injection campaign for hakiri's exactly-once promise (run by hand).

For each run, one small project with one pipeline (a destination x load mode x source,
rotated over the 2 x 7 x 2 combinations) goes through a seeded sequence of steps: the
source changes (new files, edits of pending, failed or loaded files, deletes, malformed
records; for a PostgreSQL table, inserts, updates and deletes of rows) and applies, some
of them under a fault: the destination refuses connections, the apply is SIGKILLed at a
random instant, every PostgreSQL connection is cut mid-load, or the disk under the
context store is full. After every step the model (tests/support/load_model.py) says what
the target may hold; the first difference stops the campaign with a reproduction (seed,
steps, a replay file) and a shrunk step list.

    PYTHONPATH=src:. .venv/bin/python bench/fault_campaign.py --runs 200 --seed 1
    ... --only postgres/append/files        (fnmatch patterns: 'context/*/table')
    ... --replay /tmp/hakiri-campaign-…/repro-run17.json      (replays, then shrinks)
    ... --keep-going                        (each run stops at its first difference)

Needs root (tmpfs mounts for the disk-full fault) and the PostgreSQL server binaries
(tests/support/postgres.py). The campaign's parts live in bench/faults/ (see its
__init__.py): the steps and their seeded lists, the shared environment, one run's
project and its faults, a run checked against the model and shrunk, and the reports.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for entry in (str(REPO), str(REPO / "src")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from faults.environment import Environment  # noqa: E402
from faults.reports import report_difference, summary, write_repro  # noqa: E402
from faults.runs import Difference, Stats, execute, shrink  # noqa: E402
from faults.steps import Step, plan_runs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=15, help="steps per run (at least 15)")
    parser.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="DEST/MODE/SOURCE",
        help="run only these combinations (fnmatch patterns; repeatable)",
    )
    parser.add_argument("--replay", type=Path, help="replay a repro file's steps (and shrink them)")
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="after a difference, go on with the next run (no shrinking)",
    )
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--shrink-budget", type=float, default=900.0, help="seconds")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--no-calibrate", action="store_true", help="skip the clean subprocess applies"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every step")
    args = parser.parse_args(argv)
    if args.steps < 15 and args.replay is None:
        parser.error("--steps must be at least 15")
    if os.geteuid() != 0:
        parser.error("run as root: the disk-full fault mounts a tmpfs")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    # SIGTERM (timeout, kill PID) unwinds like Ctrl-C: tmpfs unmounted, PostgreSQL stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = args.workdir or Path(tempfile.mkdtemp(prefix="hakiri-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"campaign: seed {seed}, work dir {work}", file=sys.stderr, flush=True)
    began = time.monotonic()
    env = Environment(work)
    stats = Stats()
    try:
        if args.replay is not None:
            return replay(env, args)
        plans = plan_runs(seed, args.runs, args.steps, args.only)
        if not args.no_calibrate:
            env.calibrate(
                {c[0] for c, run_steps, _seed in plans if any(s.kind == "kill" for s in run_steps)},
                stats,
            )
        for r, (combo, steps, run_seed) in enumerate(plans):
            label = f"{r:03d}"
            stats.runs += 1
            stats.combos["/".join(combo)] += 1
            result = execute(env, combo, steps, label, stats, verbose=args.verbose)
            stats.run_seconds.append(result.seconds)
            status = (
                "ok"
                if result.difference is None
                else f"DIFFERENCE at step {result.difference.step + 1}"
            )
            print(
                f"run {label} {'/'.join(combo):42s} {result.seconds:6.1f}s {status}",
                file=sys.stderr,
                flush=True,
            )
            if result.difference is None:
                continue
            found = result.difference
            repro = work / f"repro-run{label}.json"
            write_repro(repro, combo, steps, run_seed, found)
            if not args.verbose:
                print("\n".join("  " + line for line in result.log), file=sys.stderr)
            _tally(stats, found, label, combo)
            report_difference(
                found, combo, steps, f"{seed} (run {r}: {run_seed})", repro, f"run {label}"
            )
            if args.keep_going:
                continue
            if not args.no_shrink:
                print(f"shrinking (budget {args.shrink_budget:.0f}s)…", file=sys.stderr, flush=True)
                small, small_found = shrink(
                    env, combo, steps, found, args.shrink_budget, args.verbose
                )
                shrunk = work / f"repro-run{label}-shrunk.json"
                write_repro(shrunk, combo, small, run_seed, small_found)
                report_difference(
                    small_found,
                    combo,
                    small,
                    f"{seed} (run {r}: {run_seed})",
                    shrunk,
                    f"run {label}, shrunk to {len(small)} step(s)",
                )
            break
        summary(stats, time.monotonic() - began, args.runs)
        return 1 if stats.differences else 0
    finally:
        env.close()


def _tally(stats: Stats, found: Difference, label: str, combo: tuple[str, str, str]) -> None:
    stats.differences.append(
        {
            "run": label,
            "combo": "/".join(combo),
            "step": found.step,
            "kind": found.kind,
            "message": found.message,
        }
    )
    diff = found.details.get("diff") or {}
    if "keys" in diff:
        stats.lost += diff.get("lost", 0)
        stats.doubled += diff.get("doubled", 0)
    else:
        stats.lost += len(diff.get("lost", []))
        stats.doubled += len(diff.get("doubled", []))


def replay(env: Environment, args: argparse.Namespace) -> int:
    data = json.loads(args.replay.read_text())
    combo = tuple(data["combo"])
    steps = [Step.from_json(s) for s in data["steps"]]
    result = execute(env, combo, steps, "replay", None, verbose=True)  # type: ignore[arg-type]
    if result.difference is None:
        print("replay: no difference", file=sys.stdout)
        return 0
    found = result.difference
    report_difference(found, combo, steps, data.get("seed"), args.replay, "replay")  # type: ignore[arg-type]
    if not args.no_shrink:
        small, small_found = shrink(env, combo, steps, found, args.shrink_budget, True)  # type: ignore[arg-type]
        shrunk = args.replay.with_name(args.replay.stem + "-shrunk.json")
        write_repro(shrunk, combo, small, data.get("seed"), small_found)  # type: ignore[arg-type]
        report_difference(
            small_found, combo, small, data.get("seed"), shrunk, f"shrunk to {len(small)} step(s)"
        )  # type: ignore[arg-type]
    return 1


if __name__ == "__main__":
    sys.exit(main())
