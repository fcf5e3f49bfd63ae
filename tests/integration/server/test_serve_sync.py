"""`hakiri serve` publishes the context store after the runs that change it (`[sync]
after_apply`): a bucket that is not there yet fails the sync, never the run, is alerted once,
and is caught up by the retry once the bucket exists; a later run is published too."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from deltalake import DeltaTable

from hakiri.catalog.store import Catalog
from tests.support.bucket_reader import bucket_table, local_table, same_table
from tests.support.project import Project
from tests.support.s3_server import S3Server
from tests.support.serve import SERVE_SPARK, ServeProcess


def _in_bucket(server: S3Server, uri: str, table: Path) -> bool:
    return same_table(bucket_table(server.storage_options(), uri), local_table(table))


def test_serve_publishes_after_its_runs_and_catches_up_a_failed_sync(
    tmp_path: Path, s3_server: S3Server
) -> None:
    bucket = f"hk-{uuid.uuid4().hex[:8]}"  # created only once serve has failed to sync to it
    project = Project(tmp_path, "", "")
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "served"
        {SERVE_SPARK}
        [sync]
        bucket = "s3://{bucket}/store"
        endpoint = "{s3_server.endpoint}"
        retry_interval = "2s"

        [[pipeline]]
        id = "p"
        schedule = "every 2s"
        source = {{ connector = "files", config = {{ path = "data/*.csv" }} }}
        tables = ["t"]
        """,
    )
    project.write("data/a.csv", "id,name\n1,ada\n2,grace\n")
    table = tmp_path / ".hakiri" / "context" / "t"
    uri = f"s3://{bucket}/store/t"
    try:
        with ServeProcess(tmp_path, env=s3_server.env()) as serve:
            serve.wait_ready()
            serve.wait_for(lambda: "sync: sync to s3://" in serve.log, 120, "a failed sync")
            assert "NoSuchBucket" in serve.log and "the load is committed" in serve.log
            assert s3_server.secret_key not in serve.log
            assert DeltaTable(str(table)).to_pyarrow_table().num_rows == 2  # the run stands

            s3_server.create_bucket(bucket)
            serve.wait_for(lambda: _in_bucket(s3_server, uri, table), 60, "the retried sync")
            project.write("data/b.csv", "id,name\n3,edsger\n")
            serve.wait_for(
                lambda: DeltaTable(str(table)).to_pyarrow_table().num_rows == 3, 60, "run of b.csv"
            )
            serve.wait_for(lambda: _in_bucket(s3_server, uri, table), 60, "the next run's sync")
            assert serve.terminate() == 0
        with Catalog.open(
            f"sqlite:///{tmp_path / '.hakiri' / 'state.sqlite'}", migrate=False
        ) as catalog:
            alerts = [a for a in catalog.alerts() if a.kind == "sync"]
        assert len(alerts) == 1  # once for the run of failures, not once per retry
        assert "NoSuchBucket" in alerts[0].message
    finally:
        shutil.rmtree(s3_server.root / bucket, ignore_errors=True)
