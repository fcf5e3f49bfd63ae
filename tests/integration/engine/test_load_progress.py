"""A long single-file load under cron or CI (stderr not a terminal) says how far it has got:
a line every HAKIRI_PROGRESS_SECONDS with rows growing, read from PostgreSQL while the
engine's COPY tasks write the staging table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.support.project import postgres_project

ROWS = 1_000_000


def _write_csv(path: Path) -> None:
    path.parent.mkdir(parents=True)
    with open(path, "w") as out:
        out.write("id,name,amount,day\n")
        out.writelines(
            f"{i},name {i},{i * 0.37:.2f},2024-01-{i % 28 + 1:02d}\n" for i in range(ROWS)
        )


def test_a_1m_row_file_under_a_pipe_prints_growing_progress_lines(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = postgres_project(
        tmp_path,
        pg_url,
        pg_schema,
        source='{ path = "data/*.csv", format = "csv" }',
        body='[pipeline.load]\nmode = "append"',
    )
    _write_csv(tmp_path / "data" / "big.csv")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "HAKIRI_PROGRESS_SECONDS": "0.2"},  # Sail copies 1M rows in ~3 s
        timeout=600,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert project.query(f'SELECT count(*) FROM "{pg_schema}".t') == [(ROWS,)]

    counts = [
        int(found.replace(",", ""))
        for found in re.findall(r"^p: ([\d,]+) rows, ", done.stderr, re.M)
    ]
    assert len(counts) >= 3, (seconds, done.stderr)
    assert counts == sorted(counts) and counts[0] < counts[-1] <= ROWS, done.stderr
    assert "\x1b[" not in done.stderr  # no colour, no cursor moves: a log reads it
    # the share of the input: the CSV's size, as `ls` shows it
    size = f"{(tmp_path / 'data' / 'big.csv').stat().st_size / 1e6:.0f} MB"
    assert re.search(rf"^p: [1-9][\d,]* rows, [\d.]+ [kMG]?B, \d+% of {size}$", done.stderr, re.M)
