"""`connector = "rest"` and its presets `connector = "github"` and `connector = "shopify"`:
the connectors as the rest of hakiri sees them (`sources.kinds`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from hakiri.sources.base import Source, SourceKind
from hakiri.spec.pipeline import CursorKind, GithubConfig, PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile
from hakiri.spec.rest import RestConfig
from hakiri.spec.shopify import ShopifyConfig

__all__ = ["GITHUB", "REST", "SHOPIFY"]


def _open_rest(
    root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
) -> Source:
    from hakiri.sources.rest.source import RestTableSource

    return RestTableSource.from_spec(root, settings, spec, env)


def _open_github(
    root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
) -> Source:
    from hakiri.sources.rest.github import GithubTableSource

    return GithubTableSource.from_spec(root, settings, spec, env)


def _open_shopify(
    root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
) -> Source:
    from hakiri.sources.rest.shopify import ShopifyTableSource

    return ShopifyTableSource.from_spec(root, settings, spec, env)


def web_namespace(url: str) -> str:
    """scheme://host[:port] of an HTTP API, without a user or password."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


def _rest_lineage(
    root: Path, settings: ProjectFile, spec: PipelineSpec, table: TableSpec, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    config = spec.source.config
    assert isinstance(config, RestConfig)
    endpoint = config.endpoints.get(table.name)
    if endpoint is None:  # the source says so when it reads
        return []
    base = urlsplit(config.base_url).path.rstrip("/")
    # One dataset per path read: an endpoint's, or each of its `for_each` entries'.
    return [
        (web_namespace(config.base_url), f"{base}/{path.lstrip('/')}")
        for path, _ in endpoint.paths()
    ]


def _github_lineage(
    root: Path, settings: ProjectFile, spec: PipelineSpec, table: TableSpec, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    config = spec.source.config
    assert isinstance(config, GithubConfig)
    return [
        (web_namespace(config.base_url), f"{repo}/{table.name}") for repo in config.repositories
    ]


def _shopify_lineage(
    root: Path, settings: ProjectFile, spec: PipelineSpec, table: TableSpec, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    from hakiri.sources.rest.shopify import api_root

    config = spec.source.config
    assert isinstance(config, ShopifyConfig)
    resource = "orders" if table.name == "order_line_items" else table.name
    root_url = api_root(config, env)
    return [(web_namespace(root_url), f"{urlsplit(root_url).path}/{resource}.json")]


REST = SourceKind(
    name="rest",
    config=RestConfig,
    open=_open_rest,
    cursor_kinds=frozenset(CursorKind),
    pages_in_order=True,
    lineage=_rest_lineage,
)

GITHUB = SourceKind(
    name="github",
    config=GithubConfig,
    open=_open_github,
    cursor_kinds=frozenset({CursorKind.TIMESTAMP}),
    pages_in_order=True,
    lineage=_github_lineage,
)

SHOPIFY = SourceKind(
    name="shopify",
    config=ShopifyConfig,
    open=_open_shopify,
    cursor_kinds=frozenset({CursorKind.TIMESTAMP}),
    pages_in_order=True,
    lineage=_shopify_lineage,
)
