"""Alembic environment for the catalog, driven from code (`hakiri.catalog.migrate`), not alembic.ini.

The caller hands over an open connection inside its own transaction (and
holding the migration lock) as `config.attributes["connection"]`; without one,
`sqlalchemy.url` from the config is used, e.g. when generating a revision.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from sqlalchemy import Connection, TypeDecorator, create_engine

from hakiri.catalog.schema import metadata


def render_item(kind: str, obj: Any, _context: Any) -> str | Literal[False]:
    """Autogenerate writes our column types as their plain SQL type (sa.DateTime(), sa.Text()),
    so a revision never imports hakiri and stays what it was when schema.py moves on."""
    if kind == "type" and isinstance(obj, TypeDecorator):
        return f"sa.{obj.impl_instance!r}"
    return False


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        render_item=render_item,
        # SQLite cannot ALTER most things in place; batch mode copies the table.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
