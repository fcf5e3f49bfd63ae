"""What one command runs with, resolved once when it starts (`RunContext`).

A command (apply, plan, diff, replay, a serve run) loads the project, reads its environment
and decides its engine once; everything below it asks the context instead of re-reading
`os.environ` or deciding the engine again, so an embedded hakiri (or a test) that hands a
command an environment of its own gets the same answer everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from hakiri.destinations.base import Destination
from hakiri.destinations.kinds import engine_needs as destination_needs
from hakiri.destinations.kinds import kind_of
from hakiri.sources.base import Source
from hakiri.sources.kinds import engine_needs as source_needs
from hakiri.sources.kinds import source_for
from hakiri.spark.engines import Support, pipeline_refusals, support
from hakiri.spark.session import engine_label, engine_of
from hakiri.spec.connections import Target
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec
from hakiri.spec.project import ProjectFile

__all__ = ["RunContext"]


def _no_engine() -> Any:
    from hakiri.errors import HakiriError

    raise HakiriError(
        "this command runs no engine", "a bug: report it with the command that was run"
    )


@dataclass(frozen=True)
class RunContext:
    project: Project
    env: Mapping[str, str]
    # The engine the project runs on ('spark' or 'sail': HAKIRI_SPARK_ENGINE, else [spark]).
    engine: str
    # The engine's session, started on first use (`services.runtime.LazySpark.get`).
    spark: Callable[[], Any]
    # Opens the destination of a pipeline's target; None: its kind's (`destinations.kinds`).
    # (The engine's unit tests hand in a destination of their own.)
    opener: Callable[[PipelineSpec, Target], Destination] | None = None

    @classmethod
    def of(
        cls,
        project: Project,
        env: Mapping[str, str],
        spark: Callable[[], Any] | None = None,
    ) -> RunContext:
        """The context of a command on `project`; `spark` gets its session (None: a command
        that runs no engine, such as `validate` or a `plan` that counts nothing)."""
        engine = engine_of(project.settings.spark, env)
        return cls(project, env, engine, spark if spark is not None else _no_engine)

    @property
    def settings(self) -> ProjectFile:
        return self.project.settings

    @property
    def engine_label(self) -> str:
        """The engine as the progress line names it while it starts."""
        return engine_label(self.project.settings.spark, self.env)

    def source_for(self, spec: PipelineSpec) -> Source:
        return source_for(self.project.root, self.settings, spec, self.env)

    def destination_for(self, spec: PipelineSpec) -> Callable[[Target], Destination]:
        """The destination each of the pipeline's targets loads into."""
        if self.opener is not None:
            opener = self.opener
            return lambda target: opener(spec, target)
        return lambda target: kind_of(target.kind).open(
            self.project, spec, target, self.env, self.spark
        )

    def supports(self, capability: str) -> Support:
        """How the engine does `capability` (`spark.engines.CAPABILITIES`)."""
        return support(self.engine, capability)

    def refusals(self, spec: PipelineSpec, kinds: Collection[str]) -> list[tuple[str, str]]:
        """(reason, hint) for what the pipeline needs, reading its source and loading into
        targets of these kinds, that the engine refuses."""
        needs = [*source_needs(spec), *destination_needs(spec, kinds)]
        return pipeline_refusals(spec, self.engine, needs)
