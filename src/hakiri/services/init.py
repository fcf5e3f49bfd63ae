"""`hakiri init [DIR]`: scaffold a small project that validates and runs as it is."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from hakiri.errors import EditError
from hakiri.services.schemas import export as export_schemas
from hakiri.spec.edit import render_json
from hakiri.spec.loader import PIPELINES_DIR, PROJECT_FILE, display_path, load_project

_PROJECT_TOML = """\
# hakiri project. Pipelines live below as [[pipeline]] blocks or in pipelines/*.toml|json.
# `hakiri validate` checks them; `hakiri plan` shows what would change.

[project]
name = "{name}"
version = "0.1.0"

[context]
# The embedded Delta Lake store: pipelines without a destination land here.
path = ".hakiri/context"
default_destination = "context"

[spark]
master = "local[*]"

# A PostgreSQL target, with the password from the environment:
# [connections.warehouse]
# type = "postgres"
# url = "postgresql://loader:${{WAREHOUSE_PASSWORD}}@db.internal:5432/analytics"
"""

_SAMPLE_CSV = """\
id,name,signed_up_at
1,Ada,2026-01-05T09:30:00Z
2,Grace,2026-02-11T14:02:00Z
3,Edsger,2026-03-20T08:45:00Z
"""

_GITIGNORE = """\
# hakiri's local state: the catalog and the context store
.hakiri/
"""


def init_project(
    directory: Path, name: str | None = None, schemas: Mapping[str, str] | None = None
) -> list[Path]:
    """Create the project files in `directory`; refuses to overwrite an existing project.
    `schemas`: schema files rendered above this layer (serve's OpenAPI document)."""
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / PROJECT_FILE).exists():
        raise EditError(
            f"{display_path(directory / PROJECT_FILE)} already exists",
            "run init in an empty directory",
        )
    project_name = (
        name
        or re.sub(r"[^a-z0-9_-]+", "-", directory.resolve().name.lower()).strip("-")
        or "hakiri-project"
    )
    pipeline = {
        "id": "users",
        "description": "Sample users from a CSV file into the local context store.",
        "source": {"connector": "files", "config": {"path": "data/users/*.csv", "format": "csv"}},
        "tables": ["users"],
        "schedule": "every 1h",
        "load": {"mode": "upsert", "upsert_key": ["id"]},
        "validate": {"rules": [{"type": "not_null", "column": "id", "on_fail": "abort"}]},
    }
    files = {
        directory / PROJECT_FILE: _PROJECT_TOML.format(name=project_name),
        directory / PIPELINES_DIR / "users.json": render_json(pipeline),
        directory / "data" / "users" / "users.csv": _SAMPLE_CSV,
    }
    gitignore = directory / ".gitignore"
    if not gitignore.exists():
        files[gitignore] = _GITIGNORE
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    written = [*files, *export_schemas(directory / "schemas", schemas)]
    load_project(directory)  # the scaffold must validate; a failure here is a bug worth surfacing
    return written
