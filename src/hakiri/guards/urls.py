"""The webhook (SSRF) guard: which URLs a webhook hook may POST to.

`check_webhook_url` reads the URL only (no DNS), so a manifest can be checked
when it is loaded: https only, a host, no `user:password@`, a port in 1..65535,
and a host that is either a DNS name or a *public* IP address. An IP address is
recognised in every spelling a resolver would accept: dotted, decimal
(`2130706433`), hex (`0x7f000001`), octal (`0177.0.0.1`), short (`127.1`),
IPv6 with an embedded IPv4 address (`::ffff:127.0.0.1`, `::127.0.0.1`).

`resolve_webhook_url` then resolves the host and refuses it when *any* of its
addresses is not public; the caller connects to the address it returns, so a
second lookup (DNS rebinding) cannot switch the target after the check.

Not public: loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7),
link-local (169.254/16 with the cloud metadata service, fe80::/10), carrier-grade
NAT, benchmarking, documentation, multicast, reserved and unspecified addresses,
and IPv6 addresses that tunnel or embed one of those.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hakiri.errors import HookError, UnsafeHook

__all__ = ["WebhookTarget", "check_webhook_url", "is_public_address", "resolve_webhook_url"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., Sequence[tuple[Any, ...]]]

HINT = (
    "a webhook must be a public https:// endpoint: no user:password@, and no loopback, "
    "private, link-local or other internal address"
)


@dataclass(frozen=True)
class WebhookTarget:
    """A checked webhook URL and the one address it may be reached at."""

    url: str
    host: str  # ASCII host name or IP address (no brackets): SNI, certificate and Host header
    port: int
    path_and_query: str  # e.g. "/hook?x=1"; the fragment is dropped
    address: str  # the checked IP address to connect to


# True only inside `hakiri.hooks.webhook.allow_loopback_for_tests` (Python code in the test
# suite); no manifest key or environment variable reaches it.
_loopback_for_tests = False


def check_webhook_url(url: str, *, allow_loopback: bool | None = None) -> None:
    """Refuse (UnsafeHook) a URL that is not https, or names a non-public address; no DNS.

    `allow_loopback` defaults to whether the test suite's switch is on."""
    _parse(url, _loopback_for_tests if allow_loopback is None else allow_loopback)


def resolve_webhook_url(
    url: str, *, resolver: Resolver = socket.getaddrinfo, allow_loopback: bool = False
) -> WebhookTarget:
    """Check the URL, resolve its host, and refuse it unless every address is public.

    `allow_loopback` admits 127/8 and ::1 as well; it exists for the test suite's
    own HTTPS server and is never read from a manifest or the environment.
    """
    parsed = _parse(url, allow_loopback)
    if parsed.literal is not None:
        addresses = [parsed.literal]
    else:
        addresses = _resolve(parsed.host, parsed.port, resolver)
        for ip in addresses:
            why = _why_refused(ip, allow_loopback)
            if why:
                raise _refuse(f"{parsed.host} resolves to {ip}, {why}")
    return WebhookTarget(
        url=url,
        host=parsed.host,
        port=parsed.port,
        path_and_query=parsed.path_and_query,
        address=str(addresses[0]),
    )


def is_public_address(ip: IPAddress) -> bool:
    """True when `ip` is a globally routable unicast address a webhook may reach."""
    return _why_not_public(ip) is None


# --------------------------------------------------------------------- the URL


@dataclass(frozen=True)
class _ParsedUrl:
    host: str
    port: int
    path_and_query: str
    literal: IPAddress | None  # the host, when it is an IP address


def _refuse(why: str) -> UnsafeHook:
    return UnsafeHook(f"webhook URL refused: {why}", HINT)


