"""serve's HTTP API as a client sees it: status codes, JSON bodies, and rows in the catalog."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
from fastapi.testclient import TestClient

from hakiri.catalog.records import NewBatch, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.server.api import create_app
from hakiri.server.state import ServeState
from hakiri.spec.loader import load_project
from tests.unit.server.conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _finished_run(catalog: Catalog) -> str:
    """A successful run of `orders` that loaded one chunk, and its cursor."""
    run = catalog.start_run("orders", trigger="schedule")
    catalog.add_batches(
        "orders", [NewBatch("chunk-0", "orders", "chunk", predicate="id < 10")], run_id=run.run_id
    )
    claimed = catalog.claim_batch("orders", "worker-1", 60, run_id=run.run_id)
    assert claimed is not None
    catalog.mark_committed("orders", claimed.batch_id, "worker-1", rows=10)
    catalog.set_cursor("orders", "orders", {"column": "id", "value": 10})
    catalog.finish_run(run.run_id, RunStatus.SUCCESS, row_count=10)
    return run.run_id


# -- health ------------------------------------------------------------------


def test_healthz_says_ok(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_200_with_the_catalog_and_spark_up(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"ready": True, "catalog": True, "spark": True}


def test_readyz_reports_an_invalid_manifest_edit_and_stays_ready(client: TestClient) -> None:
    client.app.state.serve.reload_error = "hakiri.toml:3: unknown key `sorce`"
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["reload_error"] == "hakiri.toml:3: unknown key `sorce`"


def test_readyz_is_503_while_spark_is_down(make_client) -> None:
    response = make_client(spark_up=False).get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"ready": False, "catalog": True, "spark": False}


def test_an_unreachable_catalog_answers_503_with_a_json_error(project, tmp_path) -> None:
    project.write("hakiri.toml", "[project]\nname = 'shop'\n")
    catalog = Catalog.open(f"sqlite:///{tmp_path / 'gone' / 'state.sqlite'}", migrate=True)
    catalog.close()
    shutil.rmtree(tmp_path / "gone")
    state = ServeState(load_project(project.root, {}), catalog, {}, lambda: True)
    client = TestClient(create_app(state))

    assert client.get("/readyz").json() == {"ready": False, "catalog": False, "spark": True}
    response = client.get("/v1/pipelines")
    assert response.status_code == 503
    assert "state.sqlite" in response.json()["error"]
    assert response.json()["hint"].startswith("check that the catalog file")


# -- pipelines and runs --------------------------------------------------------


def test_pipelines_lists_every_pipeline_as_hakiri_status_does(
    client: TestClient, catalog: Catalog, cli, catalog_url: str
) -> None:
    _finished_run(catalog)
    response = client.get("/v1/pipelines")
    assert response.status_code == 200
    assert [p["pipeline_id"] for p in response.json()] == ["orders", "paused"]

    status = cli("status", "--json", env={"HAKIRI_CATALOG_URL": catalog_url})
    assert response.json() == json.loads(status.stdout)


def test_one_pipeline_is_the_document_of_hakiri_status_id(
    client: TestClient, catalog: Catalog, cli, catalog_url: str
) -> None:
    run_id = _finished_run(catalog)
    response = client.get("/v1/pipelines/orders")
    assert response.status_code == 200
    document = response.json()
    assert document["chunks"] == {
        "done": 1,
        "running": 0,
        "pending": 0,
        "failed": 0,
        "superseded": 0,
        "gone": 0,
        "total": 1,
    }
    assert document["cursors"] == {"orders": {"column": "id", "value": 10}}
    assert [r["run_id"] for r in document["last_runs"]] == [run_id]

    status = cli("status", "orders", "--json", env={"HAKIRI_CATALOG_URL": catalog_url})
    assert document == json.loads(status.stdout)


def test_an_unknown_pipeline_is_404(client: TestClient) -> None:
    for path in ("/v1/pipelines/nope", "/v1/pipelines/nope/runs"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json() == {
            "error": "no pipeline `nope`",
            "hint": "`hakiri validate` lists the pipelines",
        }


def test_runs_are_listed_newest_first_with_their_trigger(
    client: TestClient, catalog: Catalog
) -> None:
    scheduled = _finished_run(catalog)
    requested = client.post(
        "/v1/pipelines/orders/runs", json={"reason": "files landed"}, headers=AUTH
    )

    response = client.get("/v1/pipelines/orders/runs")
    assert response.status_code == 200
    runs = response.json()
    assert [(r["run_id"], r["status"], r["trigger"]) for r in runs] == [
        (requested.json()["run_id"], "pending", "event"),
        (scheduled, "success", "schedule"),
    ]
    assert runs[0]["trigger_reason"] == "files landed"
    assert runs[0]["duration_seconds"] is None and runs[1]["row_count"] == 10

    assert len(client.get("/v1/pipelines/orders/runs", params={"limit": 1}).json()) == 1


def test_a_limit_out_of_range_is_422(client: TestClient) -> None:
    for limit in (0, 501, "many"):
        response = client.get("/v1/pipelines/orders/runs", params={"limit": limit})
        assert response.status_code == 422
        assert response.json()["error"].startswith("invalid request: query.limit: ")
        assert "/openapi.json" in response.json()["hint"]


# -- the event trigger -----------------------------------------------------------


def test_a_trigger_with_the_token_records_a_pending_run(
    client: TestClient, catalog: Catalog
) -> None:
    response = client.post(
        "/v1/pipelines/orders/runs", json={"reason": "upstream export done"}, headers=AUTH
    )
    assert response.status_code == 202
    body = response.json()
    assert body == {"run_id": body["run_id"], "pipeline_id": "orders", "status": "pending"}

    [pending] = catalog.pending_runs("orders")
    assert pending.run_id == body["run_id"]
    assert (pending.trigger, pending.trigger_reason) == ("event", "upstream export done")
    assert client.app.state.serve.wakeup.is_set()  # the loop looks at once


def test_a_trigger_without_a_body_has_no_reason(client: TestClient, catalog: Catalog) -> None:
    response = client.post("/v1/pipelines/orders/runs", headers=AUTH)
    assert response.status_code == 202
    [pending] = catalog.pending_runs("orders")
    assert (pending.trigger, pending.trigger_reason) == ("event", None)


def test_a_trigger_without_a_token_or_with_the_wrong_one_is_401(
    client: TestClient, catalog: Catalog
) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        response = client.post("/v1/pipelines/orders/runs", headers=headers)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert "HAKIRI_SERVE_TOKEN" in response.json()["hint"]
    # A token that is not ASCII is simply wrong (compare_digest on str would raise).
    not_ascii = {"Authorization": "Bearer tök".encode()}
    response = client.post("/v1/pipelines/orders/runs", headers=not_ascii)
    assert response.status_code == 401
    assert catalog.pending_runs() == []


def test_triggers_are_403_when_serve_has_no_token(make_client, catalog: Catalog) -> None:
    response = make_client(token=None).post("/v1/pipelines/orders/runs", headers=AUTH)
    assert response.status_code == 403
    assert response.json()["error"] == "triggers are disabled: this serve process has no token"
    assert "HAKIRI_SERVE_TOKEN" in response.json()["hint"]
    assert catalog.pending_runs() == []


def test_a_trigger_for_an_unknown_pipeline_is_404_and_for_a_disabled_one_409(
    client: TestClient, catalog: Catalog
) -> None:
    unknown = client.post("/v1/pipelines/nope/runs", headers=AUTH)
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "no pipeline `nope` in the manifests"

    disabled = client.post("/v1/pipelines/paused/runs", headers=AUTH)
    assert disabled.status_code == 409
    assert disabled.json() == {
        "error": "pipeline `paused` is disabled",
        "hint": "set `enabled = true` in its manifest (serve reloads it) to run it",
    }
    assert catalog.pending_runs() == []


def test_a_bad_trigger_body_is_422(client: TestClient, catalog: Catalog) -> None:
    for body in ({"reason": "x" * 501}, {"reason": 7}, {"why": "typo"}, [1]):
        response = client.post("/v1/pipelines/orders/runs", json=body, headers=AUTH)
        assert response.status_code == 422, body
        assert response.json()["error"].startswith("invalid request: body")
    broken = client.post(
        "/v1/pipelines/orders/runs",
        content=b"{not json",
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert broken.status_code == 422
    assert catalog.pending_runs() == []


# -- request size ------------------------------------------------------------------


def test_a_declared_body_over_the_limit_is_413(make_client, catalog: Catalog) -> None:
    client = make_client(max_body_bytes=100)
    response = client.post("/v1/pipelines/orders/runs", json={"reason": "x" * 200}, headers=AUTH)
    assert response.status_code == 413
    assert response.json()["error"] == "request body over 100 bytes"
    assert catalog.pending_runs() == []


def test_a_streamed_body_over_the_limit_is_413_without_reading_the_rest(make_client) -> None:
    app = make_client(max_body_bytes=4096).app
    sent = []

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):
            sent.append(1024)
            yield b" " * 1024

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            return await client.post("/v1/pipelines/orders/runs", content=chunks(), headers=AUTH)

    response = asyncio.run(post())
    assert "content-length" not in response.request.headers  # chunked: no length declared
    assert response.status_code == 413
    assert response.json()["error"] == "request body over 4096 bytes"
    assert sum(sent) <= 4096 + 1024


def test_a_streamed_body_under_the_limit_reaches_the_endpoint(make_client, catalog) -> None:
    app = make_client(max_body_bytes=4096).app

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"reason": '
        yield b'"in two chunks"}'

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            return await client.post(
                "/v1/pipelines/orders/runs",
                content=chunks(),
                headers={**AUTH, "Content-Type": "application/json"},
            )

    assert asyncio.run(post()).status_code == 202
    [pending] = catalog.pending_runs("orders")
    assert pending.trigger_reason == "in two chunks"


# -- alerts ----------------------------------------------------------------------------


def test_alerts_are_listed_newest_first_and_filtered(client: TestClient, catalog: Catalog) -> None:
    catalog.add_alert("warning", "empty_source", "no new files", pipeline_id="orders")
    catalog.add_alert("error", "validator", "row count fell 90%", pipeline_id="paused")
    catalog.add_alert("info", "anomaly", "orders doubled", pipeline_id="orders")

    everything = client.get("/v1/alerts")
    assert everything.status_code == 200
    assert [a["message"] for a in everything.json()] == [
        "orders doubled",
        "row count fell 90%",
        "no new files",
    ]
    newest = everything.json()[0]
    assert set(newest) == {
        "id",
        "severity",
        "kind",
        "pipeline_id",
        "run_id",
        "message",
        "created_at",
    }
    assert (newest["severity"], newest["kind"], newest["run_id"]) == ("info", "anomaly", None)

    orders = client.get("/v1/alerts", params={"pipeline_id": "orders", "limit": 1})
    assert [a["message"] for a in orders.json()] == ["orders doubled"]

    later = (datetime.now(UTC) + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert client.get("/v1/alerts", params={"since": later}).json() == []
    assert client.get("/v1/alerts", params={"since": "yesterday"}).status_code == 422


# -- errors are JSON everywhere ---------------------------------------------------------------


def test_unknown_paths_and_methods_answer_json(client: TestClient) -> None:
    missing = client.get("/v2/everything")
    assert missing.status_code == 404
    assert missing.json()["error"] == "Not Found"
    wrong = client.delete("/v1/pipelines/orders/runs")
    assert wrong.status_code == 405
    assert wrong.json()["error"] == "Method Not Allowed"
    assert wrong.headers["Allow"] == "GET, POST"


def test_the_openapi_document_is_served_and_the_docs_ui_is_not(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    assert document["info"]["title"] == "hakiri serve"
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert client.get("/docs").status_code == 404
