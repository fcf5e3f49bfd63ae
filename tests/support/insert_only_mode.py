"""A load mode written outside hakiri, to show what adding one takes: this module, and the
write primitive it uses (`merge`, which every destination offers). No planner, engine or
destination file knows its name.

insert_only_new_keys: rows whose key is not in the target yet are inserted; a row whose key
is there already is skipped, so the first value a key had is kept (an immutable registry, a
first-seen table). Loading a batch again changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hakiri.spec.modes import LoadStrategy, ModeWriter, Written, register_mode, unregister_mode
from hakiri.spec.modes.base import LoadSpec

NAME = "insert_only_new_keys"


class InsertOnlyNewKeys(LoadStrategy):
    name = NAME
    summary = "insert rows whose key the target lacks; keep the rows already there"
    needs = ("merge",)
    required = ("upsert_key", "insert_only_new_keys needs the key columns that identify a row")
    options = ("upsert_key",)
    rewindable = True

    def merge_key(self, load: LoadSpec) -> list[str] | None:
        return list(load.upsert_key) if load.upsert_key else None

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        return writer.merge(self.merge_key(load) or [], update=False)


@contextmanager
def insert_only_new_keys() -> Iterator[None]:
    """The mode registered for the block's length."""
    register_mode(InsertOnlyNewKeys())
    try:
        yield
    finally:
        unregister_mode(NAME)
