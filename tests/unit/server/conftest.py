"""serve's HTTP API over a real catalog (SQLite in the tmp dir) and a real project.

Spark is the state's probe, a plain function: the API only asks whether it is up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from hakiri.catalog.store import Catalog
from hakiri.server.api import create_app
from hakiri.server.state import TOKEN_ENV, ServeState
from hakiri.spec.loader import load_project
from tests.support.serve import SHOP_MANIFEST
from tests.unit.conftest import ProjectDir

TOKEN = "s3cret-token"


@pytest.fixture
def catalog_url(project: ProjectDir) -> str:
    return f"sqlite:///{project.root / 'state.sqlite'}"


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Catalog]:
    with Catalog.open(catalog_url, migrate=True) as catalog:
        yield catalog


@pytest.fixture
def make_client(project: ProjectDir, catalog: Catalog) -> Callable[..., TestClient]:
    """A client of the API; `token=None` starts it without HAKIRI_SERVE_TOKEN."""
    project.write("hakiri.toml", SHOP_MANIFEST)

    def make(
        *, token: str | None = TOKEN, spark_up: bool = True, max_body_bytes: int = 65_536
    ) -> TestClient:
        env = {TOKEN_ENV: token} if token else {}
        state = ServeState(load_project(project.root, env), catalog, env, lambda: spark_up)
        return TestClient(create_app(state, max_body_bytes=max_body_bytes))

    return make


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()
