"""Pre- and post-load hooks.

Unsafe hooks are refused when the manifest is loaded, so `hakiri validate`
reports them: a `sql` statement the admin-SQL guard refuses, a `webhook` URL the
SSRF guard refuses (checked without DNS here; resolved and checked again when it
is called), and every `custom_function` hook. The guards live in `hakiri.guards`;
`hakiri.hooks` checks again just before acting.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from hakiri.errors import UnsafeHook
from hakiri.guards.urls import check_webhook_url
from hakiri.spec.base import Name, SpecModel
from hakiri.spec.interpolate import MissingVariable, expand


def _refused(exc: UnsafeHook) -> PydanticCustomError:
    # `hint` rides along in the context for the diagnostics to show.
    return PydanticCustomError("unsafe_hook", "{reason}", {"reason": exc.reason, "hint": exc.hint})


class SqlHook(SpecModel):
    type: Literal["sql"]
    statement: str = Field(
        min_length=1, description="One admin statement (ANALYZE, REFRESH, VACUUM, SET, ...)."
    )

    @field_validator("statement")
    @classmethod
    def _admin_statement_only(cls, statement: str) -> str:
        from hakiri.guards.sql import check_admin_sql  # sqlglot: only when a sql hook exists

        try:
            check_admin_sql(statement)
        except UnsafeHook as exc:
            raise _refused(exc) from None
        return statement


class RefreshMatViewHook(SpecModel):
    type: Literal["refresh_mat_view"]
    view: Name = Field(description="Materialized view to refresh, optionally 'schema.view'.")
    concurrently: bool = False


class WebhookHook(SpecModel):
    type: Literal["webhook"]
    url: str = Field(description="https URL that receives a POST with the run summary.")
    timeout_seconds: float = Field(5.0, gt=0, le=60)

    @field_validator("url")
    @classmethod
    def _public_https_only(cls, url: str) -> str:
        try:
            check_webhook_url(_with_placeholders_filled(url))
        except UnsafeHook as exc:
            raise _refused(exc) from None
        return url


def _with_placeholders_filled(url: str) -> str:
    """`${VAR}` is expanded only when the hook runs (and checked again then); until then each
    placeholder stands for its default, or for a neutral host-name word."""
    filled: dict[str, str] = {}
    while True:
        try:
            return expand(url, filled)
        except MissingVariable as missing:
            filled[missing.variable] = "placeholder"


class CustomFunctionHook(SpecModel):
    type: Literal["custom_function"]
    function: str = Field(min_length=1)

    @field_validator("type")
    @classmethod
    def _not_supported_yet(cls, kind: str) -> str:
        raise PydanticCustomError(
            "unsupported_hook",
            "custom_function hooks are not supported yet",
            {"hint": "use a sql or webhook hook"},
        )


Hook = Annotated[
    SqlHook | RefreshMatViewHook | WebhookHook | CustomFunctionHook,
    Field(discriminator="type"),
]


class HooksSpec(SpecModel):
    pre: list[Hook] = Field(default_factory=list, description="Run before the load.")
    post: list[Hook] = Field(
        default_factory=list,
        description="Run only after a successful load (blue_green: before the swap).",
    )
