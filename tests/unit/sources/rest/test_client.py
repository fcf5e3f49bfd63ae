"""RestClient against the suite's API server: credentials, retries, waits and one-line errors."""

from __future__ import annotations

import email.utils
import math
import socket
import time

import pytest

from hakiri.errors import SecretMissing, SourceDataError, SourceRefused, SourceUnreachable
from hakiri.sources.rest.client import (
    ApiKey,
    BasicAuth,
    BearerToken,
    RestClient,
    RetryPolicy,
    _seconds_until,
)
from tests.conftest import API_TOKEN
from tests.support.api_server import ApiServer

ISSUES = "/repos/octo/repo-0/issues"
QUICK = RetryPolicy(attempts=4, backoff=0.01, backoff_max=0.05, max_wait=5)


def client_for(api: ApiServer, token: str = API_TOKEN, **options: object) -> RestClient:
    options.setdefault("retry", QUICK)
    return RestClient(
        api.url,
        auth=BearerToken("GITHUB_TOKEN"),
        secrets={"GITHUB_TOKEN": token},
        **options,  # type: ignore[arg-type]
    )


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text
    return text


def test_a_get_sends_the_bearer_token_and_params(api_server: ApiServer) -> None:
    with client_for(api_server) as client:
        response = client.get(ISSUES, {"state": "all", "per_page": 5})

    assert response.status == 200
    assert len(response.json()) == 5
    (request,) = api_server.requests
    assert request.query == {"state": "all", "per_page": "5"}


def test_a_429_with_retry_after_is_waited_out_then_the_request_succeeds(
    api_server: ApiServer,
) -> None:
    api_server.throttle(times=1, retry_after=2)

    with client_for(api_server) as client:
        started = time.monotonic()
        response = client.get(ISSUES)
        elapsed = time.monotonic() - started

    assert response.status == 200
    assert elapsed >= 2.0
    first, second = api_server.requests
    assert (first.status, second.status) == (429, 200)
    assert second.at - first.at >= 2.0


def test_a_403_rate_limit_waits_until_x_ratelimit_reset(api_server: ApiServer) -> None:
    api_server.exhaust_rate_limit(reset_in=0.2)

    with client_for(api_server) as client:
        assert client.get(ISSUES).status == 200

    refused, retried = api_server.requests
    assert refused.status == 403
    # The server's reset is the whole epoch second after arrival + 0.2 s: not before that.
    assert retried.at >= math.ceil(refused.at + 0.2)


def test_retry_after_as_an_http_date_is_seconds_until_that_date() -> None:
    in_30s = email.utils.formatdate(time.time() + 30, usegmt=True)

    assert 28 <= (_seconds_until(in_30s) or 0) <= 30
    assert _seconds_until("7") == 7
    assert _seconds_until(email.utils.formatdate(time.time() - 60, usegmt=True)) == 0
    assert _seconds_until("soon") is None


def test_5xx_answers_are_retried_with_backoff(api_server: ApiServer) -> None:
    api_server.fail(times=2, status=502)

    with client_for(api_server) as client:
        assert client.get(ISSUES).status == 200
        assert client.requests == 3
        assert 0 < client.waited <= 0.1


def test_retries_that_run_out_fail_in_one_line_naming_the_endpoint(api_server: ApiServer) -> None:
    api_server.fail(times=10, status=503)

    with client_for(api_server) as client, pytest.raises(SourceUnreachable) as caught:
        client.get(ISSUES, {"per_page": 3})

    message = one_line(caught.value)
    assert f"GET {api_server.url}{ISSUES}?per_page=3 failed 4 times" in message
    assert "503 Service Unavailable: Server Error" in message
    assert len(api_server.requests) == 4


def test_a_wait_longer_than_max_wait_fails_at_once(api_server: ApiServer) -> None:
    api_server.throttle(retry_after=3600)

    with client_for(api_server) as client, pytest.raises(SourceUnreachable) as caught:
        started = time.monotonic()
        client.get(ISSUES)

    assert time.monotonic() - started < 1
    assert "waiting 3600 s more would pass the 5 s a page may wait" in one_line(caught.value)


