"""Running a slot of hooks (pre or post) in the order the manifest lists them.

SQL-like hooks (`sql`, `refresh_mat_view`) run on a PostgreSQL connection: in
their own autocommit session by default, or inside the caller's transaction
(blue_green's post hooks run inside the swap transaction, before the rename).
Every statement goes through the SQL guard again here, even though the manifest
was checked when it was loaded. Webhooks POST the run summary through the SSRF
guard. `custom_function` hooks never get this far: the manifest refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from psycopg import sql

from hakiri.errors import HookError
from hakiri.guards.sql import check_admin_sql
from hakiri.hooks.webhook import post_json
from hakiri.spec.base import split_qualified
from hakiri.spec.hooks import CustomFunctionHook, Hook, RefreshMatViewHook, SqlHook, WebhookHook
from hakiri.spec.interpolate import expand

if TYPE_CHECKING:
    import psycopg

__all__ = ["hook_label", "is_sql_like", "run_hooks", "run_sql_hooks", "sql_hooks"]

SqlLikeHook = SqlHook | RefreshMatViewHook


def hook_label(hook: Hook) -> str:
    if isinstance(hook, SqlHook):
        return f"sql hook `{_shorten(hook.statement)}`"
    if isinstance(hook, RefreshMatViewHook):
        return f"refresh_mat_view hook on {hook.view}"
    if isinstance(hook, WebhookHook):  # the host only: paths and queries often carry tokens
        return f"webhook hook to {urlsplit(hook.url).hostname or 'its host'}"
    return f"{hook.type} hook"


def is_sql_like(hook: Hook) -> bool:
    """Runs on the destination's SQL engine (as opposed to a webhook)."""
    return isinstance(hook, SqlHook | RefreshMatViewHook)


def sql_hooks(hooks: Sequence[Hook]) -> list[SqlLikeHook]:
    return [h for h in hooks if isinstance(h, SqlHook | RefreshMatViewHook)]


def run_hooks(
    slot: str,
    hooks: Sequence[Hook],
    *,
    run_sql: Callable[[Sequence[SqlLikeHook]], None],
    summary: Mapping[str, Any],
    env: Mapping[str, str],
) -> None:
    """Run every hook of a slot in order; the first failure stops the slot with a HookError.

    `run_sql` executes SQL-like hooks on the destination (its own session);
    webhooks receive `summary` plus the slot name as JSON, at their URL with `${VAR}`
    placeholders filled from `env`.
    """
    for hook in hooks:
        if isinstance(hook, SqlHook | RefreshMatViewHook):
            run_sql([hook])
        elif isinstance(hook, WebhookHook):
            try:
                post_json(
                    expand(hook.url, env),
                    {**summary, "hook": slot},
                    timeout_seconds=hook.timeout_seconds,
                )
            except HookError as exc:
                raise type(exc)(f"{slot} {hook_label(hook)}: {exc.reason}", exc.hint) from exc
        elif isinstance(hook, CustomFunctionHook):
            # The manifest refuses these already; never skip one silently.
            raise HookError(
                f"{slot} custom_function hook `{hook.function}`: custom_function hooks are not supported yet",
                "use a sql or webhook hook",
            )


def run_sql_hooks(
    conn: psycopg.Connection[Any],
    slot: str,
    hooks: Sequence[SqlLikeHook],
    *,
    default_schema: str,
    in_transaction: bool,
) -> None:
    """Execute SQL-like hooks on `conn` (autocommit, or inside its open transaction)."""
    import psycopg

    if hooks:
        # Unqualified names in hook SQL resolve in the target's schema first (local to the
        # transaction when inside one; this session only otherwise).
        conn.execute(
            "SELECT set_config('search_path', %s, %s)",
            (
                sql.SQL("{}, public").format(sql.Identifier(default_schema)).as_string(conn),
                in_transaction,
            ),
        )
    for hook in hooks:
        statement, needs_autocommit = _statement(hook, default_schema)
        if in_transaction and needs_autocommit:
            raise HookError(
                f"{slot} {hook_label(hook)} cannot run inside a transaction block",
                "blue_green runs post hooks inside its swap transaction: move VACUUM to a separate "
                "pipeline or a schedule, or use ANALYZE",
            )
        try:
            conn.execute(statement)
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise HookError(
                f"{slot} {hook_label(hook)} failed: {first}",
                "fix the hook statement (run it by hand with psql to see the whole error); "
                + (
                    "nothing was loaded"
                    if slot == "pre"
                    else "the rows were loaded before the post hook ran"
                    if not in_transaction
                    else "the load was rolled back"
                ),
            ) from exc


def _statement(hook: SqlLikeHook, default_schema: str) -> tuple[sql.Composable, bool]:
    if isinstance(hook, SqlHook):
        checked = check_admin_sql(hook.statement)  # again, at run time
        return sql.SQL(checked.sql), checked.needs_autocommit  # type: ignore[arg-type]
    schema, view = split_qualified(hook.view)
    return (
        sql.SQL("REFRESH MATERIALIZED VIEW {}{}").format(
            sql.SQL("CONCURRENTLY ") if hook.concurrently else sql.SQL(""),
            sql.Identifier(schema or default_schema, view),
        ),
        False,
    )


def _shorten(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
