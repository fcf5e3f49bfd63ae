"""`hakiri apply` on an 80-column terminal (a real pseudo-terminal, as a person sees it): the
summary table keeps every word whole."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.support.project import postgres_project

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _on_a_terminal(command: list[str], columns: int, seconds: float = 300) -> tuple[int, str]:
    """Run `command` with a pseudo-terminal of `columns` x 24 as its stdout and stderr."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "HAKIRI_CRASH_AT")}
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process has ended
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    os.close(leader)
    code = process.wait(timeout=30)
    return code, ANSI.sub("", b"".join(chunks).decode(errors="replace"))


def test_the_apply_summary_on_an_80_column_terminal_has_no_cut_word(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    postgres_project(
        tmp_path,
        pg_url,
        pg_schema,
        source='{ path = "data/*.csv", format = "csv" }',
        body='[pipeline.load]\nmode = "upsert"\nupsert_key = ["id"]',
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text(
        "id,name\n" + "".join(f"{i},n{i}\n" for i in range(50_000))
    )
    code, shown = _on_a_terminal(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(tmp_path)], 80
    )
    assert code == 0, shown
    header = next(line for line in shown.splitlines() if line.split()[:1] == ["pipeline"])
    assert header.split()[:3] == ["pipeline", "mode", "status"], shown
    assert "…" not in shown, shown
    assert "50,000" in shown
