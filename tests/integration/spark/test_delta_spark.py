"""delta-spark with its jar from Maven coordinates (hakiri's jar cache): a table Spark writes and
MERGEs into, with Delta's idempotent transaction identity, stays readable by delta-rs.

Spark runs in a process of its own: the suite's session has no Delta jars, and a JVM takes
its jars only when it starts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent("""
    import sys
    from delta.tables import DeltaTable as SparkDeltaTable
    from hakiri.spark.delta import DELTA_SESSION_CONF, delta_coordinates
    from hakiri.spark.packages import resolve_packages
    from hakiri.spark.session import build_spark_session

    path = sys.argv[1]
    spark = build_spark_session(
        "local[1]", conf=DELTA_SESSION_CONF, jars=list(resolve_packages(delta_coordinates()))
    )
    (spark.range(0, 1000).selectExpr("id", "cast(id * 2 as string) AS v")
        .write.format("delta").mode("overwrite")
        .option("txnAppId", "hakiri-test").option("txnVersion", 1).save(path))
    changes = spark.range(990, 1010).selectExpr("id", "'new' AS v")
    spark.conf.set("spark.databricks.delta.write.txnAppId", "hakiri-test")
    spark.conf.set("spark.databricks.delta.write.txnVersion", "2")
    for attempt in range(2):  # a retried batch: the same transaction identity
        (SparkDeltaTable.forPath(spark, path).alias("t")
            .merge(changes.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    spark.stop()
""")


def test_delta_spark_writes_and_merges_once_and_delta_rs_reads_it(tmp_path: Path) -> None:
    table = tmp_path / "t"

    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(table)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    read = DeltaTable(str(table))
    rows = sorted(read.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert len(rows) == 1010
    assert rows[989] == {"id": 989, "v": "1978"} and rows[-1] == {"id": 1009, "v": "new"}
    # The second MERGE carried the same transaction version: Delta skipped it.
    assert [h["operation"] for h in read.history()] == ["MERGE", "WRITE"]
    protocol = read.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
