"""scd2 through `hakiri apply`, into PostgreSQL and into the context store.

Six snapshot files of a customers table, each one batch, loaded in one apply:
changes, a delete, a key that comes back, a late snapshot (taken between the 3rd
and the 4th, delivered after the 4th) whose row has an older change time, and a
duplicate of the 4th in another row order. The history hakiri builds must equal
the one computed here in SQL, from all the snapshots at once, by the definition:
every distinct row is a version starting at its change time; a key missing from a
snapshot is gone from that snapshot's time; a version ends at the next change
(a version or a disappearance) of its key; an event that changes nothing (the same
values again, a disappearance of an absent key) is no event.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pyspark.sql import SparkSession

from tests.support.project import Project, postgres_project

pytestmark = pytest.mark.integration

HEADER = "id,name,tier,updated_at"
# (file, taken at, rows): each row id, name, tier, updated_at (the change time)
SNAPSHOTS = [
    (
        "s1.csv",
        "2026-01-01 00:00:00",
        [
            "1,ada,basic,2025-12-31 08:00:00",
            "2,bob,basic,2025-12-31 08:00:00",
            "3,cy,basic,2025-12-31 08:00:00",
            "4,dee,gold,2025-12-31 08:00:00",
        ],
    ),
    (  # ada changes, dee is deleted, eve is new
        "s2.csv",
        "2026-01-02 00:00:00",
        [
            "1,ada,gold,2026-01-01 12:00:00",
            "2,bob,basic,2025-12-31 08:00:00",
            "3,cy,basic,2025-12-31 08:00:00",
            "5,eve,basic,2026-01-01 13:00:00",
        ],
    ),
    (  # dee comes back, changed
        "s3.csv",
        "2026-01-03 00:00:00",
        [
            "1,ada,gold,2026-01-01 12:00:00",
            "2,bob,basic,2025-12-31 08:00:00",
            "3,cy,basic,2025-12-31 08:00:00",
            "4,dee,silver,2026-01-02 18:00:00",
            "5,eve,basic,2026-01-01 13:00:00",
        ],
    ),
    (  # cy is deleted; ada, bob, eve change; fay is new
        "s4.csv",
        "2026-01-04 00:00:00",
        [
            "1,ada,platinum,2026-01-03 20:00:00",
            "2,bob,basic,2026-01-03 11:00:00",
            "4,dee,silver,2026-01-02 18:00:00",
            "5,eve,gold,2026-01-03 10:00:00",
            "6,fay,basic,2026-01-03 09:00:00",
        ],
    ),
    (  # late: taken on Jan 3 at 08:00, delivered after s4; bob was silver for a while
        "s5.csv",
        "2026-01-03 08:00:00",
        [
            "1,ada,gold,2026-01-01 12:00:00",
            "2,bob,silver,2026-01-03 06:00:00",
            "3,cy,basic,2025-12-31 08:00:00",
            "4,dee,silver,2026-01-02 18:00:00",
            "5,eve,basic,2026-01-01 13:00:00",
        ],
    ),
    (  # a duplicate of s4 (other bytes, same rows)
        "s6.csv",
        "2026-01-06 00:00:00",
        [
            "6,fay,basic,2026-01-03 09:00:00",
            "5,eve,gold,2026-01-03 10:00:00",
            "4,dee,silver,2026-01-02 18:00:00",
            "2,bob,basic,2026-01-03 11:00:00",
            "1,ada,platinum,2026-01-03 20:00:00",
        ],
    ),
]

# The history by definition, from table `snaps` (snap, taken_at, id, name, tier, updated_at).
EXPECTED = """
WITH keys AS (SELECT DISTINCT id FROM snaps),
versions AS (
  SELECT DISTINCT id, name, tier, updated_at, updated_at AS at, false AS gone FROM snaps
),
gone AS (  -- a key seen in an earlier snapshot (by time) and missing from this one
  SELECT k.id, NULL::text, NULL::text, NULL::timestamptz, s.taken_at, true
  FROM keys k CROSS JOIN (SELECT DISTINCT snap, taken_at FROM snaps) s
  WHERE NOT EXISTS (SELECT 1 FROM snaps x WHERE x.snap = s.snap AND x.id = k.id)
    AND EXISTS (SELECT 1 FROM snaps y WHERE y.id = k.id AND y.taken_at < s.taken_at)
),
events AS (SELECT * FROM versions UNION ALL SELECT * FROM gone),
ordered AS (
  SELECT *, lag(gone) OVER w AS prev_gone, lag(name) OVER w AS prev_name,
         lag(tier) OVER w AS prev_tier, lag(updated_at) OVER w AS prev_updated
  FROM events WINDOW w AS (PARTITION BY id ORDER BY at)
),
kept AS (
  SELECT * FROM ordered
  WHERE NOT (gone AND (prev_gone IS NULL OR prev_gone))
    AND NOT (NOT gone AND prev_gone = false AND (name, tier, updated_at)
             IS NOT DISTINCT FROM (prev_name, prev_tier, prev_updated))
)
SELECT id, name, tier, updated_at, at, valid_to, valid_to IS NULL FROM (
  SELECT *, lead(at) OVER (PARTITION BY id ORDER BY at) AS valid_to FROM kept) x
