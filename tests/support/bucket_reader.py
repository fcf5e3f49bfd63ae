"""Another reader of a synced bucket: delta-rs, in a process of its own, as a user's would be.

    python -m tests.support.bucket_reader digest URI           one JSON line: version, digest
    python -m tests.support.bucket_reader poll STOP OUT URI…   read each table again and
        again until the file STOP exists; one JSON line per read into OUT

The bucket's address and credentials come from the AWS_* variables of `S3Server.
storage_options()`. A process of its own because delta-rs's object-store runtime can abort
an interpreter at exit while its threads still run; here that would be the reader's
failure, not the test's. Rows are read by delta-rs's own query engine (QueryBuilder), not
through pyarrow's dataset over delta-rs's Python filesystem: that scan, polled in a loop
against a bucket, hung in pyarrow's serial executor.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["bucket_table", "local_table", "same_table", "table_digest"]

_OPTIONS = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_ALLOW_HTTP",
)


def table_digest(table: Any) -> tuple[int, str]:
    """(rows, digest) of an open DeltaTable's rows at its version, in no particular order."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    rows = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    rows = rows.to_pylist()
    lines = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return len(rows), hashlib.sha256("\n".join(lines).encode()).hexdigest()


def bucket_table(storage_options: dict[str, str], uri: str) -> dict[str, Any] | None:
    """What a delta-rs reader of the bucket sees at `uri` now, read in a process of its own:
    version, rows, digest; None when it cannot open the table."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "tests.support.bucket_reader", "digest", uri],
        env={**os.environ, **storage_options},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stdout) if done.returncode == 0 else None


def local_table(path: Path, version: int | None = None) -> dict[str, Any]:
    """The same of a local table (at `version`, else its latest)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path), version=version)
    rows, digest = table_digest(table)
    return {"version": table.version(), "rows": rows, "digest": digest}


def same_table(remote: dict[str, Any] | None, local: dict[str, Any]) -> bool:
    """The bucket's table is the local one: same version, same rows."""
    keys = ("version", "rows", "digest")
    return remote is not None and all(remote[k] == local[k] for k in keys)


def _read(uri: str) -> dict[str, Any]:
    from deltalake import DeltaTable

    options = {k: os.environ[k] for k in _OPTIONS if k in os.environ}
    table = DeltaTable(uri, storage_options=options)
    rows, digest = table_digest(table)
    return {"uri": uri, "version": table.version(), "rows": rows, "digest": digest}


def _poll(stop: Path, out: Path, uris: list[str]) -> None:
    with out.open("a") as sink:
        while not stop.exists():
            for uri in uris:
                try:
                    seen = _read(uri)
                except Exception as exc:  # every failure is recorded: the test judges it
                    seen = {"uri": uri, "error": f"{type(exc).__name__}: {exc}"[:500]}
                sink.write(json.dumps(seen) + "\n")
                sink.flush()
            time.sleep(0.02)


def main(argv: list[str]) -> None:
    if argv[0] == "digest":
        print(json.dumps(_read(argv[1])))
    elif argv[0] == "poll":
        _poll(Path(argv[1]), Path(argv[2]), argv[3:])
    else:
        raise SystemExit(f"unknown verb {argv[0]!r}")
    sys.stdout.flush()
    os._exit(0)  # no interpreter shutdown under delta-rs's runtime threads (see above)


if __name__ == "__main__":
    main(sys.argv[1:])
