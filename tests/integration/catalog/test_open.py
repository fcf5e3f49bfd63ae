"""Opening a catalog: `apply` migrates it, `plan` only reads it (or reads nothing at all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hakiri.catalog.migrate import head_revision
from hakiri.catalog.records import Phase
from hakiri.catalog.schema import metadata
from hakiri.catalog.store import Catalog
from hakiri.errors import CatalogError, CatalogOutdated
from tests.integration.catalog.rawdb import RawDatabase

CATALOG_TABLES = set(metadata.tables)


def sqlite_file(url: str) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:") else None


def test_apply_creates_the_catalog_at_head(catalog_url: str, raw_db: RawDatabase) -> None:
    with Catalog.open(catalog_url, migrate=True) as catalog:
        assert catalog.initialized
        assert catalog.dialect == catalog_url.split(":")[0].split("+")[0]
        assert catalog.url_display == catalog_url
        assert catalog.pipeline_states() == {}
    assert raw_db.tables() >= CATALOG_TABLES
    assert raw_db.versions() == [head_revision()]


def test_reopening_keeps_state_and_migrates_nothing(catalog_url: str, raw_db: RawDatabase) -> None:
    with Catalog.open(catalog_url, migrate=True) as catalog:
        catalog.record_applied("orders", {"id": "orders"}, "h1", Phase.STREAMING)
    for migrate in (True, False):
        with Catalog.open(catalog_url, migrate=migrate) as catalog:
            assert catalog.initialized
            assert catalog.pipeline_state("orders") is not None
    assert raw_db.versions() == [head_revision()]


def test_plan_reads_a_missing_catalog_as_empty_and_creates_nothing(
    catalog_url: str, raw_db: RawDatabase
) -> None:
    path = sqlite_file(catalog_url)
    with Catalog.open(catalog_url, migrate=False) as catalog:
        assert not catalog.initialized
        assert catalog.url_display == catalog_url
        assert catalog.dialect == catalog_url.split(":")[0].split("+")[0]
        assert catalog.pipeline_states() == {}
        assert catalog.runs() == []
        assert catalog.batch_counts("orders").total == 0
        assert catalog.cursors("orders") == {}
        assert catalog.alerts() == []
    if path is not None:
        assert not path.exists()
        assert not path.parent.exists()
    else:
        assert raw_db.tables() == set()  # not even alembic_version


def test_plan_refuses_a_catalog_at_an_older_revision(catalog_url: str, raw_db: RawDatabase) -> None:
    Catalog.open(catalog_url, migrate=True).close()
    raw_db.stamp("0000")
    with pytest.raises(CatalogOutdated) as raised:
        Catalog.open(catalog_url, migrate=False)
    error = raised.value
    assert f"is at schema revision 0000; this hakiri needs {head_revision()}" in error.reason
    assert "\n" not in error.reason
    assert error.hint == "run `hakiri apply` to migrate it (plan never migrates a catalog)"
    assert raw_db.versions() == ["0000"]  # plan changed nothing


def test_a_catalog_from_a_newer_hakiri_asks_for_an_upgrade(
    catalog_url: str, raw_db: RawDatabase
) -> None:
    Catalog.open(catalog_url, migrate=True).close()
    raw_db.stamp("9999")
    for migrate in (False, True):
        with pytest.raises(CatalogOutdated) as raised:
            Catalog.open(catalog_url, migrate=migrate)
        assert "revision 9999" in raised.value.reason
        assert raised.value.hint is not None and "upgrade hakiri" in raised.value.hint
    assert raw_db.versions() == ["9999"]


def test_apply_cannot_migrate_from_a_revision_it_does_not_ship(
    catalog_url: str, raw_db: RawDatabase
) -> None:
    Catalog.open(catalog_url, migrate=True).close()
    raw_db.stamp("0000")
    with pytest.raises(CatalogOutdated, match="cannot migrate from"):
        Catalog.open(catalog_url, migrate=True)


def test_errors_are_catalog_errors_with_a_hint(catalog: Catalog) -> None:
    with pytest.raises(CatalogError) as raised:
        catalog.set_phase("nobody", Phase.RETIRED)
    assert raised.value.hint
    assert catalog.url_display in raised.value.reason