def test_a_timeout_is_retried(api_server: ApiServer) -> None:
    api_server.slow(1.0)

    with client_for(api_server, timeout=0.2) as client:
        assert client.get(ISSUES).status == 200
        assert client.requests == 2


def test_a_refused_connection_is_retried_then_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens
    client = RestClient(f"http://127.0.0.1:{port}", retry=QUICK)

    with client, pytest.raises(SourceUnreachable) as caught:
        client.get("/anything")

    assert "failed 4 times" in one_line(caught.value)
    assert "ConnectError" in str(caught.value)


def test_a_url_no_retry_can_fix_fails_at_once() -> None:
    with RestClient("ftp://127.0.0.1:1", retry=QUICK) as client:
        with pytest.raises(
            SourceUnreachable, match=r"GET ftp://127\.0\.0\.1:1/x: UnsupportedProtocol"
        ):
            client.get("/x")
        assert client.requests == 1


def test_a_wrong_token_fails_at_once_in_one_line_with_the_token_masked(
    api_server: ApiServer,
) -> None:
    wrong = "ghp_wrongWRONGwrong1234"

    with client_for(api_server, token=wrong) as client, pytest.raises(SourceRefused) as caught:
        client.get(ISSUES)

    error = caught.value
    message = one_line(error)
    assert message == f"GET {api_server.url}{ISSUES} was refused: 401 Unauthorized: Bad credentials"
    assert error.status == 401
    assert "GITHUB_TOKEN" in (error.hint or "")
    assert wrong not in f"{message} {error.hint} {error!r}"
    assert len(api_server.requests) == 1  # not retried


def test_an_api_key_in_the_query_is_masked_in_messages(api_server: ApiServer) -> None:
    auth = ApiKey("SHAPES_KEY", name="api_key", location="query")
    good = RestClient(api_server.url, auth=auth, secrets={"SHAPES_KEY": API_TOKEN})
    bad = RestClient(api_server.url, auth=auth, secrets={"SHAPES_KEY": "k3y/with+odd=chars"})

    with good, bad, pytest.raises(SourceRefused) as caught:
        assert good.get("/shapes/octo/repo-0/cursor").status == 200
        bad.get("/shapes/octo/repo-0/cursor", {"q": "k3y/with+odd=chars"})

    message = one_line(caught.value)
    assert "odd" not in message
    assert message.startswith(f"GET {api_server.url}/shapes/octo/repo-0/cursor?q=***")
    assert api_server.requests[0].query == {"api_key": API_TOKEN}


@pytest.mark.parametrize(
    ("status", "hint"), [(403, "check their scopes"), (404, "check base_url"), (422, "parameters")]
)
def test_other_refusals_fail_at_once_with_a_hint(
    api_server: ApiServer, status: int, hint: str
) -> None:
    api_server.fail(status=status)

    with client_for(api_server) as client, pytest.raises(SourceRefused) as caught:
        client.get(ISSUES)

    assert caught.value.status == status
    assert hint in (caught.value.hint or "")
    assert len(api_server.requests) == 1


def test_a_missing_secret_is_named() -> None:
    with pytest.raises(SecretMissing, match="the secret GITHUB_TOKEN is not set"):
        RestClient("https://api.github.com", auth=BearerToken("GITHUB_TOKEN"), secrets={})


def test_credentials_never_go_to_another_host(api_server: ApiServer) -> None:
    with client_for(api_server) as client, pytest.raises(SourceDataError) as caught:
        client.get("http://evil.example/repos/octo/repo-0/issues?page=2")

    assert "outside base_url" in one_line(caught.value)
    assert api_server.requests == []


def test_basic_auth_masks_the_password_and_its_encoding() -> None:
    credentials = BasicAuth("me", "PW").credentials({"PW": "s3cret!"})
    header = credentials.headers["Authorization"]

    assert header.startswith("Basic ")
    assert credentials.mask(f"sent {header} for s3cret!") == "sent Basic *** for ***"
    assert "s3cret" not in repr(credentials)
