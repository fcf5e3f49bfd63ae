"""The migrations build exactly the tables schema.py declares."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Connection, MetaData, String, create_engine

from hakiri.catalog import migrate
from hakiri.catalog.schema import metadata


@pytest.fixture
def migrated(tmp_path: Path) -> Iterator[Connection]:
    engine = create_engine(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    with engine.begin() as conn:
        migrate.upgrade(conn)
        yield conn
    engine.dispose()


def diff(conn: Connection, target: MetaData) -> list[object]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return list(compare_metadata(context, target))


def test_head_matches_schema_py(migrated: Connection) -> None:
    assert migrate.current_revision(migrated) == migrate.head_revision() == "0008"
    assert migrate.head_revision() == migrate.HEAD_REVISION  # bumped with each new revision
    assert diff(migrated, metadata) == []


def test_the_comparison_would_notice_a_difference(migrated: Connection) -> None:
    changed = MetaData()
    for table in metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["batches"].append_column(Column("note", String))
    assert [d[0] for d in diff(migrated, changed)] == ["add_column"]  # type: ignore[index]


def test_downgrade_to_base_and_back(migrated: Connection) -> None:
    command.downgrade(migrate.alembic_config(migrated), "base")
    assert migrate.current_revision(migrated) is None
    migrate.upgrade(migrated)
    assert diff(migrated, metadata) == []


def test_revisions_are_numbered_in_sequence() -> None:
    assert migrate.is_known_revision("0001")
    assert not migrate.is_known_revision("0000")
    files = sorted(p.name for p in (migrate.MIGRATIONS / "versions").glob("*.py"))
    assert files[0] == "0001_initial.py"
    assert [name[:4] for name in files] == [f"{i:04d}" for i in range(1, len(files) + 1)]


def test_upgrading_from_0001_keeps_runs(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0001")
        conn.exec_driver_sql(
            "INSERT INTO pipeline_run (run_id, pipeline_id, started_at, status) "
            "VALUES ('r1', 'orders', '2026-11-01 00:00:00', 'success')"
        )
        migrate.upgrade(conn)
        assert migrate.current_revision(conn) == "0008"
        row = conn.exec_driver_sql("SELECT run_id, quality FROM pipeline_run").one()
        assert tuple(row) == ("r1", None)
    engine.dispose()
