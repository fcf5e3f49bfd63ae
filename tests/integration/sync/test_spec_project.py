"""The specification's own project file (shared/seeds/002, "TOML form"), verbatim: it validates
and plans with no network; pointed at the suite's Shopify-shaped API and S3 server through
the environment (HAKIRI_SHOPIFY_BASE_URL, HAKIRI_SYNC_ENDPOINT: overrides a user has too),
`apply` loads the shop exactly and publishes the store; a sync that fails never fails the
load it follows."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.conftest import SHOPIFY_ACCESS_TOKEN
from tests.support.bucket_reader import bucket_table, local_table, same_table
from tests.support.project import Project
from tests.support.s3_server import S3Server
from tests.support.shopify_server import ShopifyServer

pytestmark = pytest.mark.integration

SPEC_PROJECT = """\
[project]
name = "openhackers-warehouse"
version = "0.1.0"

[context]
path = ".hakiri/context" # local store location
default_destination = "context" # all pipelines land here unless overridden

[sync]
bucket = "r2://oh-context"
endpoint = "https://<accountid>.r2.cloudflarestorage.com"
region = "auto"
# credentials via env: HAKIRI_SYNC_KEY_ID / HAKIRI_SYNC_KEY_SECRET

[[pipeline]]
id = "github-issues"
source = { connector = "github", config = { repo = "OpenHackersClub/gctrl" } }
tables = ["issues", "pull_requests", "comments"]
schedule = "every 15m"
incremental = "updated_at" # cursor strategy

