"""Refusals every destination makes before it writes anything: a mode the destination
cannot write (it lacks a write primitive the mode needs), and the empty-source guard.

Shared by every destination kind, so a load mode is refused with the same words whichever
store the rows were going to; the words are the mode's (`spec.modes`).
"""

from __future__ import annotations

from hakiri.destinations.capabilities import Capabilities
from hakiri.errors import EmptySource, LoadError
from hakiri.spec.load import LoadSpec

__all__ = ["check_empty_source", "check_mode_available"]


def check_mode_available(load: LoadSpec, capabilities: Capabilities) -> None:
    """A mode the destination has no primitives for refuses (plan and apply refuse it
    first; this is the last line, for a destination used directly)."""
    load.strategy.refuse(load)
    if not capabilities.can_write(load.strategy):
        raise LoadError(
            f"load mode {load.mode} is not supported by the {capabilities.kind} destination",
            "pick another load mode (docs/load-modes.md lists each destination's)",
        )


def check_empty_source(load: LoadSpec, rows: int, qualified: str) -> None:
    """A mode that replaces every row of the target refuses to empty it because the source
    produced nothing."""
    verb = load.strategy.empties_target_as
    if verb and rows == 0 and load.fail_on_empty_source:
        raise EmptySource(
            f"the source produced 0 rows; refusing to {verb} {qualified} (load mode {load.mode})",
            "if an empty target is what you want, set `fail_on_empty_source = false` in [pipeline.load]",
        )
