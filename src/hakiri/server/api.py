"""serve's HTTP API: health, pipeline status, runs and alerts, and the event trigger.

Every error is JSON `{"error", "hint"}` (ErrorBody) — for the framework's own 404, 405
and 422 too — never HTML or a traceback. docs/api.md is the user's guide;
schemas/openapi.json, generated from this module, is the contract.
"""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BeforeValidator
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hakiri import __version__
from hakiri.errors import CatalogError, HakiriError, PipelineNotFound, QueryTimeout
from hakiri.server.api_models import (
    AlertDocument,
    ErrorBody,
    Health,
    PipelineStatus,
    QueryAnswer,
    QueryRequest,
    Readiness,
    RunDocument,
    RunRequest,
    RunRequested,
)
from hakiri.server.state import TOKEN_ENV, ServeState
from hakiri.services.cdc import lag_reader
from hakiri.services.drift import drift_reader
from hakiri.services.quality import alert_json
from hakiri.services.status import pipeline_statuses, recent_runs

__all__ = ["create_app", "openapi_document"]

ENDPOINTS_HINT = "GET /openapi.json describes the endpoints, their parameters and bodies"


def create_app(state: ServeState, *, max_body_bytes: int = 65_536) -> FastAPI:
    """The API over `state`; request bodies over `max_body_bytes` are answered 413."""
    app = _app()
    app.state.serve = state
    app.add_middleware(RequestBodyLimit, max_bytes=max_body_bytes)
    return app


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document committed as schemas/openapi.json."""
    return _app().openapi()


class ApiError(Exception):
    """An answer other than success, decided by an endpoint."""

    def __init__(
        self, status: int, error: str, hint: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(error)
        self.status, self.error, self.hint, self.headers = status, error, hint, headers


def _serve_state(request: Request) -> ServeState:
    return request.app.state.serve


State = Annotated[ServeState, Depends(_serve_state)]
PipelineId = Annotated[str, Path(description="A pipeline's id.", examples=["orders"])]
# ISO 8601 only: pydantic alone would also read a number as a Unix time.
IsoDateTime = Annotated[datetime, BeforeValidator(datetime.fromisoformat)]
bearer = HTTPBearer(auto_error=False, description=f"The value of {TOKEN_ENV} of the serve process.")


def _authorized(
    state: State,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> None:
    if state.token is None:
        raise ApiError(
            403,
            "triggers are disabled: this serve process has no token",
            f"start `hakiri serve` with {TOKEN_ENV} set to a secret, and send it as "
            "`Authorization: Bearer <token>`",
        )
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise ApiError(
            401,
            "no bearer token",
            f"send `Authorization: Bearer <token>` with the value of {TOKEN_ENV}",
            challenge,
        )
    # Bytes, not str: compare_digest refuses non-ASCII strings, and a header may hold any.
    if not hmac.compare_digest(credentials.credentials.encode(), state.token.encode()):
        raise ApiError(
            401,
            "wrong bearer token",
            f"send the value of {TOKEN_ENV} of the serve process",
            challenge,
        )


_DESCRIPTIONS = {
    400: "The body cannot be decoded (it is not UTF-8).",
    401: "No bearer token, or the wrong one.",
    403: f"Triggers are disabled: {TOKEN_ENV} is not set.",
    404: "No such pipeline.",
    409: "The pipeline is disabled in its manifest.",
    413: "The request body is over the limit.",
    422: "A parameter or the body is invalid.",
    503: "The catalog is unreachable.",
    504: "The query ran over [serve] query_timeout and was stopped.",
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    responses: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in codes
    }
    if 401 in responses:
        responses[401]["headers"] = {
            "WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}
        }
    return responses


router = APIRouter()


@router.get("/healthz")
async def healthz() -> Health:
    """The process is alive (no I/O)."""
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "The catalog or Spark is down."}},
)
def readyz(state: State) -> JSONResponse:
    """Ready when the catalog answers and Spark is up; an invalid manifest edit is reported,
    but the process stays ready on the previous version."""
    checks = state.readiness()
    ready = all(checks.values())
    failing = state.failing() or None
    body = Readiness(ready=ready, **checks, reload_error=state.reload_error, failing=failing)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=200 if ready else 503)


@router.get("/v1/pipelines", response_model=list[PipelineStatus], responses=_errors(503))
def list_pipelines(state: State) -> list[dict[str, Any]]:
    """Every pipeline of the manifests, then those only the catalog remembers (retired)."""
    project = state.project()
    lag_of = lag_reader(project, state.catalog, state.env)
    drift_of = drift_reader(project, state.catalog, state.env)
    return pipeline_statuses(state.catalog, project.pipelines, lag_of=lag_of, drift_of=drift_of)


@router.get(
    "/v1/pipelines/{pipeline_id}", response_model=PipelineStatus, responses=_errors(404, 422, 503)
)
def get_pipeline(pipeline_id: PipelineId, state: State) -> dict[str, Any]:
    """One pipeline's phase, chunks, pace, cursors and last runs."""
    project = state.project()
    lag_of = lag_reader(project, state.catalog, state.env)
    drift_of = drift_reader(project, state.catalog, state.env)
    [status] = pipeline_statuses(
        state.catalog, project.pipelines, [pipeline_id], lag_of=lag_of, drift_of=drift_of
    )
    return status


