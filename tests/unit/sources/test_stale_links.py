"""`hakiri gc` removes the link directories of commands that were killed before removing
their own (links and UTF-8 copies an engine read), and nothing a live command still uses."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hakiri.sources.files.stand_ins import remove_stale_link_dirs

_NO_SUCH_PID = 4_194_304 + 1  # above Linux's largest pid_max: never a live process


def _links(root: Path, name: str, age_seconds: float) -> Path:
    found = root / ".hakiri" / "links" / name
    found.mkdir(parents=True)
    (found / "0.utf8.csv").write_text("id\n1\n")
    then = time.time() - age_seconds
    os.utime(found, (then, then))
    return found


def test_a_killed_commands_links_are_removed_once_old_enough(tmp_path: Path) -> None:
    killed = _links(tmp_path, f"{_NO_SUCH_PID}-abc", age_seconds=7200)
    recent = _links(tmp_path, f"{_NO_SUCH_PID}-def", age_seconds=10)
    running = _links(tmp_path, f"{os.getpid()}-ghi", age_seconds=7200)

    assert remove_stale_link_dirs(tmp_path, older_than_seconds=3600) == [killed]

    assert not killed.exists()
    assert recent.exists() and running.exists()


def test_a_project_without_links_has_nothing_to_remove(tmp_path: Path) -> None:
    assert remove_stale_link_dirs(tmp_path, older_than_seconds=0) == []
