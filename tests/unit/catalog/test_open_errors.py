"""Catalogs that cannot be opened fail as one-line CatalogErrors with a hint, passwords masked."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from hakiri.catalog.store import Catalog
from hakiri.errors import CatalogError


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def open_fails(url: str, migrate: bool) -> CatalogError:
    with pytest.raises(CatalogError) as raised:
        Catalog.open(url, migrate=migrate)
    error = raised.value
    assert "\n" not in error.reason
    assert error.hint
    return error


@pytest.mark.parametrize("migrate", [True, False])
@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+psycopg", "postgres"])
def test_an_unreachable_postgresql_catalog(scheme: str, migrate: bool) -> None:
    url = f"{scheme}://hakiri:s3cret@127.0.0.1:{closed_port()}/catalog"
    error = open_fails(url, migrate)
    assert "s3cret" not in error.reason
    assert f"catalog {scheme}://hakiri:***@127.0.0.1:" in error.reason
    assert "cannot be opened" in error.reason
    assert error.hint is not None and "PostgreSQL server" in error.hint


def test_an_unsupported_database() -> None:
    error = open_fails("mysql://root:pw@localhost/db", migrate=True)
    assert "mysql://root:***@localhost/db" in error.reason
    assert "SQLite or PostgreSQL" in error.reason


def test_not_a_url() -> None:
    error = open_fails("not a url", migrate=True)
    assert "is not a valid database URL" in error.reason


def test_a_sqlite_catalog_whose_directory_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    error = open_fails(f"sqlite:///{tmp_path / 'file' / 'state' / 'catalog.sqlite'}", migrate=True)
    assert "cannot be created" in error.reason


def test_a_sqlite_catalog_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite"
    path.write_text("this is not a database, just text long enough to have a header" * 10)
    for migrate in (True, False):
        error = open_fails(f"sqlite:///{path}", migrate=migrate)
        assert "not a database" in error.reason
