"""`hakiri apply --follow ID`: the follower's command line (`services.follow`).

stdout gets one line per round that applied something (with --json, one JSON object per
line, `apply --json`'s entry for the round); stderr says when it follows, each failed round
(one line and its hint), and how it stopped. SIGTERM and SIGINT stop it cleanly: exit 0; a
second one ends the process at once (exit 130), which the commit protocol makes as safe as
a kill: the next start recovers.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from hakiri.cli.render import err, escape, mark_json_emitted, out
from hakiri.errors import HakiriError

__all__ = ["follow_pipeline", "round_line"]


def follow_pipeline(project: Path, ids: list[str], interval: float, as_json: bool) -> None:
    from hakiri.services.follow import follow

    if len(ids) != 1 or "." in ids[0] or "/" in ids[0]:
        raise HakiriError(
            "apply --follow follows one pipeline",
            "name it: `hakiri apply --follow ID` (a cdc_mirror pipeline)",
        )
    [pipeline_id] = ids
    stop = threading.Event()
    signals: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():  # asked twice: now, as a kill would (the next start recovers)
            err.print(f"{signal.Signals(signum).name} again: stopping now")
            os._exit(130)
        signals.append(signal.Signals(signum).name)
        err.print(
            f"{signals[0]}: finishing the range in flight, then stopping "
            "(nothing is committed by halves; again to stop now)"
        )
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}

    def on_start(engine: str) -> None:
        err.print(
            f"following {escape(pipeline_id)} on {engine}: a range as soon as the last one is "
            f"in, every {interval:g}s when idle; SIGTERM or Ctrl-C stops"
        )

    def on_round(outcome: Any) -> None:
        if as_json:
            mark_json_emitted()
            typer.echo(json.dumps(asdict(outcome), default=str))
            return
        if outcome.status == "failed":
            err.print(f"[red]error:[/red] {escape(pipeline_id)}: {escape(outcome.error or '')}")
            if outcome.hint:
                err.print(f"  [dim]hint:[/dim] {escape(outcome.hint)}")
            return
        out.print(escape(round_line(outcome)))

    try:
        rounds = follow(
            project,
            pipeline_id,
            stop=stop,
            interval=interval,
            on_round=on_round,
            on_start=on_start,
        )
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    why = f" on {signals[0]}" if signals else ""
    err.print(
        f"stopped{why}: {rounds} round(s) applied; every committed range is recorded, "
        f"`hakiri apply --follow {escape(pipeline_id)}` continues from there"
    )


def round_line(outcome: Any) -> str:
    """`12:00:01Z mirror: 3 table(s), changes 0/1A2B..0/1A3C: 1,204 rows, 37 deleted, 0.8s`."""
    ranges = [
        batch.split(":")
        for step in outcome.steps
        for batch in step.get("batches") or []
        if isinstance(batch, str) and batch.startswith("cdc:")
    ]
    tables = {r[1] for r in ranges}
    span = ""
    if ranges:
        starts, ends = [r[2] for r in ranges], [r[3] for r in ranges]
        span = f", changes {min(starts, key=_lsn)}..{max(ends, key=_lsn)}"
    elif outcome.batches:
        span = f", {outcome.batches} batch(es)"
    recovered = f", {outcome.recovered} recovered" if outcome.recovered else ""
    now = datetime.now(UTC).strftime("%H:%M:%SZ")
    return (
        f"{now} {outcome.pipeline_id}: {len(tables) or outcome.batches} table(s){span}: "
        f"{outcome.rows:,} rows, {outcome.deleted:,} deleted{recovered}, {outcome.seconds:.1f}s"
    )


def _lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low or "0", 16)
