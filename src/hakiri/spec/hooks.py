"""Pre- and post-load hooks. Safety checks (SQL guard, SSRF guard) live in `hakiri.hooks`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hakiri.spec.base import Name, SpecModel


class SqlHook(SpecModel):
    type: Literal["sql"]
    statement: str = Field(
        min_length=1, description="One admin statement (ANALYZE, REFRESH, VACUUM, SET, ...)."
    )


class RefreshMatViewHook(SpecModel):
    type: Literal["refresh_mat_view"]
    view: Name = Field(description="Materialized view to refresh, optionally 'schema.view'.")
    concurrently: bool = False


class WebhookHook(SpecModel):
    type: Literal["webhook"]
    url: str = Field(
        pattern=r"^https://", description="https URL that receives a POST with the run summary."
    )
    timeout_seconds: float = Field(5.0, gt=0, le=60)


class CustomFunctionHook(SpecModel):
    type: Literal["custom_function"]
    function: str = Field(min_length=1)


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
