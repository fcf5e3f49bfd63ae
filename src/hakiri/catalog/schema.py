"""The catalog's tables, declared once for SQLite and PostgreSQL (SQLAlchemy Core).

Migrations in `migrations/versions/` must produce exactly these tables;
`tests/unit/catalog/test_migrations.py` checks that they do.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Dialect,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
)

__all__ = [
    "alerts",
    "backfill_rewinds",
    "batches",
    "metadata",
    "pipeline_cursor",
    "pipeline_leases",
    "pipeline_run",
    "pipelines",
    "schedule_fires",
    "schema_log",
    "target_marks",
    "views",
]


class UTCDateTime(TypeDecorator[datetime]):
    """Stored as naive UTC, returned tz-aware UTC, so both dialects compare and sort alike."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} given to the catalog; pass an aware one")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class JSONText(TypeDecorator[Any]):
    """A JSON document in a TEXT column: the same bytes on every dialect, keys sorted."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else json.dumps(value, sort_keys=True)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        return None if value is None else json.loads(value)


# Named constraints, so later migrations (SQLite batch mode included) can address them.
metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

pipelines = Table(
    "pipelines",
    metadata,
    Column("pipeline_id", String, primary_key=True),
    Column("spec_hash", String, nullable=False),
    Column("applied_spec", JSONText, nullable=False),
    Column("phase", String, nullable=False),
    Column("applied_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

pipeline_run = Table(
    "pipeline_run",
    metadata,
    Column("run_id", String, primary_key=True),
    Column("pipeline_id", String, nullable=False, index=True),
    Column("started_at", UTCDateTime, nullable=False),
    Column("ended_at", UTCDateTime),
    Column("status", String, nullable=False),
    Column("row_count", BigInteger),
    Column("bytes", BigInteger),
    Column("error_kind", String),
    Column("error_msg", Text),
    Column("trace_id", String),
    # {"rules": {rule_id: violations}, "quarantined": n, "validators": [probe results], "warnings": [...]}
    Column("quality", JSONText),
    # what started it: apply | schedule | event (an HTTP trigger); with the trigger's reason
    Column("trigger", String),
    Column("trigger_reason", Text),
)

pipeline_cursor = Table(
    "pipeline_cursor",
    metadata,
    Column("pipeline_id", String, nullable=False),
    Column("table_name", String, nullable=False),
    Column("cursor_json", JSONText, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("pipeline_id", "table_name"),
)

batches = Table(
    "batches",
    metadata,
    Column("pipeline_id", String, nullable=False),
    Column("batch_id", String, nullable=False),
    Column("seq", Integer, nullable=False),  # claim order within the pipeline
    Column("table_name", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("file_path", Text),
    Column("content_hash", String),
    Column("predicate", Text),
    Column("generation", Integer, nullable=False),
    Column("size_bytes", BigInteger),
    Column("status", String, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("holder", String),
    Column("lease_expires_at", UTCDateTime),
    Column("run_id", String),
    Column("rows", BigInteger),
    Column("error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("started_at", UTCDateTime),
    Column("committed_at", UTCDateTime),
    PrimaryKeyConstraint("pipeline_id", "batch_id"),
    Index("ix_batches_pipeline_id_status", "pipeline_id", "status"),
)

pipeline_leases = Table(
    "pipeline_leases",
    metadata,
    Column("pipeline_id", String, primary_key=True),
    Column("holder", String, nullable=False),
    Column("host", String, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("acquired_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
)

schema_log = Table(
    "schema_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline_id", String, nullable=False),
    Column("table_name", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("detail", JSONText, nullable=False),
    Column("run_id", String),
    Column("created_at", UTCDateTime, nullable=False),
)

alerts = Table(
    "alerts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("severity", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("message", Text, nullable=False),
    Column("pipeline_id", String),
    Column("run_id", String),
    Column("created_at", UTCDateTime, nullable=False, index=True),
)

backfill_rewinds = Table(
    "backfill_rewinds",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline_id", String, nullable=False, index=True),
    Column("table_name", String, nullable=False),
    Column("range_from", Text, nullable=False),
    Column("range_to", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("generation", Integer, nullable=False),  # the generation the rewound chunks reload as
    Column("chunks", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# The last schedule slot fired per pipeline: serve replicas claim a slot here (a
# conditional update), so a slot fires once across replicas and restarts.
schedule_fires = Table(
    "schedule_fires",
    metadata,
    Column("pipeline_id", String, primary_key=True),
    Column("slot", UTCDateTime, nullable=False),
    Column("fired_at", UTCDateTime, nullable=False),
    Column("holder", String, nullable=False),
    # When the firing process started the slot's run; NULL: it died first (taken over).
    Column("started_at", UTCDateTime, nullable=True),
)

# What each managed target looked like when hakiri last loaded it: drift (a change by hand since)
# is what differs now. `alerted` is the drift serve last alerted about, so it alerts once.
target_marks = Table(
    "target_marks",
    metadata,
    Column("pipeline_id", String, nullable=False),
    Column("table_name", String, nullable=False),
    Column("target", Text, nullable=False),  # as plan shows it: 'public.orders'
    Column("columns", JSONText, nullable=False),  # [[name, type], ...] in table order
    Column("primary_key", JSONText, nullable=False),  # [name, ...]
    Column("row_count", BigInteger),  # NULL: the destination could not count them
    Column("run_id", String),
    Column("marked_at", UTCDateTime, nullable=False),
    Column("alerted", Text),
    Column("identity", Text),  # the table's OID, the Delta table's id; NULL: not known
    PrimaryKeyConstraint("pipeline_id", "table_name"),
)

# Every view definition apply recorded: version 1, 2, … per name. The live one of a name has
# dropped_at NULL; a replaced version gets the time it was replaced, a dropped one the drop's.
views = Table(
    "views",
    metadata,
    Column("name", String, nullable=False),
    Column("version", Integer, nullable=False),
    Column("sql", Text, nullable=False),
    Column("description", Text),
    Column("sql_hash", String, nullable=False),  # sha256 of the SQL as recorded
    Column("reads", JSONText, nullable=False),  # [table or view, ...], first mention first
    Column("applied_at", UTCDateTime, nullable=False),
    Column("dropped_at", UTCDateTime),
    PrimaryKeyConstraint("name", "version"),
)
