"""Output helpers shared by the commands: JSON on stdout, human text on stderr.

rich honours NO_COLOR, and colour/markup is dropped when stderr is not a terminal.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from hakiri.errors import Diagnostic, HakiriError, ManifestError

# emoji=False: rule ids like `regex:email:` must print as written, not as ✉.
# Not a terminal (cron logs, CI, pipes): tables get 160 columns instead of rich's 80.
err = Console(
    stderr=True,
    highlight=False,
    soft_wrap=True,
    emoji=False,
    width=None if sys.stderr.isatty() else 160,
)

ProjectDir = Annotated[
    Path,
    typer.Option(
        "--project",
        "-p",
        envvar="HAKIRI_PROJECT_DIR",
        help="Project directory (holds hakiri.toml).",
        file_okay=False,
        show_default=False,
    ),
]
JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print a JSON document on stdout instead of text.")
]


def emit_json(document: Any) -> None:
    typer.echo(json.dumps(document, indent=2, default=str))


def diagnostic(d: Diagnostic) -> None:
    style = "red" if d.severity == "error" else "yellow"
    where = f" ({d.where})" if d.where else ""
    err.print(f"[{style}]{d.severity}:[/{style}] {one_line(d.message)}{one_line(where)}")
    if d.hint:
        err.print(f"  [dim]hint:[/dim] {one_line(d.hint)}")


def error(exc: HakiriError) -> None:
    if isinstance(exc, ManifestError):
        for d in exc.diagnostics:
            diagnostic(d)
    err.print(f"[red]error:[/red] {one_line(exc.reason)}")
    if exc.hint:
        err.print(f"  [dim]hint:[/dim] {one_line(exc.hint)}")


def one_line(text: str) -> str:
    """`escape`d, with control and format characters written as escapes: a key or value
    from a manifest (a newline, an ANSI escape, a right-to-left override) can neither break
    an error over several lines nor restyle the terminal."""
    return escape("".join(_visible(ch) for ch in text))


def _visible(ch: str) -> str:
    if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp"):
        return ch
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or (
        f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"
    )


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)
