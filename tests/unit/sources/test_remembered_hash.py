"""A plan and the apply that follows it in one process hash each file once, and only while
the file is what was hashed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hakiri.sources.files import inspect as files
from hakiri.sources.files.inspect import FileStamp, hash_file, inspect_files, remembered_hash
from hakiri.spec.pipeline import FilesConfig, TableSpec


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    # A file written by the test is "racily clean" for 2 s (its stat could not tell a change
    # within the clock's tick): the window is closed so the test need not wait it out.
    monkeypatch.setattr(files, "_RACY_NS", 0)


def _planned(root: Path) -> Path:
    """A file a plan of this process has hashed (`inspect_files`, as `plan` calls it)."""
    path = root / "data" / "a.csv"
    path.parent.mkdir()
    path.write_text("id\n1\n")
    inspect_files(root, FilesConfig(path="data/*.csv", columns={"id": "int"}), TableSpec(name="t"))
    return path


def test_the_plans_hash_is_reused_while_the_file_is_unchanged(
    tmp_path: Path, no_racy_window: None
) -> None:
    path = _planned(tmp_path)

    stamp = FileStamp.of(path)
    assert stamp is not None
    assert remembered_hash(path, stamp) == hash_file(path)


def test_a_file_rewritten_after_the_plan_is_hashed_again(
    tmp_path: Path, no_racy_window: None
) -> None:
    path = _planned(tmp_path)
    before = os.stat(path)
    path.write_text("id\n2\n")  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same mtime

    stamp = FileStamp.of(path)
    assert stamp is not None
    assert remembered_hash(path, stamp) is None


def test_a_file_modified_just_before_the_plan_is_not_trusted_by_its_stamp(tmp_path: Path) -> None:
    path = _planned(tmp_path)

    stamp = FileStamp.of(path)
    assert stamp is not None
    assert remembered_hash(path, stamp) is None  # within the racy window: hashed again
