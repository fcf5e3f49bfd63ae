"""cdc_mirror: mirror a change stream. Gated: it runs on the streaming runtime, which is not
here yet, so every load refuses with the reason, never silently doing nothing."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hakiri.errors import LoadError
from hakiri.spec.modes.base import LoadStrategy, Written, register_mode

if TYPE_CHECKING:
    from hakiri.spec.modes.base import LoadSpec, ModeWriter

STREAMING_ENV = "HAKIRI_STREAMING_ENABLED"
CDC_DOCS = "docs/cdc.md"


class CdcMirror(LoadStrategy):
    name = "cdc_mirror"
    summary = "mirror a change stream (gated: needs the streaming runtime)"
    required = ("cdc_source", "cdc_mirror needs the change stream to mirror")
    options = ("cdc_source",)

    def refuse(self, load: LoadSpec, env: Mapping[str, str] = os.environ) -> None:
        if env.get(STREAMING_ENV, "").strip().lower() != "true":
            raise LoadError(
                "load mode cdc_mirror: streaming disabled",
                f"cdc_mirror runs on the streaming runtime: set {STREAMING_ENV}=true to enable "
                f"it (see {CDC_DOCS})",
            )
        raise LoadError(
            "load mode cdc_mirror: Debezium connector not configured for cdc_source "
            f"{load.cdc_source!r}",
            f"configure a Debezium connector for that change stream, see {CDC_DOCS}",
        )

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        self.refuse(load)
        raise AssertionError("unreachable: refuse() always raises")


register_mode(CdcMirror())
