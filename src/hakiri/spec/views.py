"""`[[view]]` blocks and `views/*.toml|json`: named SQL over the context store's tables.

    [[view]]
    name = "customer_orders"
    description = "Orders with their customer's name."
    sql = '''
    SELECT o.id, o.total_price, c.email
    FROM orders o JOIN customers c ON o.customer_id = c.id
    '''

Views are the query surface over the landed tables: business logic that spans pipelines
belongs here, not in a pipeline's transforms. Their SQL is Spark SQL, read-only, over the
context store's tables and other views (`hakiri.guards.context_sql` says exactly what is
allowed); `hakiri query` and serve's API run it.
"""

from __future__ import annotations

import hashlib

from pydantic import Field

from hakiri.spec.base import SpecModel

__all__ = ["VIEW_NAME_PATTERN", "ViewSpec", "view_sql_hash"]

# A name a query writes bare, as it would a table's: no quoting needed in any engine.
VIEW_NAME_PATTERN = r"^[a-z_][a-z0-9_]{0,62}$"


class ViewSpec(SpecModel):
    """A named, read-only query over the context store's tables and other views."""

    name: str = Field(
        pattern=VIEW_NAME_PATTERN,
        description="How queries and other views name it: lower case letters, digits and '_'.",
    )
    sql: str = Field(
        min_length=1,
        description="One read-only Spark SQL query (SELECT, WITH, UNION…) over context-store "
        "tables and other views; no reads of files, the network or the environment.",
    )
    description: str | None = Field(None, description="What the view answers, for its readers.")


def view_sql_hash(sql: str) -> str:
    """What tells two definitions' SQL apart: sha256 of the text, without the whitespace and
    `;` around it (a TOML multi-line string and a JSON string of the same query agree)."""
    return hashlib.sha256(normalized_sql(sql).encode("utf-8")).hexdigest()


def normalized_sql(sql: str) -> str:
    """The SQL as recorded and compared: without the whitespace and `;` around it."""
    return sql.strip().rstrip(";").strip()
