"""A context store in a tmp dir, and a ContextDestination on it with the session's SparkSession."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hakiri.destinations.context.client import ContextDestination
from tests.integration.destinations.context.support import destination


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / ".hakiri" / "context"


@pytest.fixture
def dest(store: Path, spark: SparkSession) -> ContextDestination:
    return destination(store, spark)
