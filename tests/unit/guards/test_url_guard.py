"""The webhook (SSRF) guard: https to public addresses only, in every spelling of an address."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from hakiri.errors import HookError, UnsafeHook
from hakiri.guards.urls import (
    WebhookTarget,
    check_webhook_url,
    is_public_address,
    resolve_webhook_url,
)

PUBLIC_V4 = "93.184.216.34"


def resolving_to(*addresses: str):
    """A stand-in for socket.getaddrinfo that answers with `addresses`, and counts its calls."""

    def resolve(host: str, port: int, *args: object, **kwargs: object):
        resolve.calls.append(host)
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                socket.IPPROTO_TCP,
                "",
                (a, port),
            )
            for a in addresses
        ]

    resolve.calls = []
    return resolve


# (url, a fragment of the reason: why it was refused) — refused without any DNS
REFUSED_BY_SYNTAX = [
    ("http://hooks.example.com/run", "only https://"),
    ("ftp://hooks.example.com/run", "only https://"),
    ("hooks.example.com/run", "only https://"),
    ("https://user:secret@hooks.example.com/", "user:password@"),
    ("https://token@hooks.example.com/", "user:password@"),
    ("https:///run", "no host"),
    ("https://hooks.example.com:0/", "port"),
    ("https://hooks.example.com:65536/", "port"),
    ("https://hooks.example.com:+443/", "port"),
    ("https://hooks example.com/", "space"),
    ("https://127.0.0.1/", "loopback"),
    ("https://127.1/", "loopback"),
    ("https://2130706433/", "loopback"),
    ("https://0x7f000001/", "loopback"),
    ("https://0177.0.0.1/", "loopback"),
    ("https://127.0.0.1./", "loopback"),
    ("https://\uff11\uff12\uff17.0.0.1/", "loopback"),  # full-width digits: IDNA maps them
    ("https://[::1]/", "loopback"),
    ("https://[::ffff:127.0.0.1]/", "loopback"),
    ("https://[::ffff:10.0.0.1]/", "private"),
    ("https://[::10.0.0.1]/", "private"),
    ("https://[::127.0.0.1]/", "loopback"),
    ("https://10.0.0.5/", "private"),
    ("https://172.16.0.1/", "private"),
    ("https://192.168.1.1/", "private"),
    ("https://[fc00::1]/", "private"),
    ("https://169.254.169.254/latest/meta-data", "link-local"),
    ("https://[fe80::1]/", "link-local"),
    ("https://[fe80::1%25eth0]/", "link-local"),
    ("https://224.0.0.1/", "multicast"),
    ("https://[ff02::1]/", "multicast"),
    ("https://0.0.0.0/", "unspecified"),
    ("https://0/", "unspecified"),
    ("https://[::]/", "unspecified"),
    ("https://100.64.0.1/", "carrier-grade NAT"),
    ("https://198.18.0.1/", "benchmarking"),
    ("https://192.0.2.10/", "documentation"),
    ("https://[2001:db8::1]/", "documentation"),
    ("https://240.0.0.1/", "reserved"),
    ("https://255.255.255.255/", "reserved"),
    ("https://[2002:a00:1::]/", "6to4 address of 10.0.0.1, a private"),
    ("https://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/", "Teredo address of 10.0.0.1"),
    ("https://1.2.3.4.5/", "neither an IP address nor a host name"),
    ("https://localhost/", "loopback"),
    ("https://api.localhost/", "loopback"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED_BY_SYNTAX)
def test_refused_without_dns(url: str, why: str) -> None:
    with pytest.raises(UnsafeHook) as refused:
        check_webhook_url(url)
    assert refused.value.reason.startswith("webhook URL refused: ")
    assert why in refused.value.reason

    # resolve_webhook_url refuses the same URLs before it asks any resolver.
    resolver = resolving_to(PUBLIC_V4)
    with pytest.raises(UnsafeHook):
        resolve_webhook_url(url, resolver=resolver)
    assert resolver.calls == []


def test_localhost_is_refused_with_the_real_resolver() -> None:
    with pytest.raises(UnsafeHook, match="loopback"):
        resolve_webhook_url("https://localhost/hook")


@pytest.mark.parametrize(
    ("addresses", "why"),
    [
        (["10.1.2.3"], "resolves to 10.1.2.3, a private address"),
        (["127.0.0.1"], "resolves to 127.0.0.1, a loopback address"),
        (["169.254.169.254"], "link-local"),
        (["fd12::1"], "private"),
        (["::ffff:192.168.0.1"], "private"),
        ([PUBLIC_V4, "10.1.2.3"], "resolves to 10.1.2.3"),  # one bad address is enough
        (["10.1.2.3", PUBLIC_V4], "resolves to 10.1.2.3"),
    ],
)
def test_a_name_resolving_to_an_internal_address_is_refused(addresses: list[str], why: str) -> None:
    with pytest.raises(UnsafeHook) as refused:
        resolve_webhook_url("https://hooks.example.com/run", resolver=resolving_to(*addresses))
    assert why in refused.value.reason


@pytest.mark.parametrize(
    ("url", "host", "port", "path_and_query"),
    [
        ("https://hooks.example.com/run", "hooks.example.com", 443, "/run"),
        ("https://Hooks.Example.COM:8443", "hooks.example.com", 8443, "/"),
        (
            "https://hooks.example.com/a/b?token=x&y=1#frag",
            "hooks.example.com",
            443,
            "/a/b?token=x&y=1",
        ),
        ("https://bücher.example/", "xn--bcher-kva.example", 443, "/"),
    ],
)
def test_a_public_name_passes_and_pins_the_checked_address(
    url: str, host: str, port: int, path_and_query: str
) -> None:
    resolver = resolving_to(PUBLIC_V4, "2606:2800:220:1:248:1893:25c8:1946")

    target = resolve_webhook_url(url, resolver=resolver)

    assert target == WebhookTarget(
        url=url, host=host, port=port, path_and_query=path_and_query, address=PUBLIC_V4
    )
    assert resolver.calls == [host]


def test_a_public_ip_literal_needs_no_resolver() -> None:
    resolver = resolving_to("10.0.0.1")
    target = resolve_webhook_url(f"https://{PUBLIC_V4}:8443/x", resolver=resolver)
    assert (target.host, target.address, target.port) == (PUBLIC_V4, PUBLIC_V4, 8443)
    assert resolver.calls == []


def test_allow_loopback_admits_loopback_only() -> None:
    target = resolve_webhook_url(
        "https://localhost:8443/hook", resolver=resolving_to("127.0.0.1"), allow_loopback=True
    )
    assert target.address == "127.0.0.1"
    with pytest.raises(UnsafeHook, match="private"):
        resolve_webhook_url(
            "https://localhost/hook", resolver=resolving_to("10.0.0.1"), allow_loopback=True
        )
    with pytest.raises(UnsafeHook, match="link-local"):
        check_webhook_url("https://169.254.169.254/", allow_loopback=True)


def test_a_name_that_does_not_resolve_is_a_hook_error() -> None:
    def failing(*args: object, **kwargs: object):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(HookError, match="cannot be resolved") as failed:
        resolve_webhook_url("https://hooks.example.com/", resolver=failing)
    assert not isinstance(failed.value, UnsafeHook)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        (PUBLIC_V4, True),
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("100.64.0.1", False),
        ("169.254.169.254", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("64:ff9b::a00:1", False),
        ("2001:db8::1", False),
    ],
)
def test_is_public_address(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public


def test_the_table_is_big_enough() -> None:
    assert len(REFUSED_BY_SYNTAX) >= 24
