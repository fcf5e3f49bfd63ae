"""Looking at a catalog's database behind the store's back: tables, alembic_version, stamping."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, create_engine, inspect, text


class RawDatabase:
    def __init__(self, url: str) -> None:
        self.url = url

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        engine = create_engine(self.url)
        try:
            with engine.begin() as conn:
                yield conn
        finally:
            engine.dispose()

    def tables(self) -> set[str]:
        with self.connect() as conn:
            return set(inspect(conn).get_table_names())

    def versions(self) -> list[str]:
        with self.connect() as conn:
            return [row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))]

    def stamp(self, revision: str) -> None:
        """Pretend the catalog was last migrated to `revision` (which may not exist)."""
        with self.connect() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
