"""The `load` table of each load mode, as the fault campaign and the suite's state machine
write it into their projects (keys `id`, watermark `seq`, window `day`)."""

from __future__ import annotations

__all__ = ["load_toml"]


def load_toml(mode: str, source: str = "files") -> str:
    """The inline TOML table of `mode`'s load settings. A table source's scd2 closes the keys
    its rows lose (a table is a full snapshot); files are not, so their scd2 ignores deletes."""
    scd2_deletes = "max_delete_fraction = 1.0" if source == "table" else 'deletes = "ignore"'
    return {
        "append": '{ mode = "append" }',
        "upsert": '{ mode = "upsert", upsert_key = ["id"] }',
        "truncate": '{ mode = "truncate" }',
        "blue_green": '{ mode = "blue_green" }',
        "incremental_watermark": '{ mode = "incremental_watermark", watermark_column = "seq" }',
        "scd2": f'{{ mode = "scd2", key = ["id"], {scd2_deletes} }}',
        "replace_window": '{ mode = "replace_window", window_column = "day" }',
    }[mode]
