"""delta-spark with its jar from Maven coordinates (hakiri's jar cache): a table Spark writes and
MERGEs into, with Delta's idempotent transaction identity, stays readable by delta-rs.

Spark is the suite's own session: its local Spark Connect server took delta-spark's jar from
the jar cache (`delta_jars`, the resolved `delta_coordinates()`) when it started, as a
command's server does, so no JVM of this test's own has to start. The MERGE is Delta's SQL
`MERGE INTO`, as hakiri runs it over Spark Connect (delta-spark's Python builder needs Delta's
Connect plugin on the server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from hakiri.destinations.context.merge import delta_table_sql

pytestmark = pytest.mark.integration

TXN = ("spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion")


def test_delta_spark_writes_and_merges_once_and_delta_rs_reads_it(tmp_path: Path, spark) -> None:
    table = tmp_path / "t"
    (
        spark.range(0, 1000)
        .selectExpr("id", "cast(id * 2 as string) AS v")
        .write.format("delta")
        .mode("overwrite")
        .option("txnAppId", "hakiri-test")
        .option("txnVersion", 1)
        .save("file://" + str(table))
    )
    spark.range(990, 1010).selectExpr("id", "'new' AS v").createOrReplaceTempView("changes")
    # The suite's session is shared: its transaction identity is this test's only while it runs.
    spark.conf.set(TXN[0], "hakiri-test")
    spark.conf.set(TXN[1], "2")
    try:
        for _attempt in range(2):  # a retried batch: the same transaction identity
            spark.sql(
                f"MERGE INTO {delta_table_sql(table)} AS t USING changes AS s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            ).collect()
    finally:
        for key in TXN:
            spark.conf.unset(key)
        spark.catalog.dropTempView("changes")

    read = DeltaTable(str(table))
    rows = sorted(read.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert len(rows) == 1010
    assert rows[989] == {"id": 989, "v": "1978"} and rows[-1] == {"id": 1009, "v": "new"}
    # The second MERGE carried the same transaction version: Delta skipped it.
    assert [h["operation"] for h in read.history()] == ["MERGE", "WRITE"]
    protocol = read.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
