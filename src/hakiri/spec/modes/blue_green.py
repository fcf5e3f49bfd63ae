"""blue_green: every batch is the whole source, loaded beside the target and swapped in
atomically; the SQL post hooks run inside the swap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hakiri.spec.modes.base import LoadStrategy, Written, register_mode

if TYPE_CHECKING:
    from hakiri.spec.modes.base import LoadSpec, ModeWriter


class BlueGreen(LoadStrategy):
    name = "blue_green"
    summary = "load beside the target and swap it in atomically"
    needs = ("swap",)
    snapshot = True
    empties_target_as = "replace"
    destructive = True
    post_hook_in_commit = True

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        return writer.swap()


register_mode(BlueGreen())
