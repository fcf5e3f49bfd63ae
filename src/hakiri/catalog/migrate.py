"""Alembic, used from code: which revision a catalog is at, and upgrading it to head.

To write a new revision after changing `schema.py`:

    python -m hakiri.catalog.migrate "add a column to batches"

autogenerates `migrations/versions/<next>_<slug>.py` by diffing `schema.py`
against a scratch SQLite catalog at the current head; review it before committing, and
set `HEAD_REVISION` to it (a unit test fails until it is).

Alembic is imported only to upgrade or inspect the migrations: a command that opens a
catalog already at head reads its revision with one query and never loads it.
"""

from __future__ import annotations

import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, create_engine, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
HEAD_REVISION = "0008"  # the newest revision in migrations/versions


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest revision, as alembic reads the migration scripts (`HEAD_REVISION` is it)."""
    head = _scripts().get_current_head()
    assert head is not None, f"no migrations in {MIGRATIONS}"
    return head


def is_known_revision(revision: str) -> bool:
    return any(script.revision == revision for script in _scripts().walk_revisions())


def current_revision(connection: Connection) -> str | None:
    """The catalog's revision; None when it has no alembic_version table (never migrated)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    versions = connection.execute(text("SELECT version_num FROM alembic_version")).scalars()
    return next(iter(versions), None)


def upgrade(connection: Connection) -> None:
    """Upgrade to head inside the caller's transaction (the caller holds the migration lock)."""
    from alembic import command

    command.upgrade(alembic_config(connection), "head")


def new_revision(message: str) -> None:
    """Autogenerate the next revision from the difference between schema.py and head."""
    from alembic import command

    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{scratch}/catalog.sqlite"
        engine = create_engine(url)
        try:
            with engine.begin() as conn:
                upgrade(conn)
        finally:
            engine.dispose()
        command.revision(
            alembic_config(url=url),
            message=message,
            autogenerate=True,
            rev_id=f"{int(head_revision()) + 1:04d}",
            version_path=str(MIGRATIONS / "versions"),
        )


if __name__ == "__main__":
    new_revision(" ".join(sys.argv[1:]) or "change")
