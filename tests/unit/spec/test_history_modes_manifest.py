"""The keys of scd2, delete detection and replace_window are checked at `hakiri validate`:
each mistake is one error at its file:line, with a hint."""

from __future__ import annotations

import pytest

MANIFEST = """
[project]
name = "modes"

[[pipeline]]
id = "p"
source = {{ connector = "{connector}", config = {{ {config} }} }}
tables = ["t"]
{incremental}
[pipeline.load]
{load}
"""
FILES = ("files", 'path = "data/*.csv"', "")
TABLE = ("postgres", 'url = "postgresql://u@h/db"', 'incremental = "updated_at"')


def _errors(project, cli, source: tuple[str, str, str], load: str) -> list[str]:
    connector, config, incremental = source
    project.write(
        "hakiri.toml",
        MANIFEST.format(connector=connector, config=config, incremental=incremental, load=load),
    )
    result = cli("validate")
    return [line for line in result.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("source", "load", "error", "hint"),
    [
        (
            FILES,
            'mode = "scd2"',
            "error: load mode 'scd2' requires `key`: scd2 needs the key columns that identify "
            "a record across versions (hakiri.toml:10 at pipeline[0].load.mode)",
            "hint: add `key = ...` to this load section",
        ),
        (
            FILES,
            'mode = "upsert"\nupsert_key = ["id"]\ndeletes = "close"',
            "error: deletes = 'close' is not a choice of load mode upsert "
            "(hakiri.toml:12 at pipeline[0].load.deletes)",
            "hint: use one of 'hard', 'soft'",
        ),
        (
            FILES,
            'mode = "append"\ntrack = ["name"]',
            "error: `track` applies to load mode scd2, and the mode is 'append' "
            "(hakiri.toml:11 at pipeline[0].load.track)",
            'hint: remove `track`, or set mode = "scd2"',
        ),
        (
            FILES,
            'mode = "scd2"\nkey = ["id"]\ntrack = ["id"]',
            "error: `track` names the key column 'id': a key never changes within a record "
            "(hakiri.toml:12 at pipeline[0].load.track)",
            "hint: track the non-key columns only",
        ),
        (
            FILES,
            'mode = "scd2"\nkey = ["valid_from"]',
            "error: `key` names 'valid_from', which is a validity column of the history "
            "(hakiri.toml:11 at pipeline[0].load.key)",
            None,
        ),
        (
            TABLE,
            'mode = "scd2"\nkey = ["id"]',
            "error: load mode scd2 finds deleted keys by comparing a full snapshot with the "
            "target, and this source reads increments past a cursor (updated_at): every key "
            "it did not re-read would be deleted (hakiri.toml:10 at pipeline[0].load.mode)",
            'hint: set deletes = "ignore": an incremental batch is not a full snapshot',
        ),
        (
            TABLE,
            'mode = "upsert"\nupsert_key = ["id"]\ndeletes = "hard"',
            None,
            "hint: remove `deletes`, or read the table whole (no `incremental`) to compare it",
        ),
        (
            FILES,
            'mode = "replace_window"\nwindow_column = "day"\nwindow = "range"',
            "error: window = 'range' replaces the cursor range of each batch: a files source "
            "has no cursor range (hakiri.toml:12 at pipeline[0].load.window)",
            None,
        ),
        (
            FILES,
            'mode = "upsert"\nupsert_key = ["id"]\ndeletes = "hard"\n'
            'delete_scope = "region = (SELECT 1)"',
            None,
            None,
        ),
        (
            FILES,
            'mode = "upsert"\nupsert_key = ["id"]\ndeletes = "hard"\nmax_delete_fraction = 1.5',
            None,
            None,
        ),
    ],
)
def test_a_mistake_in_the_mode_keys_is_one_error_at_its_line(
    project, cli, source, load: str, error: str | None, hint: str | None
) -> None:
    lines = _errors(project, cli, source, load)
    errors = [line for line in lines if line.startswith("error:") and "problem in" not in line]
    assert len(errors) == 1, lines
    if error is not None:
        assert errors[0] == error
    if hint is not None:
        assert hint in [line.strip() for line in lines]


@pytest.mark.parametrize(
    "load",
    [
        'mode = "scd2"\nkey = ["id"]\nchange_time_column = "updated_at"\ndeletes = "close"',
        'mode = "scd2"\nkey = "row_hash"',
        'mode = "upsert"\nupsert_key = ["id"]\ndeletes = "soft"\ndelete_scope = "region = \'EU\'"',
        'mode = "replace_window"\nwindow_column = "day"',
    ],
)
def test_the_documented_forms_validate(project, cli, load: str) -> None:
    assert not [line for line in _errors(project, cli, FILES, load) if line.startswith("error:")]


def test_range_windows_on_the_cursor_validate(project, cli) -> None:
    load = 'mode = "replace_window"\nwindow_column = "updated_at"\nwindow = "range"'
    assert not [line for line in _errors(project, cli, TABLE, load) if line.startswith("error:")]
