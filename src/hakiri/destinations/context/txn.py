"""A batch's transaction identity on a Spark session, and which writer carries it.

delta-spark takes a MERGE's identity (txnAppId, txnVersion, userMetadata) from session
settings only, so `txn_session` gives one piece of work a session of its own with them set.
On an engine whose Delta writer drops the identity (Sail), delta-rs commits instead and reads
the same settings back (`txn_of`): the identity has one source, whichever writer commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.context.commit import TXN_VERSION, app_id, user_metadata

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["commits_by_delta_rs", "txn_of", "txn_session"]


def commits_by_delta_rs(spark: Any) -> bool:
    """Does delta-rs commit for this session's engine (one whose Delta writer drops txnAppId)?"""
    from hakiri.spark.engines import engine_of_session, support

    return support(engine_of_session(spark), "context_append").status == "neutral"


def txn_session(
    spark: SparkSession, request: LoadRequest, metadata: dict[str, str]
) -> SparkSession:
    """A session of its own (`isolated_session`) whose settings give a MERGE the batch's
    transaction identity and metadata: a MERGE takes them only from the session, and
    concurrent chunk workers must never see each other's."""
    from hakiri.spark.session import isolated_session

    return isolated_session(
        spark,
        {
            "spark.databricks.delta.write.txnAppId": app_id(request),
            "spark.databricks.delta.write.txnVersion": str(TXN_VERSION),
            "spark.databricks.delta.commitInfo.userMetadata": user_metadata(metadata),
        },
    )


_TXN_KEYS = (
    "spark.databricks.delta.write.txnAppId",
    "spark.databricks.delta.write.txnVersion",
    "spark.databricks.delta.commitInfo.userMetadata",
)


def txn_of(session: SparkSession) -> tuple[str, int, str] | None:
    """The transaction identity `txn_session` gave this session: (app id, version, userMetadata),
    or None. delta-rs commits on engines without Delta's txn identity read it from here, so
    the batch's identity has one source whichever writer commits."""
    values = [session.conf.get(key, None) for key in _TXN_KEYS]
    if not values[0]:
        return None
    return str(values[0]), int(values[1] or TXN_VERSION), str(values[2] or "{}")