@router.get(
    "/v1/pipelines/{pipeline_id}/runs",
    response_model=list[RunDocument],
    responses=_errors(404, 422, 503),
)
def list_runs(
    pipeline_id: PipelineId,
    state: State,
    limit: Annotated[int, Query(ge=1, le=500, description="How many runs.")] = 20,
) -> list[dict[str, Any]]:
    """The pipeline's runs, newest first; requested runs not started yet are `pending`."""
    return recent_runs(state.catalog, state.project().pipelines, pipeline_id, limit)


@router.post(
    "/v1/pipelines/{pipeline_id}/runs",
    status_code=202,
    dependencies=[Depends(_authorized)],
    responses=_errors(400, 401, 403, 404, 409, 413, 422, 503),
)
def request_run(
    pipeline_id: PipelineId, state: State, body: RunRequest | None = None
) -> RunRequested:
    """Ask for a run now (an event trigger). It is recorded `pending` and started by the
    serve loop of whichever replica gets to it first."""
    spec = state.project().pipelines.get(pipeline_id)
    if spec is None:
        raise ApiError(
            404, f"no pipeline `{pipeline_id}` in the manifests", "GET /v1/pipelines lists them"
        )
    if not spec.enabled:
        raise ApiError(
            409,
            f"pipeline `{pipeline_id}` is disabled",
            "set `enabled = true` in its manifest (serve reloads it) to run it",
        )
    run = state.catalog.request_run(
        pipeline_id, trigger="event", reason=body.reason if body else None
    )
    state.wake()
    return RunRequested(run_id=run.run_id, pipeline_id=pipeline_id, status="pending")


@router.get("/v1/alerts", response_model=list[AlertDocument], responses=_errors(422, 503))
def list_alerts(
    state: State,
    pipeline_id: Annotated[str | None, Query(description="Only this pipeline's alerts.")] = None,
    since: Annotated[
        IsoDateTime | None,
        Query(description="Only alerts at or after this time (UTC if no zone)."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="How many alerts.")] = 100,
) -> list[AlertDocument]:
    """Warnings from anomalies, dataset validators and empty sources, newest first."""
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return [
        AlertDocument(**alert_json(a))
        for a in state.catalog.alerts(since=since, pipeline_id=pipeline_id, limit=limit)
    ]


@router.post(
    "/v1/query",
    dependencies=[Depends(_authorized)],
    responses={
        **_errors(400, 401, 403, 413, 422, 504),
        400: {
            "model": ErrorBody,
            "description": "The query guard refused the SQL (with its line and column), it reads "
            "a name that is neither a table nor a view, or the engine refused it.",
        },
    },
)
def query(state: State, body: QueryRequest) -> QueryAnswer:
    """Run one read-only query over the context store's tables and the project's views, as
    `hakiri query --format json` does: at most `limit` rows and never more than
    [serve] query_max_rows; stopped after [serve] query_timeout."""
    from hakiri.services.query import prepare_query
    from hakiri.services.query_engines import run_query
    from hakiri.services.query_output import result_document
    from hakiri.spec.base import duration_seconds

    project = state.project()
    settings = project.settings.serve
    cap = settings.query_max_rows
    limit = cap if body.limit is None else min(body.limit, cap)
    try:
        prepared = prepare_query(project, body.sql)
        result = run_query(
            project,
            prepared,
            limit=limit,
            timeout=float(duration_seconds(settings.query_timeout)),
            env=state.env,
        )
        return QueryAnswer.model_validate(result_document(result))
    except QueryTimeout as exc:
        raise ApiError(504, exc.reason, exc.hint or "") from None
    except HakiriError as exc:
        raise ApiError(
            400, exc.reason, exc.hint or "GET /openapi.json describes the body"
        ) from None


def _app() -> FastAPI:
    app = FastAPI(
        title="hakiri serve",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        generate_unique_id_function=lambda route: route.name,
    )
    app.include_router(router)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HakiriError, _hakiri_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(Exception, _unexpected)
    return app


def _error(
    status: int, error: str, hint: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = ErrorBody(error=error, hint=hint)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return _error(exc.status, exc.error, exc.hint, exc.headers)


async def _hakiri_error(request: Request, exc: HakiriError) -> JSONResponse:
    if isinstance(exc, PipelineNotFound):
        status = 404
    elif isinstance(exc, CatalogError):
        status = 503
    else:
        status = 500
    return _error(status, exc.reason, exc.hint or "the serve log may say more")


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """The framework's own answers: no route (404), wrong method (405)."""
    headers = exc.headers
    if exc.status_code == 405:
        # Starlette names only the first route at the path; GET and POST .../runs are two.
        headers = {"Allow": ", ".join(sorted(_methods_at(request)))}
    return _error(exc.status_code, str(exc.detail), ENDPOINTS_HINT, headers)


def _methods_at(request: Request) -> set[str]:
    methods: set[str] = set()
    for route in router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE and isinstance(route, APIRoute):
            methods |= route.methods
    return methods


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in exc.errors()
    )
    return _error(422, f"invalid request: {problems}", ENDPOINTS_HINT)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """A bug: the client gets JSON, uvicorn logs the traceback."""
    return _error(500, "internal error", "the serve log has the traceback")


class RequestBodyLimit:
    """Answers 413 to a request body over `max_bytes`: declared by Content-Length, or streamed.

    A streamed (chunked) body is read here, up to the limit, before the app sees it, so no
    handler ever buffers more than `max_bytes`.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            more = message.get("more_body", False)

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = _error(
            413,
            f"request body over {self.max_bytes} bytes",
            "send a smaller body: a trigger's `reason` is at most 500 characters, a query's `sql` 60,000",
        )
        await response(scope, receive, send)
