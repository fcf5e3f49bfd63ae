"""The worked example of docs/views.md, written out as a project: the docs and the tests that
plan and apply views use the same files, so the example cannot drift from what works."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "views.md"

# A file of the example: a line "`path`:", a blank line, then its fenced block.
_FILE = re.compile(r"^`([\w./-]+)`:\n\n```(?:toml|json)\n(.*?)^```", re.M | re.S)


def example_files() -> dict[str, str]:
    """Path in the project -> text, in the order the doc shows them."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## A worked example") : text.index("## What a view's SQL may do")]
    return {path: body for path, body in _FILE.findall(section)}


def example_output(command: str) -> str:
    """The output the doc shows after `$ <command>` (up to the end of its block)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"$ {command}\n") + len(f"$ {command}\n")
    return text[start : text.index("```", start)]


def write_example(root: Path) -> None:
    """The example's manifests under `root`, and a few rows for each pipeline's files."""
    for path, body in example_files().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    orders = root / "data" / "orders" / "2026-11-01.csv"
    orders.parent.mkdir(parents=True, exist_ok=True)
    orders.write_text("id,customer_id,total\n1,10,80.00\n2,10,45.50\n3,11,12.00\n")
    customers = root / "data" / "customers" / "all.csv"
    customers.parent.mkdir(parents=True, exist_ok=True)
    customers.write_text("id,email\n10,ada@example.com\n11,grace@example.com\n")
