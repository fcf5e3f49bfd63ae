"""truncate: every batch is the whole source and replaces the target's rows in one commit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hakiri.spec.modes.base import LoadStrategy, ModeFinding, Written, register_mode

if TYPE_CHECKING:
    from hakiri.spec.modes.base import LoadSpec, ModeWriter, PipelineSpec


class Truncate(LoadStrategy):
    name = "truncate"
    summary = "replace every row of the target with the source's (readers wait)"
    needs = ("replace",)
    snapshot = True
    empties_target_as = "truncate"
    destructive = True

    def findings(self, spec: PipelineSpec) -> list[ModeFinding]:
        if len(spec.tables) != 1:
            return []
        return [
            ModeFinding(
                ("load", "mode"),
                "truncate on a one-source, one-table pipeline leaves readers an empty table "
                "while it reloads",
                'blue_green replaces the table atomically: set load.mode = "blue_green" (keep '
                "truncate if that is intended)",
            )
        ]

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        return writer.replace()


register_mode(Truncate())