def _parse(url: str, allow_loopback: bool) -> _ParsedUrl:
    if not url:
        raise _refuse("the URL is empty")
    if any(c <= " " or c in "\x7f\\" for c in url):
        raise _refuse("the URL contains a space, a control character or a backslash")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed '[' around an IPv6 address
        raise _refuse(f"it is not a valid URL ({exc})") from None
    if parts.scheme.lower() != "https":
        got = f"{parts.scheme}://" if parts.scheme else "no scheme"
        raise _refuse(f"only https:// URLs are allowed (got {got})")
    if "@" in parts.netloc:
        raise _refuse("credentials in the URL (user:password@) are not allowed")
    host, port = _host_and_port(parts.netloc)
    path_and_query = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not path_and_query.isascii():
        raise _refuse("the path and query must be ASCII (percent-encode the rest)")
    literal = _literal_address(host)
    if literal is None:
        host = _checked_host_name(host, allow_loopback)
    else:
        why = _why_refused(literal, allow_loopback)
        if why:
            odd_spelling = literal.version == 4 and host != str(literal)
            spelled = f"{host} (that is {literal})" if odd_spelling else host
            raise _refuse(f"{spelled} is {why}")
        if "%" in host:
            raise _refuse("IPv6 zone ids (%...) are not allowed")
        if isinstance(literal, ipaddress.IPv6Address) and literal.ipv4_mapped is not None:
            literal = literal.ipv4_mapped  # a public IPv4 address, however it was written
        host = str(literal)
    return _ParsedUrl(host, port, path_and_query, literal)


def _host_and_port(netloc: str) -> tuple[str, int]:
    if netloc.startswith("["):
        close = netloc.find("]")
        if close < 0:
            raise _refuse("the IPv6 address has no closing ']'")
        host, rest = netloc[1:close], netloc[close + 1 :]
        if rest and not rest.startswith(":"):
            raise _refuse(f"unexpected {rest!r} after the IPv6 address")
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_or_empty = netloc.partition(":")
        port_text = port_text_or_empty if colon else None
    if not host:
        raise _refuse("the URL has no host")
    if port_text is None:
        return host, 443
    if not (port_text.isascii() and port_text.isdigit() and 1 <= int(port_text) <= 65535):
        raise _refuse(f"port {port_text!r} is not a number from 1 to 65535")
    return host, int(port_text)


def _literal_address(host: str) -> IPAddress | None:
    """The IP address a resolver would read `host` as, in any spelling; None for a name."""
    if ":" in host:  # only an IPv6 address has a colon here
        address, _, _zone = host.partition("%")
        try:
            return ipaddress.IPv6Address(address)
        except ValueError:
            raise _refuse(f"{host} is not a valid IPv6 address") from None
    name = _ascii_host(host).removesuffix(".")
    last = name.rpartition(".")[2]
    is_hex = last[:2].lower() == "0x" and all(c in "0123456789abcdefABCDEF" for c in last[2:])
    if not (last.isdigit() or is_hex):
        return None
    # The last label is a number, so resolvers read the whole host as IPv4
    # (decimal, octal, hex, or short forms such as 127.1); so does inet_aton.
    if not all(c in "0123456789abcdefxABCDEFX." for c in name):
        raise _refuse(f"{host} is neither an IP address nor a host name")
    try:
        return ipaddress.IPv4Address(socket.inet_aton(name))
    except OSError:
        raise _refuse(f"{host} is neither an IP address nor a host name") from None


def _ascii_host(host: str) -> str:
    # IDNA maps look-alikes (full-width digits, '。') to ASCII *before* the
    # numeric check, as a resolver would.
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise _refuse(f"{host!r} is not a valid host name") from None


def _checked_host_name(host: str, allow_loopback: bool) -> str:
    """The host name in lower-case ASCII without a trailing dot, if it is a valid one."""
    name = _ascii_host(host).removesuffix(".")
    labels = name.split(".")
    valid = len(name) <= 253 and all(
        0 < len(label) <= 63
        and not label.startswith("-")
        and not label.endswith("-")
        and all(c.isalnum() or c in "-_" for c in label)
        for label in labels
    )
    if not valid:
        raise _refuse(f"{host!r} is not a valid host name")
    if labels[-1] == "localhost" and not allow_loopback:  # RFC 6761: always loopback
        raise _refuse(f"{host} is a loopback name")
    return name


