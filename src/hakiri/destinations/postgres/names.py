"""Names hakiri gives the tables it creates next to a target, kept within PostgreSQL's 63 bytes.

PostgreSQL silently truncates a longer identifier, so two long names that differ
only after byte 63 would collide; a derived name that would not fit is cut at a
UTF-8 character boundary and made unique again by a short hash of the full name.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.destinations.base import LoadRequest
from hakiri.errors import LoadError

if TYPE_CHECKING:
    import psycopg

MAX_IDENTIFIER_BYTES = 63  # NAMEDATALEN - 1
_HASH_CHARS = 8

# Every table hakiri creates beside a target carries a comment `hakiri {...json...}`
# saying what it is, for which pipeline and run, and when; gc reads it back.
MARKER_PREFIX = "hakiri "


def derived_name(table: str, suffix: str) -> str:
    """`table + suffix`, or a hash-shortened form of it when that exceeds 63 bytes."""
    full = table + suffix
    if len(full.encode()) <= MAX_IDENTIFIER_BYTES:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:_HASH_CHARS]
    tail = f"_{digest}{suffix}"
    budget = MAX_IDENTIFIER_BYTES - len(tail.encode())
    head = table.encode()[:budget].decode("utf-8", errors="ignore")
    return head + tail


def check_identifier(name: str, what: str) -> None:
    """Refuse a name PostgreSQL would truncate (instead of loading into a different table or column)."""
    size = len(name.encode())
    if size > MAX_IDENTIFIER_BYTES:
        raise LoadError(
            f"{what} {name!r} is {size} bytes long; PostgreSQL allows {MAX_IDENTIFIER_BYTES}",
            "rename it (e.g. with a transform or the pipeline's target table) to at most 63 bytes",
        )


def utc_now() -> datetime:
    return datetime.now(UTC)


def marker(kind: str, **fields: str) -> str:
    """The comment that marks a table hakiri created: kind, pipeline, run, batch, created_at."""
    payload = {"kind": kind, **fields, "created_at": utc_now().isoformat(timespec="seconds")}
    return MARKER_PREFIX + json.dumps(payload, ensure_ascii=False, sort_keys=True)


def mark_table(
    conn: psycopg.Connection[Any], table: sql.Identifier, kind: str, request: LoadRequest
) -> None:
    """Comment a table hakiri just created with its marker (in the caller's transaction)."""
    comment = marker(
        kind,
        project=request.project,
        pipeline=request.pipeline_id,
        run=request.run_id,
        batch=request.batch_id,
        target=request.target_table,
    )
    conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(table, sql.Literal(comment)))


def parse_marker(comment: str | None) -> dict[str, str] | None:
    """The fields of a hakiri marker comment; None for any other comment (or none)."""
    if not comment or not comment.startswith(MARKER_PREFIX):
        return None
    try:
        payload = json.loads(comment[len(MARKER_PREFIX) :])
    except ValueError:
        return None
    return payload if isinstance(payload, dict) and "kind" in payload else None
