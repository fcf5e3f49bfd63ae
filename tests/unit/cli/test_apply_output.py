"""What `hakiri apply` prints for people: the summary table fits 80 columns without a cut
word, and a batch in flight reads as one plain line."""

from __future__ import annotations

import io
import re

from rich.console import Console

from hakiri.cli.apply import summary_table
from hakiri.cli.load_progress import LoadDisplay, progress_line, size_text
from hakiri.engine.controls import Outcome
from hakiri.engine.progress import BatchProgress


def _rendered(outcomes: list[Outcome], width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(summary_table(outcomes, console.width))
    return console.export_text()


def test_the_summary_of_a_load_fits_80_columns_with_every_header_whole() -> None:
    text = _rendered([Outcome("orders", "success", "append", rows=1_000_000, batches=1)])
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert text.split()[:4] == ["pipeline", "mode", "status", "rows"]
    assert "1,000,000" in text


def test_a_busy_summary_drops_zero_counts_then_mode_and_wraps_long_ids() -> None:
    outcomes = [
        Outcome(
            "orders_daily_from_the_warehouse_export",
            "success",
            "upsert",
            rows=1_234_567,
            deleted=12,
            quarantined=5,
            batches=3,
            seconds=57.1,
        ),
        Outcome("p", "failed", "append", seconds=0.4),
    ]
    text = _rendered(outcomes)
    assert "…" not in text
    counts = ["rows", "deleted", "quarantined", "batches"]
    # recovered is 0 everywhere: it goes first, and then the table fits
    assert text.splitlines()[0].split() == ["pipeline", "mode", "status", *counts, "duration"]
    assert "1,234,567" in text and "57.1s" in text
    # with every count saying something, mode goes first, then recovered (the next count)
    outcomes[1].recovered = 1
    text = _rendered(outcomes)
    assert "…" not in text
    assert text.splitlines()[0].split() == ["pipeline", "status", *counts, "duration"]
    # the id wraps instead of being cut: all of its characters are there, in order
    assert "".join(re.findall(r"^ (\S+)", text, re.M)).startswith(
        "pipelineorders_daily_from_the_warehouse_export"
    )


def test_the_whole_summary_shows_when_it_fits() -> None:
    text = _rendered([Outcome("p", "success", "append", rows=3, batches=1)], width=160)
    assert text.split()[:9] == [
        "pipeline",
        "mode",
        "status",
        "rows",
        "deleted",
        "quarantined",
        "batches",
        "recovered",
        "duration",
    ]


def test_a_batch_in_flight_reads_as_rows_bytes_and_share_of_the_input() -> None:
    flight = BatchProgress(
        "orders",
        "t",
        "data/orders.csv",
        12.0,
        rows=120_000,
        bytes=18_000_000,
        expected_rows=292_683,
        input_bytes=44_000_000,
    )
    assert progress_line(flight) == "orders: 120,000 rows, 18 MB, 41% of 44 MB"
    waiting = BatchProgress("orders", "t", "data/orders.csv", 12.4, input_bytes=44_000_000)
    assert progress_line(waiting) == "orders: loading data/orders.csv (44 MB), 12s so far"
    # While the batch waits for its engine, the line names the engine, not the file.
    starting = BatchProgress(
        "orders", "t", "data/orders.csv", 40.2, starting_engine="the Spark engine (local server)"
    )
    assert progress_line(starting) == "orders: starting the Spark engine (local server), 40s so far"
    unknown = BatchProgress("orders", "t", "orders (id > 5)", 3.0, rows=10, bytes=8192)
    assert progress_line(unknown) == "orders: 10 rows, 8.2 kB staged"
    # an estimate is never 100% (or more) while the batch is still loading
    over = BatchProgress("o", "t", "f", 1.0, rows=500, bytes=0, expected_rows=400, input_bytes=9)
    assert progress_line(over) == "o: 500 rows, 9 B, 99% of 9 B"
    assert [size_text(n) for n in (0, 999, 1_500, 44_000_000, 1_400_000_000)] == [
        "0 B",
        "999 B",
        "1.5 kB",
        "44 MB",
        "1.4 GB",
    ]


def test_off_a_terminal_each_report_is_one_plain_line() -> None:
    console = Console(width=40, record=True, color_system=None, file=io.StringIO())
    display = LoadDisplay(console, bar=False, every=1.0)
    long = BatchProgress("a_pipeline_with_a_long_name", "t", "f", 1.0, rows=1_234_567, bytes=5)
    display.in_flight(long)
    assert console.export_text() == "a_pipeline_with_a_long_name: 1,234,567 rows, 5 B staged\n"
