"""Resolve where a pipeline reads and writes: named connections, URLs, target names.

Pure functions over the models plus an environment mapping; `${VAR}`s are expanded
here, at the point of use, and nowhere earlier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hakiri.errors import HakiriError
from hakiri.spec.interpolate import MissingVariable, expand
from hakiri.spec.pipeline import (
    ContextDestination,
    PipelineSpec,
    PostgresDestination,
    PostgresDestinationConfig,
    PostgresSourceConfig,
    TableSpec,
)
from hakiri.spec.project import PostgresConnection, ProjectFile


def postgres_url(
    settings: ProjectFile,
    config: PostgresSourceConfig | PostgresDestinationConfig,
    env: Mapping[str, str],
) -> str:
    """The libpq URL for a source or destination config (named connection or inline url), expanded."""
    try:
        if config.url is not None:
            return expand(config.url, env)
        connection = settings.connections[config.connection or ""]
        return connection_url(connection, env)
    except MissingVariable as exc:
        raise HakiriError(
            f"environment variable `{exc.variable}` is not set",
            f"export {exc.variable}=... before running",
        ) from None


def connection_url(connection: PostgresConnection, env: Mapping[str, str]) -> str:
    if connection.url is not None:
        return expand(connection.url, env)
    user = quote(expand(connection.user or "", env), safe="")
    password = expand(connection.password or "", env)
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = expand(connection.host or "", env)
    return f"postgresql://{auth}{host}:{connection.port}/{quote(expand(connection.database or '', env), safe='')}"


@dataclass(frozen=True)
class Target:
    """Where one table of a pipeline lands."""

    kind: str  # 'context' | 'postgres'
    table: str  # unqualified target table name
    schema: str | None  # postgres schema; None for the context store
    connection: str | None  # postgres: the named connection (None for an inline url)

    @property
    def display(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else f"context:{self.table}"

    @property
    def in_context_store(self) -> bool:
        """Whether it lands in the context store (views and sync read only those)."""
        return self.kind == "context"


def project_store(project_root: Path, settings: ProjectFile) -> Path:
    """The project's own context store (`[context] path`, resolved): the one views read and
    `[sync]` publishes."""
    return (project_root / settings.context.path).resolve()


def lands_in_store(project_root: Path, settings: ProjectFile, spec: PipelineSpec) -> bool:
    """Whether the pipeline loads into the project's own context store."""
    if destination_kind(settings, spec) != "context":
        return False
    store = project_store(project_root, settings)
    return context_store_path(project_root, settings, spec).resolve() == store


def destination_kind(settings: ProjectFile, spec: PipelineSpec) -> str:
    if spec.destination is not None:
        return spec.destination.connector
    return "context" if settings.context.default_destination == "context" else "postgres"


def destination_document(name: str) -> dict[str, Any]:
    """The manifest's `destination` table for a destination named as `default_destination`
    names one: 'context', or a connection's name."""
    if name == "context":
        return {"connector": "context"}
    return {"connector": "postgres", "config": {"connection": name}}


def target_of(settings: ProjectFile, spec: PipelineSpec, table: TableSpec) -> Target:
    name = table.target or table.name
    destination = spec.destination
    if isinstance(destination, PostgresDestination):
        return Target(
            "postgres", name, destination.config.schema_name, destination.config.connection
        )
    if destination is None and settings.context.default_destination != "context":
        return Target("postgres", name, "public", settings.context.default_destination)
    assert destination is None or isinstance(destination, ContextDestination)
    return Target("context", name, None, None)


def destination_url(settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]) -> str:
    """libpq URL of a pipeline's PostgreSQL destination (named by the pipeline or by default_destination)."""
    destination = spec.destination
    if isinstance(destination, PostgresDestination):
        return postgres_url(settings, destination.config, env)
    name = settings.context.default_destination
    try:
        return connection_url(settings.connections[name], env)
    except MissingVariable as exc:
        raise HakiriError(
            f"environment variable `{exc.variable}` is not set",
            f"export {exc.variable}=... before running",
        ) from None


def lineage_place(url: str) -> tuple[str, str]:
    """(namespace, database) of a PostgreSQL URL as OpenLineage names them
    (https://openlineage.io/docs/spec/naming): `postgres://host:port` and the database;
    never the user or the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception:  # a URL psycopg cannot read fails where it connects, not here
        parts = {}
    host = str(parts.get("host") or "localhost").split(",")[0]
    port = str(parts.get("port") or "5432").split(",")[0]
    if host.startswith("/"):  # a Unix socket's directory: the server is this machine's
        host = "localhost"
    return f"postgres://{host}:{port}", str(parts.get("dbname") or parts.get("user") or "postgres")


def context_store_path(project_root: Path, settings: ProjectFile, spec: PipelineSpec) -> Path:
    """Where a pipeline's context-store tables live: its destination's path, else [context] path."""
    override = (
        spec.destination.config.path if isinstance(spec.destination, ContextDestination) else None
    )
    return project_root / (override or settings.context.path)