[[pipeline]]
id = "shopify-orders"
source = { connector = "shopify", config = { shop = "openhackers" } }
secrets = ["SHOPIFY_TOKEN"]
tables = ["orders", "customers", "products"]
schedule = "0 */2 * * *" # cron
incremental = "updated_at"
destination = { connector = "context" } # explicit
"""

GITHUB_ISSUES_JSON = {
    "$schema": "https://hakiri.dev/schemas/v1/pipeline.json",
    "id": "github-issues",
    "source": {"connector": "github", "config": {"repo": "OpenHackersClub/gctrl"}},
    "tables": ["issues", "pull_requests", "comments"],
    "schedule": "every 15m",
    "incremental": "updated_at",
}
SHOP_TABLES = ("orders", "customers", "products")


def _without_github_block(text: str) -> str:
    start = text.index('[[pipeline]]\nid = "github-issues"')
    end = text.index('[[pipeline]]\nid = "shopify-orders"')
    return text[:start] + text[end:]


@pytest.mark.engine_free("validate and plan read manifests and an empty catalog only")
@pytest.mark.parametrize("form", ["toml", "toml + json"])
def test_the_specifications_project_file_validates_and_plans_with_no_network(
    tmp_path: Path, form: str
) -> None:
    project = Project(tmp_path, "", "")
    if form == "toml":
        project.write("hakiri.toml", SPEC_PROJECT)
    else:
        project.write("hakiri.toml", _without_github_block(SPEC_PROJECT))
        project.write("pipelines/github-issues.json", json.dumps(GITHUB_ISSUES_JSON, indent=2))
    checked = project.cli("validate")
    assert checked.exit_code == 0, checked.output
    assert "2 pipelines valid" in checked.stdout
    # No token, no credentials, nothing listening: plan asks nobody anything.
    dead = {
        "HAKIRI_SHOPIFY_BASE_URL": "http://127.0.0.1:9",
        "HAKIRI_SYNC_ENDPOINT": "http://127.0.0.1:9",
    }
    plan = project.cli("plan", "--json", env=dead)
    assert plan.exit_code == 0, plan.output
    document = json.loads(plan.stdout)
    assert {p["id"] for p in document["pipelines"]} == {"github-issues", "shopify-orders"}
    # plan says where apply will publish the store, and that the credentials are not set
    assert document["sync"] == {
        "bucket": "r2://oh-context",
        "endpoint": "http://127.0.0.1:9",
        "after_apply": True,
        "missing": ["HAKIRI_SYNC_KEY_ID", "HAKIRI_SYNC_KEY_SECRET"],
    }
    text = project.cli("plan", env=dead)
    assert "sync: loads into the context store are published to r2://oh-context" in text.stdout
    assert "HAKIRI_SYNC_KEY_ID and HAKIRI_SYNC_KEY_SECRET not set" in text.stderr
    comment = project.cli("plan", "--format", "markdown", env=dead)
    assert "Apply publishes the context store to `r2://oh-context`" in comment.stdout


@pytest.fixture
def oh_context(s3_server: S3Server):
    """The specification's bucket, `oh-context`, on the suite's S3 server."""
    s3_server.create_bucket("oh-context")
    yield "oh-context"
    shutil.rmtree(s3_server.root / "oh-context", ignore_errors=True)


def _bucket_equals_store(server: S3Server, project: Project, bucket: str, tables) -> None:
    for table in tables:
        remote = bucket_table(server.storage_options(), f"s3://{bucket}/{table}")
        assert same_table(remote, local_table(project.root / ".hakiri" / "context" / table)), table


def test_apply_loads_the_shop_exactly_and_publishes_the_store(
    tmp_path: Path,
    shopify_server: ShopifyServer,
    s3_server: S3Server,
    oh_context: str,
    spark,
) -> None:
    project = Project(tmp_path, "", "")
    project.write("hakiri.toml", SPEC_PROJECT)
    env = {
        "SHOPIFY_TOKEN": SHOPIFY_ACCESS_TOKEN,
        "HAKIRI_SHOPIFY_BASE_URL": shopify_server.url,
        **s3_server.env(),
    }
    shop = shopify_server
    shop.fill_bucket(38)  # other apps of the shop have nearly filled its leaky bucket
    shop.throttle(times=1)  # and one answer is a 429 with Retry-After
    done = project.cli("apply", "shopify-orders", env=env)
    assert done.exit_code == 0, done.output
    assert [r.status for r in shop.requests].count(429) >= 1
    assert "published to r2://oh-context" in done.output
    assert s3_server.secret_key not in done.output
    store = project.root / ".hakiri" / "context"
    data = shop.dataset
    for table, records in zip(
        SHOP_TABLES, (data.orders, data.customers, data.products), strict=True
    ):
        ids = DeltaTable(str(store / table)).to_pyarrow_table()["id"].to_pylist()
        assert sorted(ids) == sorted(r.id for r in records), table  # every record, once
    _bucket_equals_store(s3_server, project, oh_context, SHOP_TABLES)

    shop.edit_orders(50, at=int(time.time()))
    time.sleep(2)  # a plan reads up to the second before it
    again = project.cli("apply", "shopify-orders", "--json", env=env)
    assert again.exit_code == 0, again.output
    [outcome] = json.loads(again.stdout)
    assert outcome["rows"] == 50
    assert "published to r2://oh-context" in outcome["notes"]
    _bucket_equals_store(s3_server, project, oh_context, SHOP_TABLES)
    status = json.loads(project.cli("sync", "--status", "--json", env=env).stdout)
    assert {t["table"]: t["state"] for t in status["tables"]} == dict.fromkeys(
        SHOP_TABLES, "in sync"
    )


def test_a_sync_that_fails_never_fails_the_load_and_is_alerted(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, spark
) -> None:
    project = Project(tmp_path, "", "")
    project.write("data/orders.csv", "id,amount\n1,10\n2,20\n3,30\n")
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "synced"

        [sync]
        bucket = "s3://{s3_bucket}/warehouse"
        endpoint = "{s3_server.endpoint}"

        [[pipeline]]
        id = "orders"
        source = {{ connector = "files", config = {{ path = "data/orders.csv", format = "csv" }} }}
        tables = ["orders"]
        """,
    )
    wrong = {**s3_server.env(), "HAKIRI_SYNC_KEY_SECRET": "not-the-secret-42"}
    done = project.cli("apply", env=wrong)
    assert done.exit_code == 0, done.output  # the load is committed; the sync is not the load
    assert "sync to s3://" in done.stderr and "failed; the load is committed" in done.stderr
    assert "not-the-secret-42" not in done.output
    store = project.root / ".hakiri" / "context"
    assert DeltaTable(str(store / "orders")).to_pyarrow_table()["id"].to_pylist() == [1, 2, 3]
    alerts = project.cli("alerts", "--json")
    assert [a["kind"] for a in json.loads(alerts.stdout)] == ["sync"]
    assert not (s3_server.root / s3_bucket / "warehouse").exists()

    caught_up = project.cli("sync", env=s3_server.env())
    assert caught_up.exit_code == 0, caught_up.output
    remote = bucket_table(s3_server.storage_options(), f"s3://{s3_bucket}/warehouse/orders")
    local = local_table(store / "orders")
    assert same_table(remote, local) and local["rows"] == 3
