"""Load a project: hakiri.toml, pipelines/*.toml and pipelines/*.json -> validated models.

Order for every document: parse (syntax errors with line) -> JSON Schema (errors
carry key paths, mapped to lines) -> pydantic models (rules the schema cannot
express) -> project-wide checks (duplicate ids, named connections, ${VAR}s).
Every problem in every file is collected before anything is raised, so one
`hakiri validate` shows them all.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hakiri.errors import Diagnostic, ManifestError, ProjectNotFound
from hakiri.spec.compiled import (
    COMPILED_SUFFIX,
    CompiledTransforms,
    is_compiled_file,
    source_hash,
)
from hakiri.spec.diagnostics import SchemaChecker, format_path, model_diagnostics
from hakiri.spec.interpolate import references
from hakiri.spec.load import mode_names
from hakiri.spec.locate import KeyPath, LineIndex, index_json, index_toml
from hakiri.spec.pipeline import PipelineSpec, PostgresDestination, PostgresSource
from hakiri.spec.project import ProjectFile
from hakiri.spec.raw import Problem, decode, nesting_problem, parse_limit_problem
from hakiri.spec.rules import lint_pipeline
from hakiri.spec.schema_export import pipeline_schema, project_schema
from hakiri.spec.sources import registered_source_configs
from hakiri.spec.views import ViewSpec

PROJECT_FILE = "hakiri.toml"
PIPELINES_DIR = "pipelines"
VIEWS_DIR = "views"
TRANSFORMS_HINT = "transforms/<id>.py"


class ManifestFormat(StrEnum):
    TOML_INLINE = "toml-inline"  # a [[pipeline]] block in hakiri.toml
    TOML = "toml"  # pipelines/<id>.toml
    JSON = "json"  # pipelines/<id>.json


@dataclass(frozen=True)
class Origin:
    """Where a pipeline is defined."""

    file: Path
    line: int | None
    format: ManifestFormat
    index: int | None = None  # position among hakiri.toml's [[pipeline]] blocks

    def __str__(self) -> str:
        return f"{display_path(self.file)}:{self.line or 1}"


@dataclass(frozen=True)
class CompiledOrigin:
    """Where a pipeline's compiled transforms come from (`hakiri compile`)."""

    file: Path  # pipelines/<id>.transforms.json
    source: Path  # the module it was compiled from, resolved against the project
    source_hash: str  # sha256 of the module's bytes when it was compiled

    def stale_reason(self) -> str | None:
        """Why the compiled steps may not be what the module says now; None when they are."""
        try:
            current = source_hash(self.source.read_bytes())
        except OSError:
            return f"{display_path(self.source)}, which {display_path(self.file)} was compiled from, is gone"
        if current != self.source_hash:
            return f"{display_path(self.source)} changed since it was compiled into {display_path(self.file)}"
        return None


@dataclass(frozen=True)
class Project:
    root: Path
    settings: ProjectFile  # project-level settings; pipelines are in `pipelines`
    pipelines: dict[str, PipelineSpec]
    origins: dict[str, Origin]
    documents: dict[str, dict[str, Any]]  # raw, unexpanded document of each pipeline
    warnings: list[Diagnostic] = field(default_factory=list)
    # Variables that are unset and that only some pipelines need: (where, which pipelines).
    unset: tuple[UnsetVariable, ...] = ()
    # [[view]] blocks and views/*.toml|json, in an order where a view follows those it reads.
    views: dict[str, ViewSpec] = field(default_factory=dict)
    view_origins: dict[str, Origin] = field(default_factory=dict)
    # Pipelines whose transforms come from a compiled file (`hakiri compile`).
    compiled: dict[str, CompiledOrigin] = field(default_factory=dict)

    def require_variables(self, pipeline_ids: Iterable[str]) -> None:
        """ManifestError when a pipeline of `pipeline_ids` needs an unset variable (its own
        manifest's, or its connection's); a command checks only the pipelines it works on."""
        wanted = set(pipeline_ids)
        missing = []
        for unset in self.unset:
            needed_by = sorted(wanted & unset.pipelines)
            if needed_by:
                named = ", ".join(f"`{p}`" for p in needed_by)
                who = (
                    f"pipeline {named} needs" if len(needed_by) == 1 else f"pipelines {named} need"
                )
                missing.append(replace(unset.where, message=f"{unset.where.message}; {who} it"))
        if missing:
            raise ManifestError(missing)


