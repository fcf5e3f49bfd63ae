"""A small real project for plan tests: CSV files into a PostgreSQL schema and the context store,
with the catalog on SQLite or on the suite's PostgreSQL (one fresh database per test)."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from hakiri.catalog.records import NewBatch, Phase
from hakiri.catalog.store import Catalog
from hakiri.sources.files.inspect import hash_file
from hakiri.spec.fingerprint import normalized_spec, spec_hash
from hakiri.spec.loader import load_project


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path, pg_url: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'catalog.sqlite'}"
        return
    name = f"plan_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield pg_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


class PlanProject:
    def __init__(self, root: Path, pg_url: str, schema: str, catalog_url: str) -> None:
        self.root, self.pg_url, self.schema, self.catalog_url = root, pg_url, schema, catalog_url
        self.env = {"HAKIRI_CATALOG_URL": catalog_url, "WH_URL": pg_url}

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))

    def record_apply(self) -> None:
        """What a successful apply leaves behind: applied specs and committed file batches in the
        catalog, and the context-store table (PostgreSQL targets are created by each test)."""
        self.create_context_tables()
        project = load_project(self.root, env=self.env)
        with Catalog.open(self.catalog_url, migrate=True) as catalog:
            for spec in project.pipelines.values():
                catalog.record_applied(
                    spec.id, normalized_spec(spec), spec_hash(spec), Phase.STREAMING
                )
                table = spec.table_specs()[0].name
                for path in sorted((self.root / "data" / table).glob("*.csv")):
                    digest = hash_file(path)
                    catalog.add_batches(
                        spec.id,
                        [
                            NewBatch(
                                digest,
                                table,
                                "file",
                                path.relative_to(self.root).as_posix(),
                                digest,
                            )
                        ],
                    )
                    claimed = catalog.claim_batch(spec.id, "test", 60)
                    assert claimed is not None
                    catalog.mark_committed(spec.id, claimed.batch_id, "test", rows=2)

    def create_context_tables(self) -> None:
        """The Delta table an apply of `events` leaves in the context store."""
        import pyarrow as pa
        from deltalake import write_deltalake

        rows = pa.table({"event_id": ["a", "b"], "kind": ["click", "view"]})
        write_deltalake(str(self.root / ".hakiri" / "context" / "events"), rows)

    def create_orders_target(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, amount text)").format(
                    sql.Identifier(self.schema, "orders")
                )
            )


@pytest.fixture
def plan_project(
    tmp_path: Path, pg_url: str, pg_schema: str, catalog_url: str, monkeypatch: pytest.MonkeyPatch
) -> PlanProject:
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    project = PlanProject(root, pg_url, pg_schema, catalog_url)
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "plan-test"

        [connections.wh]
        type = "postgres"
        url = "${{WH_URL}}"

        [[pipeline]]
        id = "orders"
        source = {{ connector = "files", config = {{ path = "data/orders/*.csv" }} }}
        tables = ["orders"]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}
        load = {{ mode = "upsert", upsert_key = ["id"] }}

        [[pipeline]]
        id = "events"
        source = {{ connector = "files", config = {{ path = "data/events/*.csv" }} }}
        tables = ["events"]
    """,
    )
    project.write("data/orders/2026-01-01.csv", "id,amount\n1,10.5\n2,3.25\n")
    project.write("data/events/e1.csv", "event_id,kind\na,click\nb,view\n")
    return project
