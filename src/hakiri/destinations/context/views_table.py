"""`<store>/_views`: the live view definitions, as a Delta table any reader of the store opens.

    name string, version bigint, sql string, description string, reads array<string>,
    applied_at timestamp (UTC)

One row per live view, by name. Apply rewrites it whole (an overwrite: one new Delta version)
when the catalog's live views differ from what it holds, so a reader of the store, or of the
bucket `hakiri sync` publishes it to, resolves a view's name to its SQL without the catalog.
`_` marks it as the store's own: `hakiri context tables` does not list it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.catalog.records import ViewRecord
from hakiri.destinations.context.commit import delta_errors, open_table

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["VIEWS_TABLE", "views_in_store", "write_views"]

VIEWS_TABLE = "_views"


def _schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("name", pa.string(), nullable=False),
            pa.field("version", pa.int64(), nullable=False),
            pa.field("sql", pa.string(), nullable=False),
            pa.field("description", pa.string()),
            pa.field("reads", pa.list_(pa.string()), nullable=False),
            pa.field("applied_at", pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


def views_in_store(store: Path) -> list[tuple[str, int]] | None:
    """(name, version) of each view `_views` holds, by name; None when there is no table."""
    location = store / VIEWS_TABLE
    table = open_table(location)
    if table is None:
        return None
    with delta_errors(location, "read", reading=True):
        rows = table.to_pyarrow_table(columns=["name", "version"]).to_pylist()
    return sorted((r["name"], r["version"]) for r in rows)


def write_views(store: Path, views: Sequence[ViewRecord]) -> int:
    """Overwrite `_views` with `views` (created when missing); the table's new version."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from hakiri.destinations.context.rs_commit import commit_properties

    ordered = sorted(views, key=lambda v: v.name)
    rows = pa.Table.from_pylist(
        [
            {
                "name": v.name,
                "version": v.version,
                "sql": v.sql,
                "description": v.description,
                "reads": list(v.reads),
                "applied_at": v.applied_at.astimezone(UTC),
            }
            for v in ordered
        ],
        schema=_schema(),
    )
    location = store / VIEWS_TABLE
    with delta_errors(location, "write", what="the store's view definitions at"):
        location.mkdir(parents=True, exist_ok=True)
        write_deltalake(
            str(location),
            rows,
            mode="overwrite",
            schema_mode="overwrite",
            commit_properties=commit_properties({"hakiri.operation": "views"}),
        )
        written = open_table(location)
        assert written is not None
        return written.version()
