"""The bucket `[sync]` names, through obstore (Rust's object_store, which delta-rs uses too).

Credentials come from HAKIRI_SYNC_KEY_ID / HAKIRI_SYNC_KEY_SECRET and never appear in a
message: every error the store raises is reduced to one line with both masked.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hakiri.errors import SyncFailed
from hakiri.spec.sync import (
    SYNC_ENDPOINT_VARIABLE,
    SYNC_KEY_ID_VARIABLE,
    SYNC_KEY_SECRET_VARIABLE,
    SyncSettings,
)

__all__ = ["Bucket", "RemoteObject"]

# An S3 error document's code and message, e.g. <Code>SignatureDoesNotMatch</Code>.
_S3_CODE = re.compile(r"<Code>([A-Za-z]+)</Code>")
_S3_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")
_REFUSED = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"}
)

# Enough for a slow link, short enough that a dead endpoint is said within a minute.
_CLIENT = {"connect_timeout": "5s", "timeout": "120s"}
_RETRY = {"max_retries": 3, "retry_timeout": timedelta(seconds=30)}


@dataclass(frozen=True)
class RemoteObject:
    size: int
    last_modified: datetime


class Bucket:
    """One bucket and prefix; keys are `<table>/<path in the table>`."""

    def __init__(self, settings: SyncSettings, env: Mapping[str, str] = os.environ) -> None:
        key_id = env.get(SYNC_KEY_ID_VARIABLE, "")
        secret = env.get(SYNC_KEY_SECRET_VARIABLE, "")
        if not key_id or not secret:
            unset = [
                n
                for n, v in ((SYNC_KEY_ID_VARIABLE, key_id), (SYNC_KEY_SECRET_VARIABLE, secret))
                if not v
            ]
            raise SyncFailed(
                f"sync needs the bucket's credentials: {' and '.join(unset)} "
                f"{'is' if len(unset) == 1 else 'are'} not set",
                f"export {SYNC_KEY_ID_VARIABLE} and {SYNC_KEY_SECRET_VARIABLE} (an access key "
                f"that may read and write {settings.bucket})",
            )
        self.url = settings.bucket
        self.endpoint = env.get(SYNC_ENDPOINT_VARIABLE) or settings.endpoint
        self._secrets = (key_id, secret)
        from obstore.store import S3Store

        options: dict[str, Any] = {
            "region": settings.region_name,
            "access_key_id": key_id,
            "secret_access_key": secret,
        }
        if self.endpoint:
            options["endpoint"] = self.endpoint
            options["virtual_hosted_style_request"] = False
        with self.errors("opening"):
            self._store = S3Store(
                settings.bucket_name,
                prefix=settings.prefix or None,
                client_options={
                    **_CLIENT,
                    "allow_http": str(self.endpoint or "").startswith("http://"),
                },
                retry_config=_RETRY,
                **options,
            )

    def where(self) -> str:
        return self.url + (f" at {self.endpoint}" if self.endpoint else "")

    # -- reading ------------------------------------------------------------------------

    def tables(self) -> list[str]:
        """The top-level names under the prefix (each may be a table)."""
        import obstore

        with self.errors("listing"):
            found = obstore.list_with_delimiter(self._store, None)
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in found["common_prefixes"])

    def listing(self, table: str) -> dict[str, RemoteObject]:
        """Every object of a table: path inside the table -> size and age."""
        import obstore

        found = {}
        with self.errors(f"listing {table}/"):
            for batch in obstore.list(self._store, f"{table}/"):
                for meta in batch:
                    path = meta["path"][len(table) + 1 :]
                    found[path] = RemoteObject(meta["size"], meta["last_modified"])
        return found

    def read(self, table: str, path: str) -> bytes | None:
        import obstore
        from obstore.exceptions import NotFoundError

        with self.errors(f"reading {table}/{path}"):
            try:
                return bytes(obstore.get(self._store, f"{table}/{path}").bytes())
            except NotFoundError:
                return None

    def download(self, table: str, path: str, to: Path) -> None:
        """Into `to`, whole or not at all (a temporary file renamed into place)."""
        import obstore

        to.parent.mkdir(parents=True, exist_ok=True)
        with self.errors(f"downloading {table}/{path}"):
            result = obstore.get(self._store, f"{table}/{path}")
            fd, scratch = tempfile.mkstemp(dir=to.parent, prefix=".sync-", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out:
                    for chunk in result.stream():
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(scratch, to)
            except BaseException:
                Path(scratch).unlink(missing_ok=True)
                raise

    # -- writing ------------------------------------------------------------------------

    def upload(self, table: str, path: str, source: Path) -> None:
        import obstore

        with self.errors(f"uploading {table}/{path}"):
            obstore.put(self._store, f"{table}/{path}", source)

    def create(self, table: str, path: str, data: bytes) -> bool:
        """Write `data` at a key that must not exist yet (If-None-Match: *); False when the
        key is there already (with whatever it holds)."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        with self.errors(f"writing {table}/{path}"):
            try:
                obstore.put(self._store, f"{table}/{path}", data, mode="create")
            except (AlreadyExistsError, PreconditionError):
                return False
        return True

    def replace(self, table: str, path: str, data: bytes) -> None:
        import obstore

        with self.errors(f"writing {table}/{path}"):
            obstore.put(self._store, f"{table}/{path}", data)

    def delete(self, table: str, paths: list[str]) -> None:
        import obstore

        if paths:
            with self.errors(f"deleting from {table}/"):
                obstore.delete(self._store, [f"{table}/{p}" for p in paths])

    # -- errors -------------------------------------------------------------------------

    @contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """obstore's errors as one masked line, with what to check."""
        from obstore.exceptions import BaseError, PermissionDeniedError, UnauthenticatedError

        try:
            yield
        except SyncFailed:
            raise
        except (BaseError, OSError, ValueError) as exc:
            line = self._line(exc)
            code = _S3_CODE.search(line)
            if code is not None:  # an S3 error document: its code and message, not its XML
                message = _S3_MESSAGE.search(line)
                line = code.group(1) + (f": {message.group(1)}" if message else "")
            if isinstance(exc, UnauthenticatedError | PermissionDeniedError) or (
                code is not None and code.group(1) in _REFUSED
            ):
                raise SyncFailed(
                    f"the bucket {self.where()} refused hakiri's credentials while {doing}: {line}",
                    f"check {SYNC_KEY_ID_VARIABLE} / {SYNC_KEY_SECRET_VARIABLE} and the key's "
                    "permissions on the bucket",
                ) from None
            hint = f"check `[sync] bucket` and `endpoint` (or {SYNC_ENDPOINT_VARIABLE})"
            if "NoSuchBucket" in line:
                hint = f"create the bucket {self.url.split('://', 1)[1].split('/')[0]} first"
            elif any(w in line.lower() for w in ("connect", "dns", "error sending request")):
                hint = "the endpoint did not answer: check the network and `[sync] endpoint`"
            raise SyncFailed(f"sync failed while {doing} ({self.where()}): {line}", hint) from None

    def _line(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split()).split(" Debug source:", 1)[0]
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text[:400]
