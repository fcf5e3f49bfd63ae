"""A context store in a tmp dir, and a ContextDestination on it with the session's SparkSession.

After every test, each table the test left in the store must open with delta-rs and with
Spark (`tests.support.context_store`): whatever a load mode writes, other readers read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hakiri.destinations.context.client import ContextDestination
from tests.integration.destinations.context.support import destination
from tests.support.context_store import check_readers


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / ".hakiri" / "context"


@pytest.fixture
def dest(store: Path, spark: SparkSession) -> Iterator[ContextDestination]:
    yield destination(store, spark)
    check_readers(store, spark)
