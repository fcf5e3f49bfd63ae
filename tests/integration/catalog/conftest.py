"""The catalog suite runs every test against both backends.

`catalog_url` is a catalog that does not exist yet: a file path in tmp_path for
SQLite, or a fresh database on the suite's PostgreSQL (dropped afterwards).
`catalog` is that catalog opened with migrate=True, as `apply` opens it.
PostgreSQL cases are marked `integration`; the SQLite ones need no server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hakiri.catalog.store import Catalog
from tests.integration.catalog.rawdb import RawDatabase

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)]


@pytest.fixture(params=BACKENDS)
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'catalog.sqlite'}"
        return
    database: str = request.getfixturevalue("pg_catalog")
    yield database.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Catalog]:
    with Catalog.open(catalog_url, migrate=True) as opened:
        yield opened


@pytest.fixture
def raw_db(catalog_url: str) -> RawDatabase:
    return RawDatabase(catalog_url)
