"""`[sync]`: where the context store is published, an S3-compatible bucket.

    [sync]
    bucket = "r2://oh-context"
    endpoint = "https://<accountid>.r2.cloudflarestorage.com"
    region = "auto"
    # credentials via env: HAKIRI_SYNC_KEY_ID / HAKIRI_SYNC_KEY_SECRET

`hakiri sync` (destinations.context.sync) pushes the store's Delta tables there; nothing
here opens a connection, so `validate` and `plan` need no network.
"""

from __future__ import annotations

from typing import Annotated, Self
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from hakiri.spec.base import Duration, SpecModel

__all__ = [
    "SYNC_ENDPOINT_VARIABLE",
    "SYNC_KEY_ID_VARIABLE",
    "SYNC_KEY_SECRET_VARIABLE",
    "SyncSettings",
]

SYNC_KEY_ID_VARIABLE = "HAKIRI_SYNC_KEY_ID"
SYNC_KEY_SECRET_VARIABLE = "HAKIRI_SYNC_KEY_SECRET"
# Points every sync at another endpoint (a test server, a proxy) without editing the manifest.
SYNC_ENDPOINT_VARIABLE = "HAKIRI_SYNC_ENDPOINT"

# s3:// or r2://, a bucket name as S3 allows it, then an optional prefix inside the bucket.
_BUCKET = r"^(s3|r2)://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9._/-]*)?$"


class SyncSettings(SpecModel):
    """Publishes the context store's Delta tables to an S3-compatible bucket (`hakiri sync`),
    where other machines, DuckDB, Spark or delta-rs read them."""

    bucket: Annotated[str, Field(pattern=_BUCKET)] = Field(
        description="The bucket, and a prefix inside it if any: 's3://name', 'r2://name/store'. "
        "Each table lands under <prefix>/<table>/, laid out as it is on disk."
    )
    endpoint: Annotated[str, Field(pattern=r"^https?://\S+$")] | None = Field(
        None,
        description="The S3 API's URL (any S3-compatible store; R2 needs its account's). "
        f"Unset: AWS S3 itself. {SYNC_ENDPOINT_VARIABLE} overrides it.",
    )
    region: str | None = Field(
        None,
        min_length=1,
        description="The bucket's region; default 'auto' for r2://, 'us-east-1' otherwise.",
    )
    after_apply: bool = Field(
        True,
        description="Sync after every apply (and serve run) that changed the store. A failed "
        "sync never fails the load, which is committed: it is alerted, and the next sync "
        "catches up.",
    )

    retry_interval: Duration = Field(
        "30s", description="In serve, how soon a sync that failed is tried again."
    )

    @model_validator(mode="after")
    def _r2_needs_its_endpoint(self) -> Self:
        if self.scheme == "r2" and self.endpoint is None:
            raise ValueError(
                "an r2:// bucket needs `endpoint` (https://<accountid>.r2.cloudflarestorage.com)"
            )
        return self

    @property
    def scheme(self) -> str:
        return self.bucket.split("://", 1)[0]

    @property
    def bucket_name(self) -> str:
        return urlsplit(self.bucket).netloc

    @property
    def prefix(self) -> str:
        """The path inside the bucket the tables go under, '' for the bucket's root."""
        return urlsplit(self.bucket).path.strip("/")

    @property
    def region_name(self) -> str:
        return self.region or ("auto" if self.scheme == "r2" else "us-east-1")
