"""The suite's own S3-compatible server really runs and behaves like the stores sync writes to:
Delta tables over it, signatures checked, conditional writes honoured."""

from __future__ import annotations

import deltalake
import obstore
import pyarrow as pa
import pytest
from obstore.exceptions import AlreadyExistsError, BaseError
from obstore.store import S3Store

from tests.support.s3_server import S3Server

pytestmark = pytest.mark.engine_free("an object store spoken to over HTTP by deltalake and obstore")

ORDERS = pa.table({"order_id": [1, 2, 3], "customer": ["Ada", "Grace", "Zoë"]})


def _store(server: S3Server, bucket: str, *, secret: str | None = None) -> S3Store:
    return S3Store(
        bucket,
        endpoint=server.endpoint,
        region=server.region,
        access_key_id=server.access_key,
        secret_access_key=secret or server.secret_key,
        # Path-style addressing (http://127.0.0.1:PORT/bucket/key): a loopback address has
        # no bucket subdomains. False is obstore's default; said here, as sync must say it.
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )


def test_a_delta_table_round_trips_and_appends(s3_server: S3Server, s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/orders"
    options = s3_server.storage_options()

    deltalake.write_deltalake(uri, ORDERS, storage_options=options)
    deltalake.write_deltalake(uri, ORDERS, storage_options=options, mode="append")

    table = deltalake.DeltaTable(uri, storage_options=options)
    assert table.version() == 1
    assert table.to_pyarrow_table() == pa.concat_tables([ORDERS, ORDERS])
    first = deltalake.DeltaTable(uri, storage_options=options, version=0)
    assert first.to_pyarrow_table() == ORDERS
    # The objects are plain files under the server's root, where a test can look at them.
    log = s3_server.root / s3_bucket / "orders" / "_delta_log"
    assert sorted(p.name for p in log.glob("*.json")) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]


def test_a_wrong_secret_is_refused(s3_server: S3Server, s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/orders"
    deltalake.write_deltalake(uri, ORDERS, storage_options=s3_server.storage_options())
    wrong = {**s3_server.storage_options(), "AWS_SECRET_ACCESS_KEY": "not-the-secret"}

    with pytest.raises(OSError, match="403"):
        deltalake.DeltaTable(uri, storage_options=wrong)
    with pytest.raises(BaseError, match="SignatureDoesNotMatch"):
        obstore.put(_store(s3_server, s3_bucket, secret="not-the-secret"), "intruder", b"x")
    assert not (s3_server.root / s3_bucket / "intruder").exists()


def test_a_conditional_put_of_an_existing_key_is_refused(
    s3_server: S3Server, s3_bucket: str
) -> None:
    store = _store(s3_server, s3_bucket)
    assert list(obstore.list(store)) == []  # a new bucket is there, and empty

    obstore.put(store, "lease", b"first", mode="create")  # If-None-Match: *
    with pytest.raises(AlreadyExistsError):
        obstore.put(store, "lease", b"second", mode="create")

    assert bytes(obstore.get(store, "lease").bytes()) == b"first"
    assert (s3_server.root / s3_bucket / "lease").read_bytes() == b"first"