WHERE NOT gone ORDER BY id, at
"""


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _write_snapshots(project: Project) -> None:
    for name, taken, rows in SNAPSHOTS:
        project.write(f"data/{name}", "\n".join([HEADER, *rows]) + "\n")
        stamp = _utc(taken).timestamp()
        os.utime(project.root / "data" / name, (stamp, stamp))


def _expected(pg_url: str) -> list[tuple]:
    schema = f"snaps_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(schema)))
            conn.execute(
                "CREATE TABLE snaps (snap int, taken_at timestamptz, id bigint, name text,"
                " tier text, updated_at timestamptz)"
            )
            with conn.cursor().copy("COPY snaps FROM STDIN") as copy:
                for number, (_, taken, rows) in enumerate(SNAPSHOTS):
                    for row in rows:
                        key, name, tier, updated = row.split(",")
                        copy.write_row((number, _utc(taken), int(key), name, tier, _utc(updated)))
            return conn.execute(EXPECTED).fetchall()
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _history_pg(project: Project) -> list[tuple]:
    return project.query(
        sql.SQL(
            "SELECT id, name, tier, updated_at, valid_from, valid_to, is_current FROM {} "
            "ORDER BY id, valid_from"
        ).format(sql.Identifier(project.schema, "customers"))
    )


def _history_context(project: Project) -> list[tuple]:
    from deltalake import DeltaTable

    table = DeltaTable(str(project.root / ".hakiri" / "context" / "customers"))
    columns = ("id", "name", "tier", "updated_at", "valid_from", "valid_to", "is_current")
    rows = table.to_pyarrow_table().select(list(columns)).to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in rows), key=lambda r: (r[0], r[4]))


def _project(tmp_path: Path, pg_url: str, pg_schema: str, destination: str) -> Project:
    load = (
        'load = { mode = "scd2", key = ["id"], change_time_column = "updated_at", '
        "max_delete_fraction = 0.5 }"
    )
    project = postgres_project(
        tmp_path,
        pg_url,
        pg_schema,
        source='{ path = "data/*.csv", columns = { id = "bigint", name = "string", '
        'tier = "string", updated_at = "timestamp" } }',
        body=load,
    )
    text = (
        (project.root / "hakiri.toml")
        .read_text()
        .replace('tables = ["t"]', 'tables = ["customers"]')
    )
    if destination == "context":
        text = text.replace(
            f'destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}',
            'destination = { connector = "context" }',
        )
    (project.root / "hakiri.toml").write_text(text)
    return project


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_six_snapshots_build_the_history_sql_computes(
    destination: str, tmp_path: Path, pg_url: str, pg_schema: str, spark: SparkSession
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, destination)
    _write_snapshots(project)

    applied = project.cli("apply")
    assert applied.exit_code == 0, applied.output
    history = _history_pg(project) if destination == "postgres" else _history_context(project)
    expected = _expected(pg_url)
    assert history == expected

    # Spot checks of what the definition implies, so a wrong definition cannot pass quietly.
    bob = [(r[2], r[4], r[5]) for r in history if r[0] == 2]
    assert [tier for tier, _, _ in bob] == ["basic", "silver", "basic"]  # the late row, in place
    assert bob[1][1:] == (_utc("2026-01-03 06:00:00"), _utc("2026-01-03 11:00:00"))
    dee = [(r[2], r[5], r[6]) for r in history if r[0] == 4]
    assert dee == [("gold", _utc("2026-01-02 00:00:00"), False), ("silver", None, True)]
    assert [r[6] for r in history if r[0] == 3] == [False]  # cy: closed by s4, not reopened
    assert sum(1 for r in history if r[6]) == 5  # one current version per live key

    again = project.cli("apply")
    assert again.exit_code == 0 and "no changes" in again.output
    replayed = _history_pg(project) if destination == "postgres" else _history_context(project)
    assert replayed == history


def test_a_keyless_source_keys_its_records_by_row_hash(
    tmp_path: Path, pg_url: str, pg_schema: str, spark: SparkSession
) -> None:
    project = postgres_project(
        tmp_path,
        pg_url,
        pg_schema,
        source='{ path = "data/*.csv", columns = { name = "string", tier = "string" } }',
        body='load = { mode = "scd2", key = "row_hash", max_delete_fraction = 1.0 }',
    )
    for name, taken, rows in (
        ("a.csv", "2026-02-01 00:00:00", ["ada,basic", "bob,basic"]),
        ("b.csv", "2026-02-02 00:00:00", ["ada,gold", "bob,basic"]),
    ):
        project.write(f"data/{name}", "\n".join(["name,tier", *rows]) + "\n")
        stamp = _utc(taken).timestamp()
        os.utime(project.root / "data" / name, (stamp, stamp))
    applied = project.cli("apply")
    assert applied.exit_code == 0, applied.output
    history = project.query(
        sql.SQL(
            "SELECT name, tier, valid_from, valid_to, is_current, length(_hakiri_row_hash) "
            "FROM {} ORDER BY valid_from, name"
        ).format(sql.Identifier(pg_schema, "t"))
    )
    day1, day2 = _utc("2026-02-01 00:00:00"), _utc("2026-02-02 00:00:00")
    # a changed row is another record: ada/basic closed, ada/gold opened; bob untouched
    assert history == [
        ("ada", "basic", day1, day2, False, 64),
        ("bob", "basic", day1, None, True, 64),
        ("ada", "gold", day2, None, True, 64),
    ]
