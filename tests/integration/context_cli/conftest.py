"""A tmp project with a context store of small Delta tables, written with delta-rs (no Spark, no PostgreSQL)."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake
from typer.testing import CliRunner, Result

from hakiri.cli.main import app

STORE = ".hakiri/context"


class ContextProject:
    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")

    def delta(
        self,
        table: str,
        rows: pa.Table,
        *,
        mode: str = "append",
        store: str = STORE,
        metadata: dict[str, str] | None = None,
    ) -> Path:
        location = self.root / store / table
        write_deltalake(
            location,
            rows,
            mode=mode,  # type: ignore[arg-type]
            commit_properties=CommitProperties(custom_metadata=metadata) if metadata else None,
        )
        return location

    def cli(self, *args: str) -> Result:
        return CliRunner().invoke(
            app, ["context", *args, "--project", str(self.root)], catch_exceptions=False
        )

    def json(self, *args: str) -> Any:
        result = self.cli(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)


def orders(*ids: int) -> pa.Table:
    """Rows of every kind `show` must turn into JSON: decimal, timestamp, null, bytes."""
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "amount": pa.array([Decimal(f"{i}.50") for i in ids], pa.decimal128(10, 2)),
            "at": pa.array(
                [datetime(2024, 1, i % 28 + 1, 12, tzinfo=UTC) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "note": pa.array([None if i % 2 else f"n{i}" for i in ids], pa.string()),
            "raw": pa.array([b"\x00\x01" for _ in ids], pa.binary()),
        }
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ContextProject:
    monkeypatch.chdir(tmp_path)
    p = ContextProject(tmp_path)
    p.write(
        "hakiri.toml",
        """
        [project]
        name = "context-cli"
        """,
    )
    return p
