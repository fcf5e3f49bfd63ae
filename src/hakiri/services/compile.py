"""`hakiri compile`: transforms written with PySpark's DataFrame API -> declarative steps.

`transforms/<id>.py` defines `transform(df)`. Compiling runs it once, on this machine, over an
empty frame of pipeline <id>'s input columns (declared, or as the source tells them without
reading data), on a Sail engine inside this process; no row is read. The steps it amounts to
are written to `pipelines/<id>.transforms.json` with the module's path and hash; from then on
they are the pipeline's transforms, and the runtime never imports the module.

`check=True` (`hakiri compile --check`, for CI) compiles nothing and starts no engine: it says
which compiled files are missing or older than their module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hakiri.errors import HakiriError, PipelineNotFound
from hakiri.planner.types import source_type_as_spark
from hakiri.sources.kinds import kind_of as source_kind
from hakiri.spec.compiled import (
    COMPILED_SUFFIX,
    TRANSFORMS_DIR,
    CompiledTransforms,
    compiled_path,
    source_hash,
)
from hakiri.spec.loader import PIPELINES_DIR, Project, display_path, load_project
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["CompileOutcome", "check_compiled", "compile_transforms", "transform_modules"]

_SCHEMA_URL = "https://hakiri.dev/schemas/v1/transforms.json"


@dataclass(frozen=True)
class CompileOutcome:
    """One module: its pipeline, its compiled file, and what happened (or would)."""

    module: str  # as given, relative to the project when it is inside it
    pipeline_id: str
    compiled: str
    status: str  # compiled | unchanged (compile); current | stale | missing (check)
    steps: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "pipeline": self.pipeline_id,
            "compiled": self.compiled,
            "status": self.status,
            "steps": self.steps,
        }


def _load(root: Path, env: Mapping[str, str]) -> Project:
    """The project without its compiled files: a stale or broken one must not stop the
    compile that replaces it."""
    pipelines = (root / PIPELINES_DIR).resolve()
    removed: dict[Path, str | None] = {
        p: None for p in pipelines.glob(f"*{COMPILED_SUFFIX}") if p.is_file()
    }
    return load_project(root, env, removed)


def transform_modules(project: Project, files: Sequence[Path]) -> list[tuple[Path, str]]:
    """(module, pipeline id) for each file given; with none, every transforms/<id>.py whose
    <id> is a pipeline of the project."""
    if not files:
        found = sorted((project.root / TRANSFORMS_DIR).glob("*.py"))
        return [(p.resolve(), p.stem) for p in found if p.stem in project.pipelines]
    modules = []
    for file in files:
        path = file if file.is_absolute() else Path.cwd() / file
        if not path.is_file() and not file.is_absolute():  # relative to the project, then
            path = project.root / file
        if not path.is_file():
            raise HakiriError(
                f"no module {display_path(path)}",
                f"compile a file such as {TRANSFORMS_DIR}/<pipeline id>.py",
            )
        if path.stem not in project.pipelines:
            known = ", ".join(sorted(project.pipelines)) or "none"
            raise PipelineNotFound(
                f"{display_path(path)} is named for pipeline `{path.stem}`, which the project "
                f"does not define (pipelines: {known})",
                "name the module after its pipeline: transforms/<pipeline id>.py",
            )
        modules.append((path.resolve(), path.stem))
    return modules


def _relative(project: Project, path: Path) -> str:
    """`path` as the project names it (modules and compiled files live in the project)."""
    try:
        return path.resolve().relative_to(project.root).as_posix()
    except ValueError:
        return str(path)


def check_compiled(
    root: Path, files: Sequence[Path] = (), env: Mapping[str, str] | None = None
) -> list[CompileOutcome]:
    """Each module's compiled file: current, stale (the module changed since) or missing."""
    project = _load(root, os.environ if env is None else env)
    outcomes = []
    for module, pid in transform_modules(project, files):
        target = compiled_path(project.root / PIPELINES_DIR, pid)
        status, steps = "missing", None
        if target.is_file():
            try:
                document = json.loads(target.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                document = {}
            recorded = document.get("source_hash") if isinstance(document, dict) else None
            status = "current" if recorded == source_hash(module.read_bytes()) else "stale"
            plan = document.get("plan") if isinstance(document, dict) else None
            steps = len(plan) if isinstance(plan, list) else None
        outcomes.append(
            CompileOutcome(
                _relative(project, module), pid, _relative(project, target), status, steps
            )
        )
    return outcomes


def compile_transforms(
    root: Path, files: Sequence[Path] = (), env: Mapping[str, str] | None = None
) -> list[CompileOutcome]:
    """Compile each module and write its pipeline's compiled file; the first module that does
    not compile stops the command, and nothing is written for it."""
    env = os.environ if env is None else env
    project = _load(root, env)
    modules = transform_modules(project, files)
    if not modules:
        return []
    from hakiri.spark.compile.module import scan_module
    from hakiri.spark.session import connect_session

    for module, pid in modules:
        _refuse_listed_transforms(project, pid)
        scan_module(module, _relative(project, module))  # refused on sight: no engine starts

    spark, _ = connect_session(project.settings.spark, project.root, "sail", env=env)
    return [_compile_one(project, env, spark, module, pid) for module, pid in modules]


def _refuse_listed_transforms(project: Project, pid: str) -> None:
    if project.pipelines[pid].transforms:
        raise HakiriError(
            f"pipeline `{pid}` lists `transforms` in its manifest ({project.origins[pid]}); "
            "compiled transforms replace them",
            "remove `transforms` from the manifest, then compile",
        )


def _compile_one(
    project: Project, env: Mapping[str, str], spark: Any, module: Path, pid: str
) -> CompileOutcome:
    from hakiri.spark.compile.module import compile_module

    spec = project.pipelines[pid]
    data = module.read_bytes()
    shown = _relative(project, module)
    compiled = compile_module(
        module,
        shown,
        spark,
        _input_schema(project, env, spec, spark),
        lambda name: _table_schema(project, name),
    )
    document = CompiledTransforms.model_validate(
        {
            "$schema": _SCHEMA_URL,
            "pipeline_id": pid,
            "engine": "pyspark",
            "engine_version": _pyspark_version(),
            "source_lang": "python",
            "source": _relative(project, module),
            "source_hash": source_hash(data),
            "plan": compiled.steps,
        }
    )
    text = json.dumps(document.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2)
    target = compiled_path(project.root / PIPELINES_DIR, pid)
    before = target.read_text(encoding="utf-8") if target.is_file() else None
    status = "unchanged" if before == text + "\n" else "compiled"
    if status == "compiled":
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise HakiriError(
                f"cannot write {display_path(target)}: {exc.strerror or exc}",
                "check that the pipelines directory is writable",
            ) from None
    return CompileOutcome(shown, pid, _relative(project, target), status, len(compiled.steps))


def _pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def _input_schema(project: Project, env: Mapping[str, str], spec: PipelineSpec, spark: Any) -> Any:
    """The columns transform(df) is given: the pipeline's first table, as the source tells
    them without reading data (declared types, else a sample's, else string)."""
    from pyspark.sql.types import StructField, StructType

    from hakiri.engine.run_context import RunContext
    from hakiri.spark.session import parse_type

    table = spec.table_specs()[0]
    source = RunContext.of(project, env).source_for(spec)
    observed = source.observe(table, None)
    if observed.columns is None:
        raise HakiriError(
            f"the columns of pipeline `{spec.id}`'s source are not known without reading data, "
            "so transform(df) has nothing to build on",
            "declare the source's columns in the manifest, then compile",
        )
    sampled = dict(observed.sample.types) if observed.sample is not None else {}
    vocabulary = source_kind(spec).types
    fields = []
    for column in observed.columns:
        type_text = (
            source_type_as_spark(vocabulary, column.type) or sampled.get(column.name) or "string"
        )
        fields.append(StructField(column.name, parse_type(spark, type_text), True))
    return StructType(fields)


def _table_schema(project: Project, name: str) -> Any:
    """A context-store table's columns (a pyarrow schema), read by delta-rs (no engine)."""
    import pyarrow as pa

    from hakiri.destinations.context.commit import open_table
    from hakiri.destinations.context.staging import check_table_name

    check_table_name(name, "table")
    store = project.root / project.settings.context.path
    table = open_table(store / name)
    if table is None:
        raise HakiriError(
            f"there is no table {name!r} in the context store at {display_path(store)}",
            "load it first (`hakiri apply` the pipeline that makes it): compiling reads its columns",
        )
    return pa.schema(table.schema())
