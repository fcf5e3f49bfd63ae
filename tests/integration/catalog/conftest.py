"""The catalog suite runs every test against both backends.

`catalog_url` is a catalog that does not exist yet: a file path in tmp_path for
SQLite, or a fresh database on the suite's PostgreSQL (dropped afterwards).
`catalog` is that catalog opened with migrate=True, as `apply` opens it.
PostgreSQL cases are marked `integration`; the SQLite ones need no server.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from hakiri.catalog.store import Catalog
from tests.integration.catalog.rawdb import RawDatabase

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)]


@pytest.fixture(params=BACKENDS)
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'catalog.sqlite'}"
        return
    pg_url: str = request.getfixturevalue("pg_url")
    name = f"cat_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        server = pg_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Catalog]:
    with Catalog.open(catalog_url, migrate=True) as opened:
        yield opened


@pytest.fixture
def raw_db(catalog_url: str) -> RawDatabase:
    return RawDatabase(catalog_url)
