"""`${VAR}` placeholders in manifest strings.

Placeholders stay unexpanded in the models, the catalog and plan output; they
are expanded only where a value is used (opening a connection). `${VAR:-default}`
gives a default; `$${` writes a literal `${`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_PLACEHOLDER = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Reference:
    path: tuple[str | int, ...]
    variable: str
    has_default: bool


class MissingVariable(KeyError):
    def __init__(self, variable: str) -> None:
        super().__init__(variable)
        self.variable = variable


def references(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[Reference]:
    """Every `${VAR}` in a parsed manifest document, with its key path."""
    if isinstance(data, str):
        for match in _PLACEHOLDER.finditer(data):
            if match.group(1):
                yield Reference(path, match.group(1), match.group(2) is not None)
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from references(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from references(value, (*path, i))


def expand(text: str, env: Mapping[str, str]) -> str:
    """Replace placeholders with environment values; raises MissingVariable."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise MissingVariable(name)

    return _PLACEHOLDER.sub(substitute, text)


def expand_tree(data: Any, env: Mapping[str, str]) -> Any:
    """`expand` applied to every string in a nested dict/list."""
    if isinstance(data, str):
        return expand(data, env)
    if isinstance(data, dict):
        return {k: expand_tree(v, env) for k, v in data.items()}
    if isinstance(data, list):
        return [expand_tree(v, env) for v in data]
    return data


# `password=...` in a key=value connection string or a URL query (quoted or not).
_PASSWORD_PARAM = re.compile(r"""(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)""", re.IGNORECASE)
# A Spark Connect URL's bearer token: sc://host:15002/;token=...;user_id=...
_TOKEN_PARAM = re.compile(r"(;token=)[^;\s]*", re.IGNORECASE)


def mask_url(url: str) -> str:
    """A connection string fit for messages and logs: every password or token replaced by ***.

    Handles postgresql://user:secret@host/db, ?password=secret, `password=secret` key=value
    forms and a Spark Connect URL's `;token=secret`.
    """
    masked = url
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            userinfo, _, hostinfo = parts.netloc.rpartition("@")
            masked = urlunsplit(
                parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:***@{hostinfo}")
            )
    except ValueError:
        pass
    return _TOKEN_PARAM.sub(r"\1***", _PASSWORD_PARAM.sub(r"\1***", masked))


def password_of(url: str) -> str | None:
    """The password a connection string carries, if any (to scrub it from driver messages)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        return password
    match = _PASSWORD_PARAM.search(url)
    return match.group(2).strip("'") if match else None


def first_line_without_password(exc: BaseException, url: str) -> str:
    """A driver error as one line, with the connection's password scrubbed from it."""
    lines = str(exc).strip().splitlines()
    line = lines[0].strip() if lines else type(exc).__name__
    password = password_of(url)
    return line.replace(password, "***") if password else line
