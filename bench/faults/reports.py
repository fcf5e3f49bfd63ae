"""What the campaign prints and writes: a difference's report, its repro file (the JSON
that `--replay` reads), and the summary of a campaign."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from .harness import REPO
from .runs import Difference, Stats
from .steps import APPLY_STEPS, COMBOS, FILE_STEPS, QUOTA_PER_200, TABLE_STEPS, Step

# The entry point: a replay line names it, not this module.
CAMPAIGN_SCRIPT = REPO / "bench" / "fault_campaign.py"


def report_difference(
    found: Difference,
    combo: tuple[str, str, str],
    steps: list[Step],
    seed: Any,
    repro: Path,
    title: str,
) -> None:
    out = sys.stdout
    print(f"\n=== {title}: {'/'.join(combo)} (seed {seed})", file=out)
    print(f"difference ({found.kind}): {found.message}", file=out)
    for key in ("stderr", "model_reasons", "validity", "exception", "threads"):
        if found.details.get(key):
            print(f"  {key}: {_short(found.details[key], 2500)}", file=out)
    diff = found.details.get("diff")
    if diff:
        if "keys" in diff:
            for key, both in list(diff["keys"].items())[:10]:
                print(f"  id {key}: model {both['model']}  target {both['target']}", file=out)
        else:
            unexpected = list(
                (Counter(diff.get("extra", [])) - Counter(diff.get("doubled", []))).elements()
            )
            for label, rows in (
                ("lost", diff.get("lost")),
                ("doubled", diff.get("doubled")),
                ("unexpected", unexpected),
            ):
                if rows:
                    print(f"  {label}: {rows[:12]}", file=out)
        print(f"  model target : {_short(found.details.get('model_target'))}", file=out)
        print(f"  actual target: {_short(found.details.get('target'))}", file=out)
    print("steps:", file=out)
    for i, step in enumerate(steps):
        marker = "  <-- differs here" if i == found.step else ""
        print(f"  {i + 1:2d}. {step.describe()}{marker}", file=out)
    print(
        f"replay: {sys.executable} {CAMPAIGN_SCRIPT.relative_to(REPO)} --replay {repro}", file=out
    )
    if found.details.get("project"):
        print(f"project kept at {found.details['project']}", file=out)
    out.flush()


def _short(value: Any, limit: int = 900) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def write_repro(
    path: Path, combo: tuple[str, str, str], steps: list[Step], seed: Any, found: Difference | None
) -> None:
    path.write_text(
        json.dumps(
            {
                "combo": list(combo),
                "seed": seed,
                "difference": None
                if found is None
                else {"kind": found.kind, "step": found.step, "message": found.message},
                "steps": [s.to_json() for s in steps],
            },
            indent=1,
        )
    )


def summary(stats: Stats, wall: float, runs: int) -> None:
    out = sys.stdout
    print("\n=== summary", file=out)
    print(
        f"runs {stats.runs}, steps {stats.steps}, applies {stats.applies} "
        f"({stats.subprocess_applies} in a subprocess), wall time {wall:.0f}s",
        file=out,
    )
    if stats.run_seconds:
        mean = sum(stats.run_seconds) / len(stats.run_seconds)
        print(
            f"per run: mean {mean:.1f}s, max {max(stats.run_seconds):.1f}s; projected for 200 runs: "
            f"{200 * mean / 60:.0f} min",
            file=out,
        )
    kinds = ", ".join(
        f"{k} {stats.kinds[k]}" for k in [*FILE_STEPS, *TABLE_STEPS, *APPLY_STEPS] if stats.kinds[k]
    )
    print(f"steps by kind: {kinds}", file=out)
    print(
        f"SIGKILLs at random instants: {stats.kinds['kill']} "
        f"(landed during a batch {stats.landings['during_batch']}, outside a batch "
        f"{stats.landings['outside_batch']}, after the apply ended {stats.landings['after_exit']})",
        file=out,
    )
    print(
        f"dropped connections: {stats.kinds['cut']} cut steps, {stats.cuts_hit} hit an open connection "
        f"({stats.connections_cut} connections reset)",
        file=out,
    )
    print(
        f"full disks: {stats.kinds['disk_full']}; refused connections: {stats.kinds['refuse']}; "
        f"malformed records: {stats.kinds['malformed']}; edits: {stats.kinds['edit_pending'] + stats.kinds['edit_loaded']} "
        f"(pending/failed {stats.kinds['edit_pending']}, loaded {stats.kinds['edit_loaded']}); "
        f"deletes: {stats.kinds['delete_file']} files, {stats.kinds['delete_rows']} row steps",
        file=out,
    )
    if stats.skipped_faults:
        print(
            f"faults that could not be injected (the apply ran plainly): {dict(stats.skipped_faults)}",
            file=out,
        )
    print(
        f"failed applies (exit 1): {stats.failed_applies}; exits by step kind: {dict(sorted(stats.exit_codes.items()))}",
        file=out,
    )
    timing = {k: f"{sum(v) / len(v):.1f}s" for k, v in sorted(stats.apply_seconds.items()) if v}
    print(f"mean apply time by step kind: {timing}", file=out)
    print(
        f"combinations run: {len(stats.combos)} of {len(COMBOS)}; "
        f"most model states kept at once: {stats.max_states}",
        file=out,
    )
    print(
        f"differences found: {len(stats.differences)}; rows lost {stats.lost}, rows doubled {stats.doubled}",
        file=out,
    )
    for d in stats.differences:
        print(
            f"  run {d['run']} {d['combo']} step {d['step'] + 1}: {d['kind']}: {d['message']}",
            file=out,
        )
    quota = {k: math.ceil(v * runs / 200) for k, v in QUOTA_PER_200.items()}
    short = {k: f"{stats.kinds[k]} < {n}" for k, n in quota.items() if stats.kinds[k] < n}
    if short and stats.runs == runs:
        print(f"below the acceptance bar's counts: {short}", file=out)
    out.flush()
