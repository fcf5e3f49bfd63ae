"""Refusals every destination makes before it writes anything: a mode that cannot load in
this runtime (cdc_mirror's gate), and the empty-source guard.

Shared by every destination kind, so a load mode is refused with the same words whichever
store the rows were going to; the words are the mode's (`spec.modes`).
"""

from __future__ import annotations

from hakiri.errors import EmptySource
from hakiri.spec.load import LoadSpec
from hakiri.spec.modes.cdc_mirror import CDC_DOCS, STREAMING_ENV

__all__ = ["CDC_DOCS", "STREAMING_ENV", "check_empty_source", "check_mode_available"]


def check_mode_available(load: LoadSpec) -> None:
    """A gated mode (cdc_mirror) refuses, never silently doing nothing."""
    load.strategy.refuse(load)


def check_empty_source(load: LoadSpec, rows: int, qualified: str) -> None:
    """A mode that replaces every row of the target refuses to empty it because the source
    produced nothing."""
    verb = load.strategy.empties_target_as
    if verb and rows == 0 and load.fail_on_empty_source:
        raise EmptySource(
            f"the source produced 0 rows; refusing to {verb} {qualified} (load mode {load.mode})",
            "if an empty target is what you want, set `fail_on_empty_source = false` in [pipeline.load]",
        )
