"""replace_window: each batch replaces its window of the target, and only that window.

A table source backfilled in 6-hour chunks of its cursor, `updated_at`; each chunk
replaces the target's rows in its cursor range (window = "range"). A rewind re-reads
the chunks of the rewound span and replaces exactly their ranges: rows the vendor
deleted there are gone, changed ones changed, and every target row outside them is
the same row as before (same bytes, same physical tuple: it was not even rewritten).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.tables import make_source, table_project

pytestmark = pytest.mark.integration

LOAD = '{ mode = "replace_window", window_column = "updated_at", window = "range" }'
WINDOW = """
[pipeline.backfill]
window = "6h"
"""
# Chunks: [00:01, 06:01) [06:01, 12:01) [12:01, 16:40]; a rewind of 05:00..07:00 takes the first two.
OUTSIDE = "updated_at >= '2024-01-01 12:01+00'"


def _outside(project) -> list[tuple]:
    s = project.schema
    return project.query(
        f'SELECT ctid::text, xmin::text, d::text FROM "{s}".dst d WHERE {OUTSIDE} ORDER BY id'
    )


def test_a_chunked_backfill_and_a_rewind_replace_exactly_their_windows(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = table_project(tmp_path, pg_url, pg_schema, load=LOAD, body=WINDOW)
    make_source(project)
    first = project.cli("apply", "p", "--json")
    assert first.exit_code == 0, first.output
    [outcome] = json.loads(first.stdout)
    assert (outcome["rows"], outcome["batches"]) == (1_000, 3)
    s = pg_schema
    same = f'SELECT count(*) FROM (SELECT * FROM "{s}".src EXCEPT SELECT * FROM "{s}".dst) x'
    assert project.query(same) == [(0,)]
    before = _outside(project)
    assert len(before) == 280  # ids 721..1000

    # The vendor deletes and corrects rows of 05:00..06:59 without moving updated_at, and
    # changes rows of the last chunk, which nobody rewinds.
    project.query(f'DELETE FROM "{s}".src WHERE id BETWEEN 300 AND 349')
    project.query(f'UPDATE "{s}".src SET amount = amount + 1000 WHERE id BETWEEN 350 AND 419')
    project.query(f'UPDATE "{s}".src SET amount = -1 WHERE id > 900')
    rewound = project.cli(
        "backfill",
        "rewind",
        "p",
        "--from",
        "2024-01-01 05:00",
        "--to",
        "2024-01-01 07:00",
        "--reason",
        "vendor fix",
    )
    assert rewound.exit_code == 0, rewound.output
    again = project.cli("apply", "p", "--json")
    assert again.exit_code == 0, again.output
    [outcome] = json.loads(again.stdout)
    # two chunks, 720 rows read, 50 fewer in the source now; their old 720 rows replaced
    assert (outcome["batches"], outcome["rows"], outcome["deleted"]) == (2, 670, 720)

    inside = "updated_at < '2024-01-01 12:01+00'"
    differ = (
        f'SELECT count(*) FROM ((SELECT * FROM "{s}".src WHERE {inside} EXCEPT '
        f'SELECT * FROM "{s}".dst WHERE {inside}) UNION ALL (SELECT * FROM "{s}".dst '
        f'WHERE {inside} EXCEPT SELECT * FROM "{s}".src WHERE {inside})) x'
    )
    assert project.query(differ) == [(0,)]  # the rewound windows equal the source now
    assert project.query(f'SELECT count(*) FROM "{s}".dst WHERE id BETWEEN 300 AND 349') == [(0,)]
    assert _outside(project) == before  # untouched: not one byte, not one tuple moved


def _context_rows(project) -> list[tuple]:
    from deltalake import DeltaTable

    table = DeltaTable(str(project.root / ".hakiri" / "context" / "dst")).to_pyarrow_table()
    return sorted((r["id"], str(r["amount"])) for r in table.to_pylist())


def test_the_context_store_replaces_the_same_windows(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    """The same backfill and rewind into a Delta table: each chunk's MERGE deletes its cursor
    range and inserts its rows, so the table follows the source inside the rewound span and
    keeps the old rows outside it."""
    project = table_project(
        tmp_path,
        pg_url,
        pg_schema,
        load=LOAD,
        body=WINDOW,
        destination='{ connector = "context" }',
    )
    make_source(project)
    first = project.cli("apply", "p", "--json")
    assert first.exit_code == 0, first.output
    s = pg_schema
    assert len(_context_rows(project)) == 1_000

    project.query(f'DELETE FROM "{s}".src WHERE id BETWEEN 300 AND 349')
    project.query(f'UPDATE "{s}".src SET amount = amount + 1000 WHERE id BETWEEN 350 AND 419')
    project.query(f'UPDATE "{s}".src SET amount = -1 WHERE id > 900')
    rewound = project.cli(
        "backfill", "rewind", "p", "--from", "2024-01-01 05:00", "--to", "2024-01-01 07:00",
        "--reason", "vendor fix",
    )  # fmt: skip
    assert rewound.exit_code == 0, rewound.output
    again = project.cli("apply", "p", "--json")
    assert again.exit_code == 0, again.output
    [outcome] = json.loads(again.stdout)
    assert (outcome["batches"], outcome["rows"], outcome["deleted"]) == (2, 670, 720)

    source = project.query(f'SELECT id, amount::text FROM "{s}".src ORDER BY id')
    inside = [r for r in source if r[0] <= 720]  # the two rewound chunks: ids 1..720
    outside = [(i, f"{i * 0.5:.2f}") for i in range(721, 1_001)]  # as first loaded
    assert _context_rows(project) == sorted(inside + outside)
