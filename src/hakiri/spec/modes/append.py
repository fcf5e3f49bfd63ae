"""append: the staged rows are added to the target, as they come."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hakiri.spec.modes.base import LoadStrategy, Written, register_mode

if TYPE_CHECKING:
    from hakiri.spec.modes.base import LoadSpec, ModeWriter


class Append(LoadStrategy):
    name = "append"
    summary = "add the batch's rows to the target"
    needs = ("insert",)
    duplicates_reloaded_rows = True

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        return writer.insert()


register_mode(Append())
