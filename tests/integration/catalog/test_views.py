"""Views in the catalog: each create or replace is the next version of its name, a drop ends
the live one, and only live versions are read back as the project's views."""

from __future__ import annotations

import hashlib

from hakiri.catalog.records import ViewDefinition
from hakiri.catalog.store import Catalog

TOTALS = ViewDefinition(
    "totals",
    "SELECT customer_id, sum(total) AS spent FROM orders GROUP BY 1",
    "Spend.",
    ("orders",),
)
BIG = ViewDefinition("big", "SELECT * FROM totals WHERE spent > 100", None, ("totals",))


def test_a_first_definition_is_version_1_and_live(catalog: Catalog) -> None:
    written = catalog.record_views([TOTALS, BIG])
    assert [(r.name, r.version) for r in written] == [("totals", 1), ("big", 1)]
    live = catalog.live_views()
    assert list(live) == ["big", "totals"]
    totals = live["totals"]
    assert (totals.sql, totals.description, totals.reads) == (TOTALS.sql, "Spend.", ("orders",))
    assert totals.sql_hash == hashlib.sha256(TOTALS.sql.encode()).hexdigest()
    assert totals.dropped_at is None and totals.applied_at.tzinfo is not None


def test_a_replacement_is_the_next_version_and_ends_the_one_before(catalog: Catalog) -> None:
    catalog.record_views([TOTALS])
    changed = ViewDefinition("totals", TOTALS.sql + " HAVING spent > 0", "Spend.", ("orders",))
    [record] = catalog.record_views([changed])
    assert record.version == 2
    assert catalog.live_views()["totals"].sql == changed.sql
    first, second = catalog.view_versions("totals")
    assert (first.version, second.version) == (1, 2)
    assert first.dropped_at == second.applied_at and second.dropped_at is None


def test_a_drop_ends_the_live_version_and_a_new_definition_goes_on_numbering(
    catalog: Catalog,
) -> None:
    catalog.record_views([TOTALS, BIG])
    [dropped] = catalog.record_views([], ["big", "never_recorded"])
    assert (dropped.name, dropped.version) == ("big", 1) and dropped.dropped_at is not None
    assert list(catalog.live_views()) == ["totals"]
    [again] = catalog.record_views([BIG])
    assert again.version == 2
    assert [r.version for r in catalog.view_versions("big")] == [1, 2]
    assert list(catalog.live_views()) == ["big", "totals"]
