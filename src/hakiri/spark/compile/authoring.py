"""What a transforms module may call besides PySpark: `context_table(name)`.

Only while `hakiri compile` runs the module's `transform(df)` is there a context store to
read; the frame it returns is empty (the table's columns, no rows) and marked, so the
compiler writes a `join` step that reads the table when the pipeline runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from hakiri.errors import HakiriError

__all__ = ["compiling_tables", "context_table"]

# The compile in progress: table name -> an empty frame of its columns.
_TABLES: ContextVar[Callable[[str], Any] | None] = ContextVar("hakiri_compile_tables", default=None)


def context_table(name: str) -> Any:
    """The context store's table `name` as a DataFrame, to join with: df.join(context_table(
    "customers"), "customer_id", "left"). Usable only inside transform(df) under `hakiri
    compile`."""
    tables = _TABLES.get()
    if tables is None:
        raise HakiriError(
            "context_table() is only available while `hakiri compile` runs transform(df)",
            "compile the module: hakiri compile transforms/<id>.py",
        )
    if not isinstance(name, str) or not name:
        raise HakiriError(
            "context_table() takes the table's name", 'e.g. context_table("customers")'
        )
    return tables(name)


def compiling_tables(tables: Callable[[str], Any] | None) -> Any:
    """Make `tables` what context_table() answers with; returns the token to reset it."""
    return _TABLES.set(tables)


def reset_tables(token: Any) -> None:
    _TABLES.reset(token)
