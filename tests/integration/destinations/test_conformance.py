"""What every destination promises the engine, written once and run against each: PostgreSQL,
the context store (Delta), and the engine bench's in-memory `FakeDestination`, which is only
trusted because it passes the same tests.

The promises are the commit protocol of `hakiri.destinations.base.Destination`: staged rows
land on commit, as the load mode says; a batch id the ledger has writes nothing again;
`is_committed` answers from the ledger; `discard` drops a staging area; a failure at
checkpoint('before_dest_commit') leaves the target and the ledger as they were; the target's
columns are reported in the kind's type names; `evolve` adds a column. What only one
destination does (PostgreSQL's locks and backups, Delta's app transaction ids and versions)
is tested beside it, in tests/integration/destinations/load and .../context.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from hakiri.destinations.base import (
    Destination,
    LoadRequest,
    LoadResult,
    SchemaChange,
    StagedBatch,
    TargetColumn,
)
from hakiri.destinations.kinds import kind_of
from hakiri.errors import LoadError
from hakiri.quality.rules import RuleCheck
from hakiri.spec.load import LoadMode, LoadSpec
from tests.support.context_store import as_a_source_reads, read_context_table
from tests.support.fake_destination import FakeDestination

KINDS = ["postgres", "context", "fake"]
ORDERS = "id bigint, name string"
# The modes every kind loads the same FIRST and SECOND rows with. cdc_mirror stages other
# rows (a change stream's net changes, with its control columns): it has tests of its own
# below, driven by those staged rows, as a batch of the stream would stage them.
MODES = {
    "append": {},
    "truncate": {},
    "upsert": {"upsert_key": ["id"]},
}
FIRST = [(1, "ada"), (2, "grace")]
SECOND = [(2, "grace hopper"), (3, "edsger")]
AFTER_SECOND = {
    "append": [(1, "ada"), (2, "grace"), (2, "grace hopper"), (3, "edsger")],
    "truncate": SECOND,
    "upsert": [(1, "ada"), (2, "grace hopper"), (3, "edsger")],
}


@dataclass
class Harness:
    """One destination under test, and how the test looks at it without going through it."""

    kind: str  # the kind whose type names its columns have
    destination: Destination
    schema: str | None
    spark: SparkSession
    committed_rows: Callable[[str], list[tuple[Any, ...]]]  # a target's rows, sorted
    staging_exists: Callable[[StagedBatch], bool]
    # A Delta table's commits, oldest first: (operation, hakiri's batch id). None for a kind
    # without versions; where there are, a batch is ONE commit, as it is one transaction.
    commits: Callable[[str], list[tuple[str, str | None]]] | None = None
    pipeline: str = ""

    def __post_init__(self) -> None:
        self.pipeline = f"pipe_{uuid.uuid4().hex[:10]}"  # ledgers are shared: one of its own

    def request(
        self, table: str = "orders", mode: str = "append", batch: str = "batch-1", **load: Any
    ) -> LoadRequest:
        return LoadRequest(
            project="shop",
            pipeline_id=self.pipeline,
            run_id=f"run-{uuid.uuid4().hex[:6]}",
            batch_id=batch,
            target_schema=self.schema,
            target_table=table,
            load=LoadSpec(mode=LoadMode(mode), **load),
        )

    def stage(
        self, rows: Sequence[tuple[Any, ...]], request: LoadRequest, ddl: str = ORDERS
    ) -> StagedBatch:
        frame = as_a_source_reads(self.spark.createDataFrame([tuple(r) for r in rows], ddl))
        return self.destination.stage(RuleCheck.unchecked(frame), request)

    def load(
        self,
        rows: Sequence[tuple[Any, ...]],
        request: LoadRequest,
        checkpoint: Callable[[str], None] | None = None,
    ) -> LoadResult:
        return self.destination.commit(
            self.stage(rows, request), request, checkpoint or (lambda point: None)
        )

    def rows(self, table: str = "orders") -> list[tuple[Any, ...]]:
        return self.committed_rows(table)

    def column_type(self, spark_type: str) -> str | None:
        return kind_of(self.kind).column_type(spark_type)


@pytest.fixture(params=KINDS)
def harness(
    request: pytest.FixtureRequest, spark: SparkSession, tmp_path: Path
) -> Iterator[Harness]:
    kind = request.param
    if kind == "postgres":
        import psycopg

        from tests.integration.destinations.load import support as pg

        url, schema = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_schema")
        with psycopg.connect(url, autocommit=True) as conn:
            yield Harness(
                "postgres",
                pg.destination(url, schema),
                schema,
                spark,
                lambda table: pg.rows_of(conn, schema, table),
                lambda staged: pg.exists(conn, schema, staged.staging_table),
            )
    elif kind == "context":
        from tests.integration.destinations.context import support as delta

        store = tmp_path / ".hakiri" / "context"

        def delta_rows(table: str) -> list[tuple[Any, ...]]:
            if not (store / table / "_delta_log").is_dir():
                return []
            read_context_table(store / table, spark)  # Spark opens it too
            return sorted(tuple(r.values()) for r in delta.table_rows(store / table))

        yield Harness(
            "context",
            delta.destination(store, spark),
            None,
            spark,
            delta_rows,
            lambda staged: staged.staging_table in delta.staging_dirs(store),
            lambda table: [
                (e["operation"], e.get("hakiri.batch_id")) for e in delta.history_of(store / table)
            ],
        )
    else:
        fake = FakeDestination("context")
        yield Harness(
            "context",
            fake,
            None,
            spark,
            lambda table: sorted(tuple(r.values()) for r in fake.rows(table)),
            lambda staged: staged.staging_table in fake.staging,
        )


class Checkpoints:
    """A checkpoint callback that records the points it passes and may fail at one."""

    def __init__(self, fail_at: str | None = None) -> None:
        self.seen: list[str] = []
        self.fail_at = fail_at

    def __call__(self, point: str) -> None:
        self.seen.append(point)
        if point == self.fail_at:
            raise Failure(point)


class Failure(Exception):
    pass


# ---------------------------------------------------------------- stage + commit


@pytest.mark.parametrize("mode", MODES)
def test_staged_rows_land_on_commit_as_the_load_mode_says(harness: Harness, mode: str) -> None:
    options = MODES[mode]
    first = harness.load(FIRST, harness.request(mode=mode, **options))
    assert harness.rows() == FIRST
    assert (first.rows_loaded, first.already_committed) == (2, False)

    second = harness.load(SECOND, harness.request(mode=mode, batch="batch-2", **options))

    assert (second.rows_loaded, second.already_committed) == (2, False)
    assert harness.rows() == AFTER_SECOND[mode]


def test_staged_rows_are_invisible_until_the_commit(harness: Harness) -> None:
    harness.load(FIRST, harness.request())
    request = harness.request(batch="batch-2")

    staged = harness.stage(SECOND, request)

    assert staged.rows == 2 and harness.staging_exists(staged)
    assert harness.rows() == FIRST
    harness.destination.commit(staged, request, lambda point: None)
    assert not harness.staging_exists(staged)
    assert harness.rows() == AFTER_SECOND["append"]


# ---------------------------------------------------------------- the ledger


@pytest.mark.parametrize("mode", MODES)
def test_a_batch_committed_before_writes_nothing_again(harness: Harness, mode: str) -> None:
    request = harness.request(mode=mode, **MODES[mode])
    harness.load(FIRST, request)

    again = harness.request(mode=mode, **MODES[mode])  # the same batch, in another run
    staged = harness.stage(SECOND, again)
    checkpoints = Checkpoints()
    result = harness.destination.commit(staged, again, checkpoints)

    assert (result.rows_loaded, result.already_committed) == (0, True)
    assert checkpoints.seen == []  # no commit, so no point of one
    assert harness.rows() == FIRST
    assert not harness.staging_exists(staged)


def test_is_committed_answers_from_the_ledger_per_batch_and_target(harness: Harness) -> None:
    request = harness.request()
    assert not harness.destination.is_committed(request)  # no target yet

    harness.load(FIRST, request)

    assert harness.destination.is_committed(request)
    assert harness.destination.is_committed(harness.request())  # whichever run asks
    assert not harness.destination.is_committed(harness.request(batch="batch-2"))
    assert not harness.destination.is_committed(harness.request(table="other"))


# ---------------------------------------------------------------- discard, failures


def test_discard_drops_the_staging_area(harness: Harness) -> None:
    staged = harness.stage(FIRST, harness.request())
    assert harness.staging_exists(staged)

    harness.destination.discard(staged)

    assert not harness.staging_exists(staged)
    assert harness.destination.target_columns(harness.request()) is None
    assert not harness.destination.is_committed(harness.request())


@pytest.mark.parametrize("mode", MODES)
def test_a_failure_before_the_commit_leaves_target_and_ledger_unchanged(
    harness: Harness, mode: str
) -> None:
    harness.load(FIRST, harness.request(mode=mode, batch="seed", **MODES[mode]))
    request = harness.request(mode=mode, **MODES[mode])
    checkpoints = Checkpoints(fail_at="before_dest_commit")

    staged = harness.stage(SECOND, request)

    with pytest.raises(Failure):
        harness.destination.commit(staged, request, checkpoints)

    assert checkpoints.seen == ["before_dest_commit"]
    assert harness.rows() == FIRST
    assert not harness.destination.is_committed(request)
    assert not harness.staging_exists(staged)  # rolled back and cleaned up
    # The batch is loaded, once, when it is tried again.
    retried = harness.load(SECOND, harness.request(mode=mode, **MODES[mode]))
    assert retried.rows_loaded == 2 and harness.rows() == AFTER_SECOND[mode]


def test_the_checkpoints_surround_the_commit(harness: Harness) -> None:
    request = harness.request()
    checkpoints = Checkpoints(fail_at="after_dest_commit")

    with pytest.raises(Failure):
        harness.load(FIRST, request, checkpoints)

    assert checkpoints.seen == ["before_dest_commit", "after_dest_commit"]
    assert harness.destination.is_committed(request)  # committed before the point was reached
    assert harness.rows() == FIRST


# ---------------------------------------------------------------- target columns, evolve


def test_target_columns_are_the_loaded_columns_in_the_kinds_type_names(harness: Harness) -> None:
    assert harness.destination.target_columns(harness.request()) is None

    harness.load(FIRST, harness.request())

    columns = harness.destination.target_columns(harness.request())
    assert columns is not None
    assert [(c.name, c.type) for c in columns] == [
        ("id", harness.column_type("bigint")),
        ("name", harness.column_type("string")),
    ]


def test_evolve_adds_a_column_null_in_the_rows_there_are(harness: Harness) -> None:
    harness.load(FIRST, harness.request())
    email = TargetColumn("email", harness.column_type("string") or "")

    harness.destination.evolve(harness.request(), SchemaChange(add=(email,)))

    columns = harness.destination.target_columns(harness.request())
    assert columns is not None and [c.name for c in columns] == ["id", "name", "email"]
    assert columns[-1].type == email.type
    assert harness.rows() == [(1, "ada", None), (2, "grace", None)]
    request = harness.request(batch="batch-2")
    staged = harness.stage([(3, "edsger", "e@utexas.edu")], request, f"{ORDERS}, email string")
    harness.destination.commit(staged, request, lambda point: None)
    assert harness.rows()[-1] == (3, "edsger", "e@utexas.edu")


# ---------------------------------------------------------------- cdc_mirror

NOTES = "id bigint, name string, note string"
CHANGES = f"{NOTES}, _hakiri_cdc_op string, _hakiri_cdc_unchanged string"


def _mirror_request(harness: Harness, batch: str) -> LoadRequest:
    return harness.request(mode="cdc_mirror", batch=batch, upsert_key=["id"])


def _refused_by_the_fake(harness: Harness) -> bool:
    """The fake writes by insert, replace and merge only (no engine test needs a change
    stream): it refuses cdc_mirror out loud, and that refusal is what it is held to."""
    if not isinstance(harness.destination, FakeDestination):
        return False
    with pytest.raises(LoadError, match="the fake destination writes by"):
        harness.stage([(1, "ada", None, "u", None)], _mirror_request(harness, "c-1"), CHANGES)
    return True


def test_cdc_mirror_deletes_updates_and_inserts_by_key_keeping_unchanged_values(
    harness: Harness,
) -> None:
    if _refused_by_the_fake(harness):
        return
    seed = harness.request(batch="seed")
    harness.destination.commit(
        harness.stage([(1, "ada", "n1"), (2, "grace", "n2"), (3, "edsger", "n3")], seed, NOTES),
        seed,
        lambda point: None,
    )
    request = _mirror_request(harness, "changes-1")
    changes = [
        (1, None, None, "d", None),  # gone
        (2, "grace hopper", None, "u", '["note"]'),  # updated; its note left out of the WAL
        (4, "barbara", "n4", "u", None),  # new
        (5, None, None, "d", None),  # gone, and never loaded
    ]

    staged = harness.stage(changes, request, CHANGES)
    result = harness.destination.commit(staged, request, lambda point: None)

    assert (result.rows_loaded, result.rows_deleted) == (2, 1)
    after = [(2, "grace hopper", "n2"), (3, "edsger", "n3"), (4, "barbara", "n4")]
    assert harness.rows() == after
    columns = harness.destination.target_columns(request)
    assert columns is not None and [c.name for c in columns] == ["id", "name", "note"]
    assert not harness.staging_exists(staged)
    commits = harness.commits("orders") if harness.commits else None
    if commits is not None:  # deletes, updates and inserts in one MERGE, as in one transaction
        assert len(commits) == 2 and commits[-1] == ("MERGE", "changes-1"), commits
    # The same range again (a crash after the commit): the ledger has it, nothing is applied.
    again = harness.destination.commit(
        harness.stage(changes, request, CHANGES), request, lambda point: None
    )
    assert again.already_committed and harness.rows() == after
    assert (harness.commits("orders") if harness.commits else None) == commits


def test_cdc_mirror_creates_the_target_without_its_control_columns(harness: Harness) -> None:
    if _refused_by_the_fake(harness):
        return
    request = _mirror_request(harness, "snapshot-1")
    staged = harness.stage(
        [(1, "ada", "n1", "u", None), (2, None, None, "d", None)], request, CHANGES
    )

    result = harness.destination.commit(staged, request, lambda point: None)

    assert result.created_target and (result.rows_loaded, result.rows_deleted) == (1, 0)
    assert harness.rows() == [(1, "ada", "n1")]
    columns = harness.destination.target_columns(request)
    assert columns is not None and [c.name for c in columns] == ["id", "name", "note"]
