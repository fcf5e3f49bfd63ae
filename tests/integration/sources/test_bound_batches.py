"""A file batch is bound to the bytes it was planned from: reading it checks them again
before Spark reads the file, and once more after the rows were read."""

from __future__ import annotations

from pathlib import Path

import pytest

from hakiri.catalog.records import Batch
from hakiri.catalog.store import Catalog
from hakiri.errors import SourceChanged
from hakiri.sources.files.source import FileSource
from hakiri.spec.pipeline import PipelineSpec

SPEC = {
    "id": "p",
    "source": {
        "connector": "files",
        "config": {"path": "in/*.csv", "columns": {"id": "bigint", "name": "string"}},
    },
    "tables": ["t"],
}


@pytest.fixture
def planned(tmp_path: Path) -> tuple[FileSource, Batch]:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id,name\n1,ada\n")
    spec = PipelineSpec.model_validate(SPEC)
    source = FileSource(tmp_path, spec, spec.source.config)  # type: ignore[arg-type]
    with Catalog.open(f"sqlite:///{tmp_path / 'state.sqlite'}", migrate=True) as catalog:
        [table] = spec.table_specs()
        catalog.add_batches("p", source.plan_batches(table, catalog).batches)
        [batch] = catalog.batches("p")
    return source, batch


def test_an_unchanged_file_reads_and_verifies(planned, spark) -> None:
    source, batch = planned
    read = source.read(spark, batch)
    assert read.frame.count() == 1
    assert read.verify() == 0


def test_a_file_changed_after_planning_is_superseded_before_spark_reads_it(
    planned, spark, tmp_path: Path
) -> None:
    source, batch = planned
    (tmp_path / "in" / "a.csv").write_text("id,name\n1,ada\n2,grace\n")
    with pytest.raises(SourceChanged) as changed:
        source.read(spark, batch)
    assert changed.value.status == "superseded"
    assert changed.value.reason.startswith("in/a.csv changed before it was loaded (planned from")


def test_a_file_deleted_after_planning_is_gone(planned, spark, tmp_path: Path) -> None:
    source, batch = planned
    (tmp_path / "in" / "a.csv").unlink()
    with pytest.raises(SourceChanged) as gone:
        source.read(spark, batch)
    assert gone.value.status == "gone"
    assert "in/a.csv is gone" in gone.value.reason


def test_a_file_changed_while_spark_read_it_fails_the_verdict(
    planned, spark, tmp_path: Path
) -> None:
    source, batch = planned
    read = source.read(spark, batch)
    assert read.frame.count() == 1  # Spark read the planned bytes ...
    (tmp_path / "in" / "a.csv").write_text("id,name\n9,someone else\n")  # ... then they changed
    with pytest.raises(SourceChanged) as changed:
        read.verify()
    assert changed.value.status == "superseded"
