"""The load modes, one strategy per module (see `base.py`); importing this package registers
the built-in ones."""

from hakiri.spec.modes import (  # noqa: F401  (each registers its mode)
    append,
    blue_green,
    cdc_mirror,
    incremental_watermark,
    replace_window,
    scd2,
    truncate,
    upsert,
)
from hakiri.spec.modes.base import (
    WRITE_PRIMITIVES,
    LoadStrategy,
    ModeFinding,
    ModeOptionError,
    ModeWriter,
    Written,
    register_mode,
    registered_modes,
    strategy_named,
    strategy_of,
    unregister_mode,
)

__all__ = [
    "WRITE_PRIMITIVES",
    "LoadStrategy",
    "ModeFinding",
    "ModeOptionError",
    "ModeWriter",
    "Written",
    "register_mode",
    "registered_modes",
    "strategy_named",
    "strategy_of",
    "unregister_mode",
]
