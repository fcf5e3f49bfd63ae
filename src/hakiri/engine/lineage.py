"""One run's OpenLineage events (`observability.lineage`), from what the run saw.

START when the run starts, COMPLETE when it succeeds, FAIL (with the error) otherwise; the
run id is the hakiri run's, the job the pipeline. Inputs are the source tables
(`sources.kinds`: each kind's `lineage`), outputs the targets (their kind's `lineage_dataset`). What only the run
knows comes from it: the source's columns from the first batch read of each table, the
target's columns (in its own types) as the run ends, the rows loaded into each target, and
each target column's source columns through the transforms and renames
(`planner.transforms.column_lineage`).

Off, a recorder does nothing and costs nothing: no client, no schema asked for.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hakiri.destinations.base import Destination, LoadRequest
from hakiri.destinations.kinds import kind_of
from hakiri.engine.controls import Outcome
from hakiri.engine.targets import Targets
from hakiri.errors import HakiriError
from hakiri.observability.lineage import InputField, LineageDataset, RunLineage, lineage_from_env
from hakiri.planner.evolution import followed_renames
from hakiri.planner.transforms import column_lineage
from hakiri.sources.kinds import source_datasets
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec, TableSpec

__all__ = ["LineageRecorder"]


@dataclass
class _Table:
    inputs: list[tuple[str, str]]  # (namespace, name) of each source dataset
    output: tuple[str, str] | None  # (namespace, name) of the target
    source_fields: tuple[tuple[str, str | None], ...] | None = None
    seen: tuple[Destination, LoadRequest] | None = None  # of its first batch, to ask the target
    rows: int = 0
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)  # target <- source columns


class LineageRecorder:
    def __init__(
        self,
        project: Project,
        spec: PipelineSpec,
        targets: Targets,
        env: Mapping[str, str],
    ) -> None:
        self.spec = spec
        self.sender: RunLineage | None = lineage_from_env(env)
        self._lock = threading.Lock()
        self._tables: dict[str, _Table] = {}
        if self.sender is None:
            return
        for table in spec.table_specs():
            self._tables[table.name] = _Table(
                _named(
                    lambda t=table: source_datasets(project.root, project.settings, spec, t, env)
                )
                or [],
                _named(lambda t=table: _target_dataset(project, spec, targets, t, env)),
            )

    @contextlib.contextmanager
    def run(self, run_id: str, outcome: Outcome) -> Iterator[None]:
        """START now; COMPLETE or FAIL as the block ends (as `outcome` says, or as it raises)."""
        if self.sender is None:
            yield
            return
        self.sender.start(run_id, self.spec.id, self._inputs(), self._outputs(final=False))
        try:
            yield
        except BaseException as exc:
            self._fail(run_id, str(exc) or type(exc).__name__)
            raise
        if outcome.status == "success":
            self.sender.complete(run_id, self.spec.id, self._inputs(), self._outputs(final=True))
        else:
            self._fail(run_id, outcome.error or "the run failed")

    def seen(self, table: str, frame: Any, destination: Destination, request: LoadRequest) -> None:
        """A batch of `table` as read (before the transforms): its columns, once per run."""
        if self.sender is None:
            return
        with self._lock:
            entry = self._tables.get(table)
            if entry is None or entry.seen is not None:
                return
            entry.seen = (destination, request)
        from hakiri.spark.transforms import HAKIRI_COLUMNS

        fields = tuple(
            (f.name, f.dataType.simpleString())
            for f in frame.schema.fields
            if f.name not in HAKIRI_COLUMNS
        )
        lineage = column_lineage(fields, self.spec.transforms)
        renamed = followed_renames(lineage, self.spec.renames)
        with self._lock:
            entry.source_fields = fields
            entry.columns = {renamed.get(name, name): inputs for name, inputs in lineage.items()}

    def loaded(self, table: str, rows: int) -> None:
        if self.sender is None:
            return
        with self._lock:
            if table in self._tables:
                self._tables[table].rows += rows

    def _fail(self, run_id: str, message: str) -> None:
        assert self.sender is not None
        self.sender.fail(run_id, self.spec.id, self._inputs(), self._outputs(final=False), message)

    def _inputs(self) -> list[LineageDataset]:
        return [
            LineageDataset(namespace, name, fields=t.source_fields)
            for t in self._tables.values()
            for namespace, name in t.inputs
        ]

    def _outputs(self, final: bool) -> list[LineageDataset]:
        """The targets; as the run completes, with their columns, rows and column lineage."""
        outputs = []
        for t in self._tables.values():
            if t.output is None:
                continue
            if not final:
                outputs.append(LineageDataset(*t.output))
                continue
            fields = _target_fields(t)
            known = None if fields is None else {name for name, _ in fields}
            columns = {
                target: tuple(
                    InputField(ns, name, source) for source in sources for ns, name in t.inputs
                )
                for target, sources in t.columns.items()
                if sources and (known is None or target in known)
            }
            outputs.append(LineageDataset(*t.output, fields, t.rows, columns))
        return outputs


def _target_fields(table: _Table) -> tuple[tuple[str, str | None], ...] | None:
    if table.seen is None:
        return None
    destination, request = table.seen
    try:
        columns = destination.target_columns(request)
    except HakiriError:
        return None
    return None if columns is None else tuple((c.name, c.type) for c in columns)


def _target_dataset(
    project: Project, spec: PipelineSpec, targets: Targets, table: TableSpec, env: Mapping[str, str]
) -> tuple[str, str]:
    target = targets.target(table)
    kind = kind_of(target.kind)
    return kind.lineage_dataset(kind.place(project, spec, env), target)


def _named(name: Any) -> Any:
    """A dataset's name, or None when it cannot be told (a variable unset: the run says so)."""
    try:
        return name()
    except HakiriError:
        return None
