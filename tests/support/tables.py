"""A project whose pipeline `p` reads a PostgreSQL table `src` and loads `dst`, both in one test schema."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.support.project import Project

UPSERT = '{ mode = "upsert", upsert_key = ["id"] }'


def table_project(
    root: Path,
    pg_url: str,
    schema: str,
    *,
    incremental: str | None = '"updated_at"',
    load: str = UPSERT,
    body: str = "",
    tables: str | None = None,
    source_options: str = "",
    destination: str | None = None,
) -> Project:
    """Pipeline `p`: `<schema>.src` (cursor `incremental`, TOML) loaded into `<schema>.dst`
    by `load`; `body` adds pipeline keys such as a `[pipeline.backfill]` table;
    `source_options` extends the source config (`num_partitions = 3`); `destination`
    replaces the PostgreSQL destination (`{ connector = "context" }`)."""
    project = Project(root, pg_url, schema)
    extra = f", {source_options}" if source_options else ""
    destination = destination or (
        f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
    )
    cursor = f", incremental = {incremental}" if incremental else ""
    tables = tables or f'[{{ name = "src", target = "dst"{cursor} }}]'
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "tables"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}"{extra} }} }}
        tables = {tables}
        destination = {destination}
        load = {load}
        {textwrap.dedent(body).strip().replace(chr(10), chr(10) + " " * 8)}
        """,
    )
    return project


def make_source(project: Project, rows: int = 1_000) -> None:
    """`src`: id, amount = id / 2, updated_at = 2024-01-01 00:00 UTC + id minutes."""
    project.query(
        f'CREATE TABLE "{project.schema}".src '
        "(id bigint PRIMARY KEY, amount numeric(12,2), updated_at timestamptz)"
    )
    project.query(
        f'INSERT INTO "{project.schema}".src '
        "SELECT g, g * 0.5, timestamptz '2024-01-01 00:00+00' + g * interval '1 minute' "
        f"FROM generate_series(1, {rows}) g"
    )


def id_backfill_project(
    root: Path,
    pg_url: str,
    schema: str,
    *,
    chunks: int,
    window: int,
    pipeline: str = "",
    backfill: str = "",
    settings: str = "",
) -> Project:
    """Pipeline `p` appends `src` (chunks * window rows, made here) into `dst` in id windows
    of `window` rows. `pipeline` adds pipeline keys (`schedule = "every 1s"`), `backfill`
    keys of `[pipeline.backfill]`, `settings` project tables after the pipeline."""
    project = table_project(
        root,
        pg_url,
        schema,
        incremental='"id"',
        load='{ mode = "append" }',
        body=f"{textwrap.dedent(pipeline).strip()}\n\n[pipeline.backfill]\nwindow = {window}\n"
        + textwrap.dedent(backfill).strip(),
    )
    if settings:
        path = root / "hakiri.toml"
        path.write_text(path.read_text() + "\n" + textwrap.dedent(settings))
    make_source(project, rows=chunks * window)
    return project