@dataclass(frozen=True)
class UnsetVariable:
    """A `${VAR}` without a value or default, in a part of the project only some pipelines use."""

    where: Diagnostic  # the reference: 'environment variable `X` is not set', file:line, hint
    pipelines: frozenset[str]  # the pipelines that need it


def display_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _project_checker() -> SchemaChecker:
    return _checker("project", tuple(mode_names()), tuple(sorted(registered_source_configs())))


def _pipeline_checker() -> SchemaChecker:
    return _checker("pipeline", tuple(mode_names()), tuple(sorted(registered_source_configs())))


@cache
def _checker(document: str, modes: tuple[str, ...], connectors: tuple[str, ...]) -> SchemaChecker:
    """One checker per document, set of load modes and of source connectors (a registered
    mode or connector is in the schema)."""
    return SchemaChecker(project_schema() if document == "project" else pipeline_schema())


@dataclass
class _Document:
    file: Path
    data: Any
    index: LineIndex
    format: ManifestFormat
    base: KeyPath = ()  # key path of this pipeline inside its file
    position: int | None = None


class _Loader:
    def __init__(
        self,
        root: Path,
        env: Mapping[str, str],
        overrides: Mapping[Path, str | None],
        every_variable: bool = True,
    ) -> None:
        self.root = root
        self.env = env
        # False: an unset variable that only some pipelines need (in a pipeline's manifest
        # or a connection) is kept for `Project.require_variables`, not reported at load.
        self.every_variable = every_variable
        self.deferred: list[tuple[Diagnostic, _Document, KeyPath]] = []
        self.overrides = {p.resolve(): t for p, t in overrides.items()}
        self.diagnostics: list[Diagnostic] = []
        self.doc_of: dict[str, _Document] = {}
        self.seen_ids: set[str] = set()  # every pipeline id a manifest names, loaded or not
        self.project_index = LineIndex()  # hakiri.toml's, once it parsed

    # -------------------------------------------------------------- reading

    def exists(self, path: Path) -> bool:
        resolved = path.resolve()
        if resolved in self.overrides:
            return self.overrides[resolved] is not None
        return path.is_file()

    def read(self, path: Path) -> str | None:
        """The file's text; None (with the problem reported) when it is not UTF-8 text."""
        resolved = path.resolve()
        if resolved in self.overrides:
            return self.overrides[resolved]
        try:
            decoded = decode(path.read_bytes())
        except OSError as exc:
            self.error(
                f"cannot read the file: {exc.strerror or exc}",
                path,
                1,
                hint="check that the file is readable by this user",
            )
            return None
        if isinstance(decoded, Problem):
            self.error(decoded.message, path, decoded.line, hint=decoded.hint)
            return None
        return decoded

    def pipeline_files(self, folder: str = PIPELINES_DIR) -> list[Path]:
        directory = (self.root / folder).resolve()
        found = {p.resolve() for p in directory.glob("*") if p.suffix in (".toml", ".json")}
        found |= {
            p for p in self.overrides if p.parent == directory and p.suffix in (".toml", ".json")
        }
        return sorted(p for p in found if self.exists(p) and not is_compiled_file(p))

    def compiled_files(self) -> list[Path]:
        directory = (self.root / PIPELINES_DIR).resolve()
        found = {p.resolve() for p in directory.glob(f"*{COMPILED_SUFFIX}")}
        found |= {p for p in self.overrides if p.parent == directory and is_compiled_file(p)}
        return sorted(p for p in found if self.exists(p))

    def error(
        self,
        message: str,
        file: Path,
        line: int | None,
        path: KeyPath = (),
        hint: str | None = None,
    ) -> None:
        self.diagnostics.append(
            Diagnostic(
                message=message,
                file=Path(display_path(file)),
                line=line,
                path=format_path(path) if path else "",
                hint=hint,
            )
        )

    def parse(self, file: Path, text: str) -> tuple[Any, LineIndex] | None:
        is_json = file.suffix == ".json"
        problem = nesting_problem(text, is_json)
        try:
            if problem is None:
                if is_json:
                    return json.loads(text), index_json(text)
                return tomllib.loads(text), index_toml(text)
        except json.JSONDecodeError as exc:
            self.error(
                f"invalid JSON: {exc.msg}",
                file,
                exc.lineno,
                hint="fix the syntax; JSON allows no comments or trailing commas",
            )
            return None
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            match = re.search(r"\(at line (\d+)", message)
            # "at end of document": the last line, where the document stopped short.
            line = int(match.group(1)) if match else len(text.splitlines()) or 1
            self.error(
                f"invalid TOML: {re.sub(r' [(]at (line|end of document).*$', '', message)}",
                file,
                line,
                hint="fix the syntax (strings need quotes; tables are [name])",
            )
            return None
        except ValueError:  # an integer literal longer than Python converts
            problem = parse_limit_problem(text)
            if problem is None:
                raise
        except RecursionError:  # nesting the pre-check did not see (it should)
            problem = Problem(
                "the document nests too deeply to read",
                1,
                "hakiri manifests nest a few levels; flatten the arrays or tables",
            )
        assert problem is not None
        self.error(problem.message, file, problem.line, hint=problem.hint)
        return None

    # -------------------------------------------------------------- checking

    def check_document(self, checker: SchemaChecker, model: type, doc: _Document, data: Any) -> Any:
        """Schema first (errors with key paths), then the model for what the schema cannot say.

        The model runs even when the schema found problems, so one pass reports
        e.g. a bad cron expression beside an unknown key; its findings at paths
        the schema already reported are dropped as duplicates.
        """
        found = checker.check(data, doc.file, doc.index, doc.base)
        self.diagnostics.extend(_relative(d) for d in found)
        try:
            parsed = model.model_validate(data)
        except ValidationError as exc:
            reported = [d.path for d in found]
            self.diagnostics.extend(
                _relative(d)
                for d in model_diagnostics(exc, data, doc.file, doc.index, doc.base)
                if not any(_overlaps(d.path, seen) for seen in reported)
            )
            return None
        return None if found else parsed

    def check_variables(self, doc: _Document) -> None:
        for ref in references(doc.data):
            if ref.variable not in self.env and not ref.has_default:
                path = (*doc.base, *ref.path)
                self.error(
                    f"environment variable `{ref.variable}` is not set",
                    doc.file,
                    doc.index.line_of(path),
                    path,
                    hint=f"export {ref.variable}=..., or give a default: ${{{ref.variable}:-value}}",
                )
                if not self.every_variable and _scoped(doc, ref.path):
                    self.deferred.append((self.diagnostics.pop(), doc, ref.path))

    def unset_variables(
        self, settings: ProjectFile, pipelines: dict[str, PipelineSpec]
    ) -> tuple[UnsetVariable, ...]:
        """The deferred variables, each with the pipelines that need it."""
        found = []
        for where, doc, path in self.deferred:
            if doc.base or doc.format is not ManifestFormat.TOML_INLINE or path[0] == "pipeline":
                position = path[1] if path[0] == "pipeline" and not doc.base else doc.position
                needs = {
                    pid
                    for pid, d in self.doc_of.items()
                    if d is doc
                    or (
                        d.format is ManifestFormat.TOML_INLINE
                        and d.file == doc.file
                        and d.position == position
                        and position is not None
                    )
                }
            else:  # connections.<name>
                needs = {
                    pid
                    for pid, spec in pipelines.items()
                    if path[1] in _connections_of(settings, spec)
                }
            if needs:
                found.append(UnsetVariable(where, frozenset(needs)))
        return tuple(found)

    # -------------------------------------------------------------- the whole project

    def load(self) -> Project:
        project_path = self.root / PROJECT_FILE
        if not self.exists(project_path):
            raise ProjectNotFound(
                f"no {PROJECT_FILE} in {display_path(self.root)}",
                "run `hakiri init` to create a project, or pass --project DIR",
            )
        text = self.read(project_path)
        parsed = self.parse(project_path, text) if text is not None else None
        settings = None
        docs: list[_Document] = []
        if parsed is not None:
            data, index = parsed
            self.project_index = index
            root_doc = _Document(project_path, data, index, ManifestFormat.TOML_INLINE)
            self.check_variables(root_doc)
            inline = data.get("pipeline") if isinstance(data, dict) else None
            settings_data = data
            if isinstance(inline, list) and all(isinstance(p, dict) for p in inline):
                settings_data = {k: v for k, v in data.items() if k != "pipeline"}
                docs += [
                    _Document(
                        project_path, p, index, ManifestFormat.TOML_INLINE, ("pipeline", i), i
                    )
                    for i, p in enumerate(inline)
                ]
            settings = self.check_document(_project_checker(), ProjectFile, root_doc, settings_data)

        for file in self.pipeline_files():
            text = self.read(file)
            parsed = self.parse(file, text) if text is not None else None
            if parsed is not None:
                data, index = parsed
                fmt = ManifestFormat.JSON if file.suffix == ".json" else ManifestFormat.TOML
                docs.append(_Document(file, data, index, fmt))

        pipelines, origins, documents = self.load_pipelines(docs)
        compiled = self.load_compiled(pipelines)
        views: dict[str, ViewSpec] = {}
        view_origins: dict[str, Origin] = {}
        if settings is not None:
            self.check_connections(settings, pipelines)
            views, view_origins = self.load_views(settings, pipelines)

        errors = [d for d in self.diagnostics if d.severity == "error"]
        warnings = [d for d in self.diagnostics if d.severity == "warning"]
        if errors or settings is None:
            project_first = str(Path(display_path(project_path)))
            raise ManifestError(
                sorted(
                    self.diagnostics,
                    key=lambda d: (str(d.file) != project_first, str(d.file), d.line or 0),
                )
            )
        unset = self.unset_variables(settings, pipelines)
        return Project(
            self.root,
            settings,
            pipelines,
            origins,
            documents,
            warnings,
            unset,
            views=views,
            view_origins=view_origins,
            compiled=compiled,
        )

    def load_views(
        self, settings: ProjectFile, pipelines: dict[str, PipelineSpec]
    ) -> tuple[dict[str, ViewSpec], dict[str, Origin]]:
        """Inline [[view]] blocks, then views/*.toml|json; each view's SQL through the query
        guard, its reads among the context store's tables and the other views, no cycle."""
        from hakiri.spec.view_checks import check_views

        found: list[tuple[ViewSpec, _Document, KeyPath]] = []
        project_path = self.root / PROJECT_FILE
        for i, view in enumerate(settings.view):
            doc = _Document(project_path, {}, self.project_index, ManifestFormat.TOML_INLINE)
            found.append((view, doc, ("view", i)))
        for file in self.pipeline_files(VIEWS_DIR):
            text = self.read(file)
            parsed = self.parse(file, text) if text is not None else None
            if parsed is None:
                continue
            data, index = parsed
            if isinstance(data, dict):
                data = {k: v for k, v in data.items() if k != "$schema"}
            fmt = ManifestFormat.JSON if file.suffix == ".json" else ManifestFormat.TOML
            doc = _Document(file, data, index, fmt)
            view = self.check_document(_view_checker(), ViewSpec, doc, data)
            if view is not None:
                found.append((view, doc, ()))
        tables = _context_tables(settings, pipelines)
        views, origins = {}, {}
        for problem in check_views([(v, self._origin_of(d, p), p, d) for v, d, p in found], tables):
            self.error(problem.message, problem.file, problem.line, problem.path, hint=problem.hint)
        for view, doc, path in found:
            if view.name not in views:
                views[view.name] = view
                origins[view.name] = self._origin_of(doc, path)
        if any(d.severity == "error" for d in self.diagnostics):
            return views, origins  # the load fails; no order to work out
        from hakiri.spec.view_checks import view_order

        ordered = view_order(views)
        return {n: views[n] for n in ordered}, {n: origins[n] for n in ordered}

    @staticmethod
    def _origin_of(doc: _Document, path: KeyPath) -> Origin:
        return Origin(doc.file, doc.index.line_of(path) or 1, doc.format)

    def load_pipelines(
        self, docs: list[_Document]
    ) -> tuple[dict[str, PipelineSpec], dict[str, Origin], dict[str, dict[str, Any]]]:
        pipelines: dict[str, PipelineSpec] = {}
        origins: dict[str, Origin] = {}
        documents: dict[str, dict[str, Any]] = {}
        first_seen: dict[str, Origin] = {}
        for doc in docs:
            data = doc.data
            if isinstance(data, dict) and doc.format is ManifestFormat.JSON:
                data = {k: v for k, v in data.items() if k != "$schema"}
            origin = Origin(doc.file, doc.index.line_of(doc.base) or 1, doc.format, doc.position)
            pid = data.get("id") if isinstance(data, dict) else None
            if isinstance(pid, str):
                if pid in first_seen:
                    self.error(
                        f"pipeline `{pid}` defined in two places: {first_seen[pid]} and {origin}",
                        doc.file,
                        doc.index.line_of((*doc.base, "id")),
                        (*doc.base, "id"),
                        hint=f"keep one source of truth; run `hakiri pipeline convert {pid} --to json` (or --to toml) to move it",
                    )
                    continue
                first_seen[pid] = origin
                self.seen_ids.add(pid)
            if doc.format is not ManifestFormat.TOML_INLINE:
                self.check_variables(doc)
            spec = self.check_document(_pipeline_checker(), PipelineSpec, doc, data)
            if spec is None:
                continue
            pipelines[spec.id] = spec
            origins[spec.id] = origin
            documents[spec.id] = data
            self.doc_of[spec.id] = doc
            for finding in lint_pipeline(spec):
                path = (*doc.base, *finding.path)
                self.diagnostics.append(
                    Diagnostic(
                        message=finding.message,
                        file=Path(display_path(doc.file)),
                        line=doc.index.line_of(path),
                        path=format_path(path),
                        hint=finding.hint,
                        severity="warning",
                    )
                )
        return pipelines, origins, documents

    def load_compiled(self, pipelines: dict[str, PipelineSpec]) -> dict[str, CompiledOrigin]:
        """Each `pipelines/<id>.transforms.json` becomes pipeline <id>'s transforms (in
        `pipelines`, in place); its provenance is returned for plan's staleness check."""
        found: dict[str, CompiledOrigin] = {}
        for file in self.compiled_files():
            pid = file.name.removesuffix(COMPILED_SUFFIX)
            text = self.read(file)
            parsed = self.parse(file, text) if text is not None else None
            if parsed is None:
                continue
            data, index = parsed
            try:
                compiled = CompiledTransforms.model_validate(data)
            except ValidationError as exc:
                self.diagnostics.extend(
                    _relative(d) for d in model_diagnostics(exc, data, file, index)
                )
                continue
            hint_rename = (
                f"compile the module named after the pipeline: `hakiri compile {TRANSFORMS_HINT}`"
            )
            if compiled.pipeline_id != pid:
                self.error(
                    f"compiled transforms of pipeline `{compiled.pipeline_id}` in a file named for `{pid}`",
                    file,
                    index.line_of(("pipeline_id",)),
                    ("pipeline_id",),
                    hint=hint_rename,
                )
                continue
            if pid not in pipelines:
                if pid not in self.seen_ids:  # a manifest that failed to load is reported already
                    self.error(
                        f"compiled transforms for pipeline `{pid}`, which no manifest defines",
                        file,
                        1,
                        hint="delete the file, or name it after a pipeline: pipelines/<id>"
                        + COMPILED_SUFFIX,
                    )
                continue
            spec, doc = pipelines[pid], self.doc_of[pid]
            if spec.transforms:
                path = (*doc.base, "transforms")
                self.error(
                    f"pipeline `{pid}` lists `transforms` and has compiled transforms "
                    f"({display_path(file)}); the compiled file's steps are its transforms",
                    doc.file,
                    doc.index.line_of(path),
                    path,
                    hint="remove `transforms` from the manifest, or delete the compiled file "
                    "to go back to them",
                )
                continue
            pipelines[pid] = spec.model_copy(update={"transforms": compiled.plan})
            found[pid] = CompiledOrigin(
                file, (self.root / compiled.source).resolve(), compiled.source_hash
            )
        return found

    def check_connections(self, settings: ProjectFile, pipelines: dict[str, PipelineSpec]) -> None:
        known = sorted(settings.connections)
        default = settings.context.default_destination
        if default != "context" and default not in settings.connections:
            self.error(
                f"default_destination `{default}` is neither 'context' nor a connection",
                self.root / PROJECT_FILE,
                self.project_index.line_of(("context", "default_destination")),
                ("context", "default_destination"),
                hint=f"define [connections.{default}] or use 'context'",
            )
        for pid, spec in pipelines.items():
            for part in ("source", "destination"):
                endpoint = getattr(spec, part)
                if not isinstance(endpoint, PostgresSource | PostgresDestination):
                    continue
                name = endpoint.config.connection
                if name is not None and name not in settings.connections:
                    doc = self.doc_of[pid]
                    path = (*doc.base, part, "config", "connection")
                    hint = f"define [connections.{name}] in hakiri.toml" + (
                        f" (defined: {', '.join(known)})" if known else ""
                    )
                    self.error(
                        f"unknown connection `{name}`",
                        doc.file,
                        doc.index.line_of(path),
                        path,
                        hint=hint,
                    )


