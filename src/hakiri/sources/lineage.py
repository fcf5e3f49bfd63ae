"""What a pipeline's source tables are called in OpenLineage events
(https://openlineage.io/docs/spec/naming): (namespace, name) pairs, without credentials.

    postgres (and cdc)  postgres://host:port       database.schema.table
    files               file                       the absolute path or glob
    github              https://api.github.com     owner/repo/table (one per repository)
    rest                the base URL               the endpoint's path under it (one per
                                                   for_each entry)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from hakiri.spec.connections import lineage_place, postgres_url
from hakiri.spec.pipeline import (
    FilesConfig,
    GithubConfig,
    PipelineSpec,
    PostgresSourceConfig,
    TableSpec,
)
from hakiri.spec.project import ProjectFile
from hakiri.spec.rest import RestConfig

__all__ = ["source_datasets"]


def source_datasets(
    root: Path, settings: ProjectFile, spec: PipelineSpec, table: TableSpec, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    """The datasets one table of the pipeline reads."""
    config = spec.source.config
    if isinstance(config, PostgresSourceConfig):
        namespace, database = lineage_place(postgres_url(settings, config, env))
        return [(namespace, f"{database}.{config.schema_name}.{table.name}")]
    if isinstance(config, FilesConfig):
        return [("file", str((root / (table.path or config.path)).absolute()))]
    if isinstance(config, GithubConfig):
        repos = config.repos or ([config.repo] if config.repo else [])
        return [(_web_namespace(config.base_url), f"{repo}/{table.name}") for repo in repos]
    if isinstance(config, RestConfig):
        base = urlsplit(config.base_url)
        endpoint = config.endpoints.get(table.name)
        if endpoint is None:  # the source says so when it reads
            return []
        return [
            (_web_namespace(config.base_url), f"{base.path.rstrip('/')}/{path.lstrip('/')}")
            for path, _ in endpoint.paths()
        ]
    return []


def _web_namespace(url: str) -> str:
    """scheme://host[:port] of an HTTP API, without a user or password."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"
