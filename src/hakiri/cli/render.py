"""Output helpers shared by the commands, and the rule they follow (Terraform, kubectl, psql):
what a command produces (tables, plans, listings, the result summary, `--json`'s document)
goes to stdout through `out`, so it can be piped and grepped; progress, notes, warnings,
hints and errors go to stderr through `err`.

rich honours NO_COLOR, and colour/markup is dropped when the stream is not a terminal.
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
# Results, not a terminal (a pipe, a file): no width limit, so a table's row stays one line
# that grep finds whole (rich would wrap it at 80 columns). soft_wrap: text is never wrapped.
out = Console(
    highlight=False,
    soft_wrap=True,
    emoji=False,
    width=None if sys.stdout.isatty() else 100_000,
)
# Talk, not a terminal (cron logs, CI): tables get 160 columns instead of rich's 80.
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
# Whether the running command was asked for --json, and printed its document yet: the CLI's
# error boundary (cli/main.py) prints an error document then, so stdout always holds one.
_json = {"requested": False, "emitted": False}


def remember_json(value: bool) -> bool:
    """Note that the command was asked for JSON (`--json`, or `--format json`)."""
    if value:
        _json["requested"] = True
    return value


JsonFlag = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON document on stdout instead of text (also on error).",
        callback=remember_json,
    ),
]


def reset_json() -> None:
    _json.update(requested=False, emitted=False)


def mark_json_emitted() -> None:
    """The command has started writing its JSON document itself (streamed, not emit_json)."""
    _json["emitted"] = True


def emit_json(document: Any) -> None:
    _json["emitted"] = True
    typer.echo(json.dumps(document, indent=2, default=str))


def emit_json_error(message: str, hint: str | None, kind: str, **more: Any) -> None:
    """`{"error": {"message", "hint", "kind", …}}` on stdout, when --json was asked for and the
    command failed before printing its document."""
    if _json["requested"] and not _json["emitted"]:
        emit_json({"error": {"message": message, "hint": hint, "kind": kind, **more}})


def diagnostic(d: Diagnostic) -> None:
    style = "red" if d.severity == "error" else "yellow"
    where = f" ({d.where})" if d.where else ""
    err.print(f"[{style}]{d.severity}:[/{style}] {one_line(d.message)}{one_line(where)}")
    if d.hint:
        err.print(f"  [dim]hint:[/dim] {one_line(d.hint)}")


def error(exc: HakiriError) -> None:
    """The error on stderr, and under --json also as the command's JSON document."""
    if isinstance(exc, ManifestError):
        for d in exc.diagnostics:
            diagnostic(d)
    err.print(f"[red]error:[/red] {one_line(exc.reason)}")
    if exc.hint:
        err.print(f"  [dim]hint:[/dim] {one_line(exc.hint)}")
    more = (
        {"diagnostics": [d.to_json() for d in exc.diagnostics]}
        if isinstance(exc, ManifestError)
        else {}
    )
    emit_json_error(exc.reason, exc.hint, type(exc).__name__, **more)


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