@cache
def _view_checker() -> SchemaChecker:
    return SchemaChecker(ViewSpec.model_json_schema(by_alias=True))


def _context_tables(settings: ProjectFile, pipelines: dict[str, PipelineSpec]) -> dict[str, str]:
    """The context-store tables the project's pipelines load: table -> pipeline id."""
    from hakiri.spec.connections import destination_kind, target_of

    found: dict[str, str] = {}
    for pid, spec in pipelines.items():
        if destination_kind(settings, spec) != "context":
            continue
        for table in spec.table_specs():
            found.setdefault(target_of(settings, spec, table).table.lower(), pid)
    return found


def _scoped(doc: _Document, path: KeyPath) -> bool:
    """A reference only some pipelines use: in a pipeline's manifest, or in a connection."""
    if doc.format is not ManifestFormat.TOML_INLINE or doc.base:
        return True
    return len(path) >= 2 and path[0] in ("pipeline", "connections")


def _connections_of(settings: ProjectFile, spec: PipelineSpec) -> set[str]:
    """The named connections a pipeline opens: its source's, its destination's (or the
    default destination's)."""
    names = set()
    for endpoint in (spec.source, spec.destination):
        if (
            isinstance(endpoint, PostgresSource | PostgresDestination)
            and endpoint.config.connection
        ):
            names.add(endpoint.config.connection)
    if spec.destination is None and settings.context.default_destination != "context":
        names.add(settings.context.default_destination)
    return names


def _overlaps(a: str, b: str) -> bool:
    """True when one key path is the other or lies inside it ('load' and 'load.mode')."""
    return a == b or a.startswith((b + ".", b + "[")) or b.startswith((a + ".", a + "["))


def _relative(diagnostic: Diagnostic) -> Diagnostic:
    if diagnostic.file is None:
        return diagnostic
    return Diagnostic(
        diagnostic.message,
        Path(display_path(diagnostic.file)),
        diagnostic.line,
        diagnostic.path,
        diagnostic.hint,
        diagnostic.severity,
    )


def load_project(
    root: Path,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[Path, str | None] | None = None,
    *,
    every_variable: bool = False,
) -> Project:
    """Load and validate every manifest under `root`.

    `overrides` maps file paths to replacement text (None = file removed); edits
    use it to validate a change before writing anything to disk. An unset variable that
    only some pipelines need is reported by `Project.require_variables` for the pipelines a
    command works on; `every_variable` reports them all here (`hakiri validate`).
    Raises ProjectNotFound or ManifestError (with every problem found).
    """
    return _Loader(
        root.resolve(), os.environ if env is None else env, overrides or {}, every_variable
    ).load()
