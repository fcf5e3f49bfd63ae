"""Refusals every destination makes before it writes anything: cdc_mirror's gate and the empty-source guard.

Shared by the PostgreSQL and the context (Delta Lake) destinations, so a load
mode is refused with the same words whichever store the rows were going to.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hakiri.errors import EmptySource, LoadError
from hakiri.spec.load import LoadMode, LoadSpec

__all__ = ["CDC_DOCS", "STREAMING_ENV", "check_cdc_mirror", "check_empty_source"]

STREAMING_ENV = "HAKIRI_STREAMING_ENABLED"
CDC_DOCS = "docs/cdc.md"
# Modes that replace every row of the target, and the verb the empty-source guard refuses with.
_REPLACING_MODES = {LoadMode.TRUNCATE: "truncate", LoadMode.BLUE_GREEN: "replace"}


def check_cdc_mirror(load: LoadSpec, env: Mapping[str, str] = os.environ) -> None:
    """cdc_mirror is gated and never silently does nothing."""
    if load.mode is not LoadMode.CDC_MIRROR:
        return
    if env.get(STREAMING_ENV, "").strip().lower() != "true":
        raise LoadError(
            "load mode cdc_mirror: streaming disabled",
            f"cdc_mirror runs on the streaming runtime: set {STREAMING_ENV}=true to enable it (see {CDC_DOCS})",
        )
    raise LoadError(
        f"load mode cdc_mirror: Debezium connector not configured for cdc_source {load.cdc_source!r}",
        f"configure a Debezium connector for that change stream, see {CDC_DOCS}",
    )


def check_empty_source(load: LoadSpec, rows: int, qualified: str) -> None:
    """truncate/blue_green refuse to empty the target because the source produced nothing."""
    verb = _REPLACING_MODES.get(load.mode)
    if verb and rows == 0 and load.fail_on_empty_source:
        raise EmptySource(
            f"the source produced 0 rows; refusing to {verb} {qualified} (load mode {load.mode.value})",
            "if an empty target is what you want, set `fail_on_empty_source = false` in [pipeline.load]",
        )
