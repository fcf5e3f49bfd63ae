"""replace_window: each batch replaces a window of the target (the values of `window_column`
the batch has, or its cursor range), in one commit: a re-loaded window is replaced, not
doubled, and a range the source emptied is emptied."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hakiri.spec.modes.base import LoadStrategy, ModeOptionError, Written, register_mode

if TYPE_CHECKING:
    from hakiri.spec.modes.base import LoadSpec, ModeWriter, PipelineSpec


class ReplaceWindow(LoadStrategy):
    name = "replace_window"
    summary = "replace the batch's window of the target"
    needs = ("replace_window",)
    required = ("window_column", "replace_window needs the column whose window each batch replaces")
    options = ("window_column", "window")
    rewindable = True
    destructive = True

    def compares_with_target(self, load: LoadSpec) -> bool:
        return True

    def replaces_cursor_range(self, load: LoadSpec) -> bool:
        return load.window == "range"

    def check_pipeline(self, spec: PipelineSpec) -> None:
        load = spec.load
        if load.window != "range":
            return
        cursors = spec.cursor_columns()
        problem = None
        if spec.source.connector == "files":
            problem = "a files source has no cursor range"
        elif len(cursors) < len(spec.tables) or set(cursors) != {load.window_column}:
            problem = (
                f"every table's cursor (`incremental`) must be the window column "
                f"{load.window_column!r}"
            )
        if problem:
            raise ModeOptionError(
                f"window = 'range' replaces the cursor range of each batch: {problem}",
                f'set incremental = "{load.window_column}", or use window = "values" '
                "(the window is the values the batch has)",
                at="load.window",
            )

    def describe(self, load: LoadSpec) -> str:
        return f"{self.name} on {load.window_column} ({load.window})"

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        return writer.replace_window()


register_mode(ReplaceWindow())