# --------------------------------------------------------------------- the addresses


def _resolve(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    try:
        infos = resolver(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise HookError(
            f"webhook host {host} cannot be resolved: {detail}",
            "check the host name, and DNS from where hakiri runs",
        ) from exc
    addresses = [
        ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        for family, _type, _proto, _name, sockaddr in infos
        if family in (socket.AF_INET, socket.AF_INET6)
    ]
    if not addresses:
        raise HookError(
            f"webhook host {host} resolves to no IP address",
            "check the host name, and DNS from where hakiri runs",
        )
    return addresses


def _why_refused(ip: IPAddress, allow_loopback: bool) -> str | None:
    if allow_loopback and ip.version == 4 and ip in _V4_LOOPBACK:
        return None
    if allow_loopback and ip == _V6_LOOPBACK:
        return None
    return _why_not_public(ip)


_V4_LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
_V6_LOOPBACK = ipaddress.IPv6Address("::1")

_NOT_PUBLIC_V4 = [
    (ipaddress.IPv4Network(net), why)
    for net, why in (
        ("0.0.0.0/32", "an unspecified address"),
        ("0.0.0.0/8", "a 'this network' address"),
        ("10.0.0.0/8", "a private address"),
        ("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address (the cloud metadata service lives there)"),
        ("172.16.0.0/12", "a private address"),
        ("192.0.0.0/24", "a reserved (IETF protocol) address"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.88.99.0/24", "a reserved (6to4 relay) address"),
        ("192.168.0.0/16", "a private address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),  # with 255.255.255.255, broadcast
    )
]
_NOT_PUBLIC_V6 = [
    (ipaddress.IPv6Network(net), why)
    for net, why in (
        ("::/128", "an unspecified address"),
        ("::1/128", "a loopback address"),
        ("64:ff9b:1::/48", "a private (local-use NAT64) address"),
        ("100::/64", "a discard-only address"),
        ("2001:2::/48", "a benchmarking address"),
        ("2001:10::/28", "a reserved (ORCHID) address"),
        ("2001:20::/28", "a reserved (ORCHID) address"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("fc00::/7", "a private (unique local) address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a private (site-local) address"),
        ("ff00::/8", "a multicast address"),
    )
]
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


def _why_not_public(ip: IPAddress) -> str | None:
    if isinstance(ip, ipaddress.IPv6Address):
        return _why_not_public_v6(ip)
    for network, label in _NOT_PUBLIC_V4:
        if ip in network:
            return label
    # A backstop from the standard library's registry, which may know more.
    return None if ip.is_global else "not a globally routable address"


def _why_not_public_v6(ip: ipaddress.IPv6Address) -> str | None:
    for network, label in _NOT_PUBLIC_V6:
        if ip in network:
            return label
    # IPv6 forms that carry an IPv4 address: judge the address they carry.
    if ip.ipv4_mapped is not None:
        return _embedded("an IPv4-mapped address", ip.ipv4_mapped)
    if ip in _NAT64:
        return _embedded("a NAT64 address", _low_v4(ip))
    if ip in _IPV4_COMPATIBLE:
        why = _why_not_public(_low_v4(ip))
        return (
            f"an IPv4-compatible address of {_low_v4(ip)}, {why}"
            if why
            else "a deprecated IPv4-compatible address"
        )
    if ip.sixtofour is not None:
        why = _why_not_public(ip.sixtofour)
        return f"a 6to4 address of {ip.sixtofour}, {why}" if why else "a 6to4 tunnel address"
    if ip.teredo is not None:
        server, client = ip.teredo
        why = _why_not_public(client) or _why_not_public(server)
        return f"a Teredo address of {client}, {why}" if why else "a Teredo tunnel address"
    if ip not in _GLOBAL_UNICAST or not ip.is_global:
        return "a reserved address"
    return None


def _embedded(kind: str, v4: ipaddress.IPv4Address) -> str | None:
    why = _why_not_public(v4)
    return f"{kind} of {v4}, {why}" if why else None


def _low_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
