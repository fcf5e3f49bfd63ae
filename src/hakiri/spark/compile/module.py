"""Run a transforms module's `transform(df)` once, over an empty frame, and read its plan.

    scan_module(path)        refuses, before anything runs, the calls a compiled transform
                             cannot carry (UDFs, reads, actions), each with its line
    compile_module(...)      imports the module, calls transform(df) on an empty frame of
                             the pipeline's input columns (no row is read, no job runs), and
                             turns the plan PySpark built into steps (`relations`); then
                             applies those steps to the same empty frame and checks that they
                             make the columns transform(df) makes, name and type

The module runs here, at compile time, on the author's machine (as `dbt compile` runs a
project's Jinja); the runtime reads only the steps, each checked again by the sandbox.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from hakiri.errors import HakiriError
from hakiri.spark.compile.authoring import compiling_tables, reset_tables
from hakiri.spark.compile.expressions import CompileRefusal
from hakiri.spark.compile.relations import STEP_CALLS, Frames, relation_steps
from hakiri.spec.transforms import TransformStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["CompileFailed", "Compiled", "compile_module", "scan_module"]

_STEPS = TypeAdapter(list[TransformStep])
_RUNS_PYTHON = (
    "use Spark's built-in functions (pyspark.sql.functions); the runtime never runs the module"
)
_READS = (
    "a compiled transform reads only its batch and the context store's tables: join with "
    "context_table(name) from hakiri.compile"
)
_ACTION = "transform(df) builds a plan and returns it; nothing may run while it is compiled"
# name -> (what it is, hint): calls (or, for properties, attribute reads) refused on sight.
_REFUSED_NAMES: dict[str, tuple[str, str]] = {
    "udf": ("a Python UDF (udf) runs Python on every row", _RUNS_PYTHON),
    "pandas_udf": ("a pandas UDF runs Python on every row", _RUNS_PYTHON),
    "udtf": ("a Python table function (udtf) runs Python", _RUNS_PYTHON),
    "mapInPandas": ("mapInPandas runs Python over the rows", _RUNS_PYTHON),
    "mapInArrow": ("mapInArrow runs Python over the rows", _RUNS_PYTHON),
    "applyInPandas": ("applyInPandas runs Python over groups", _RUNS_PYTHON),
    "applyInArrow": ("applyInArrow runs Python over groups", _RUNS_PYTHON),
    "foreach": ("foreach runs Python over the rows", _RUNS_PYTHON),
    "foreachPartition": ("foreachPartition runs Python over the rows", _RUNS_PYTHON),
    "rdd": ("df.rdd leaves the DataFrame API", _RUNS_PYTHON),
    "read": ("`.read` reads files or tables (spark.read, or a file's read())", _READS),
    "readStream": ("spark.readStream reads a stream", _READS),
    "table": ("spark.table reads a table", _READS),
    "sql": ("spark.sql runs a query", _READS),
    "createDataFrame": ("createDataFrame makes rows inside transform", _READS),
    "write": ("df.write writes data", "hakiri loads the frame transform(df) returns"),
    "writeStream": ("df.writeStream writes data", "hakiri loads the frame transform(df) returns"),
    "collect": ("collect() runs a job and brings rows to the driver", _ACTION),
    "toPandas": ("toPandas() runs a job and brings rows to the driver", _ACTION),
    "toArrow": ("toArrow() runs a job and brings rows to the driver", _ACTION),
    "toLocalIterator": ("toLocalIterator() runs a job", _ACTION),
    "show": ("show() runs a job", _ACTION),
}
# Read as attributes (spark.read.csv), not called: refused wherever they are read.
_PROPERTIES = frozenset({"rdd", "read", "readStream", "write", "writeStream"})


class CompileFailed(HakiriError):
    """A module that does not compile; `reason` ends with the module's FILE:LINE."""


@dataclass(frozen=True)
class Compiled:
    steps: list[dict[str, Any]]  # JSON form, as a manifest's `transforms` holds them
    columns: list[tuple[str, str]]  # what transform(df) makes: name, Spark type


# ---------------------------------------------------------------- the static scan


def scan_module(path: Path, shown: str) -> None:
    """CompileFailed at the first call the compiler refuses on sight (`shown`: the path as the
    error names it)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=shown)
    except SyntaxError as exc:
        raise CompileFailed(
            f"the module does not parse: {exc.msg} ({shown}:{exc.lineno or 1})",
            "fix the Python syntax",
        ) from None
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call):
            name = _called_name(node.func)
        elif isinstance(node, ast.Attribute) and node.attr in _PROPERTIES:
            name = node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:  # @udf without arguments
                called = _called_name(decorator)
                if called in _REFUSED_NAMES:
                    found.append((decorator.lineno, called))
        if name in _REFUSED_NAMES and (name not in _PROPERTIES or isinstance(node, ast.Attribute)):
            found.append((node.lineno, name))
    if found:
        line, name = min(found)
        what, hint = _REFUSED_NAMES[name]
        raise CompileFailed(f"{what}, which cannot be compiled ({shown}:{line})", hint)
    if not any(isinstance(n, ast.FunctionDef) and n.name == "transform" for n in tree.body):
        raise CompileFailed(
            f"the module defines no transform(df) ({shown}:1)",
            "define `def transform(df):` that returns the transformed DataFrame",
        )


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _line_of_call(path: Path, calls: Sequence[str], mentioning: str | None = None) -> int | None:
    """The first line of the module that calls one of the DataFrame methods `calls`; with
    `mentioning`, the first such call that names it as a string (withColumn("total", ...))."""
    try:
        tree = ast.parse(path.read_bytes())
    except SyntaxError:
        return None
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in calls
    ]
    if mentioning is not None:
        named = [
            n
            for n in found
            if any(
                isinstance(c, ast.Constant) and c.value == mentioning
                for a in [*n.args, *(k.value for k in n.keywords)]
                for c in ast.walk(a)
            )
        ]
        found = named or found
    return min(n.lineno for n in found) if found else None


def _transform_line(path: Path) -> int:
    tree = ast.parse(path.read_bytes())
    return next(
        (n.lineno for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "transform"),
        1,
    )


# ---------------------------------------------------------------- running it


def compile_module(
    path: Path,
    shown: str,
    spark: SparkSession,
    input_schema: StructType,
    table_schema: Callable[[str], Any],
) -> Compiled:
    """The steps `transform(df)` of the module at `path` amounts to, on `input_schema`.
    `table_schema(name)` is a context table's schema (a pyarrow schema), for context_table()."""
    scan_module(path, shown)
    source = _Source(path, shown)
    frame = spark.createDataFrame([], input_schema)
    tables: dict[str, Any] = {}

    def table(name: str) -> Any:
        if name not in tables:
            from pyspark.sql.pandas.types import from_arrow_schema

            tables[name] = spark.createDataFrame([], from_arrow_schema(table_schema(name)))
        return tables[name]

    token = compiling_tables(table)
    try:
        module = source.load()
        transform = getattr(module, "transform", None)
        if not callable(transform):
            raise CompileFailed(
                f"the module defines no transform(df) ({shown}:1)",
                "define `def transform(df):` that returns the transformed DataFrame",
            )
        result = source.run(lambda: transform(frame))
    finally:
        reset_tables(token)
    _require_frame(result, source)
    frames = Frames(
        input_id=frame._plan._plan_id,
        input_columns=list(input_schema.fieldNames()),
        tables={t._plan._plan_id: (name, list(t.columns)) for name, t in tables.items()},
    )
    try:
        steps, sites = relation_steps(result._plan.to_proto(spark._client).root, frames)
    except CompileRefusal as exc:
        raise source.refused(exc.reason, exc.hint, exc.site, exc.calls) from None
    models = _validated(steps, sites, source)
    made = _columns(source.run(lambda: result.schema))
    _check_same_columns(frame, models, tables, made, source)
    return Compiled(steps=steps, columns=made)


class _Source:
    """The module being compiled: loads and runs it, and names its lines in errors."""

    def __init__(self, path: Path, shown: str) -> None:
        self.path, self.shown = path, shown

    def load(self) -> Any:
        name = f"_hakiri_compiled_{abs(hash(str(self.path)))}"
        spec = importlib.util.spec_from_file_location(name, self.path)
        if spec is None or spec.loader is None:
            raise CompileFailed(f"cannot import {self.shown}", "check that it is a Python file")
        module = importlib.util.module_from_spec(spec)
        loader = spec.loader
        try:
            self.run(lambda: loader.exec_module(module))
        finally:
            sys.modules.pop(name, None)
        return module

    def run(self, call: Callable[[], Any]) -> Any:
        """`call()`, with whatever it raises as one line at the module's line."""
        try:
            return call()
        except HakiriError as exc:
            if isinstance(exc, CompileFailed) or f"({self.shown}:" in exc.reason:
                raise
            raise CompileFailed(f"{exc.reason} ({self.where(exc)})", exc.hint) from None
        except Exception as exc:
            first = next((line for line in str(exc).splitlines() if line.strip()), "")
            raise CompileFailed(
                f"transform(df) failed: {type(exc).__name__}: {first.strip()} ({self.where(exc)})",
                "fix the module; `hakiri compile --debug` shows the traceback",
            ) from exc

    def where(self, exc: BaseException) -> str:
        """FILE:LINE of the innermost frame of the module in `exc`'s traceback."""
        line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            if Path(frame.filename).resolve() == self.path.resolve():
                line = frame.lineno
        return f"{self.shown}:{line or _transform_line(self.path)}"

    def line_of_site(self, site: str | None) -> int | None:
        if not site:
            return None
        file, _, line = site.rpartition(":")
        if file and Path(file).resolve() == self.path.resolve() and line.isdigit():
            return int(line)
        return None

    def refused(
        self,
        reason: str,
        hint: str | None,
        site: str | None,
        calls: Sequence[str],
        mentioning: str | None = None,
    ) -> CompileFailed:
        line = (
            self.line_of_site(site)
            or (_line_of_call(self.path, calls, mentioning) if calls else None)
            or _transform_line(self.path)
        )
        return CompileFailed(f"{reason} ({self.shown}:{line})", hint)


def _require_frame(result: Any, source: _Source) -> None:
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    if not isinstance(result, ConnectFrame):
        raise CompileFailed(
            f"transform(df) returned {type(result).__name__}, not a DataFrame "
            f"({source.shown}:{_transform_line(source.path)})",
            "return the transformed DataFrame",
        )


def _validated(
    steps: list[dict[str, Any]], sites: list[str | None], source: _Source
) -> list[TransformStep]:
    """The steps as models: every expression through the transform sandbox."""
    try:
        return _STEPS.validate_python(steps)
    except ValidationError as exc:
        error = exc.errors()[0]
        index = error["loc"][0] if error["loc"] and isinstance(error["loc"][0], int) else 0
        step = steps[index] if index < len(steps) else {}
        op = str(step.get("op", "?"))
        ctx = error.get("ctx") or {}
        message = str(error["msg"]).removeprefix("Value error, ")
        column = error["loc"][-1] if isinstance(error["loc"][-1], str) else None
        named = column if column in (step.get("columns") or {}) else None
        raise source.refused(
            f"{message} (in the {op} it compiles to)",
            ctx.get("hint"),
            None if named else (sites[index] if index < len(sites) else None),
            STEP_CALLS.get(op, ()),
            named,
        ) from None


def _columns(schema: Any) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _check_same_columns(
    frame: DataFrame,
    steps: list[TransformStep],
    tables: dict[str, Any],
    made: list[tuple[str, str]],
    source: _Source,
) -> None:
    """The steps, applied to the same empty frame, make the columns transform(df) makes."""
    from hakiri.spark.transforms import apply_transforms

    def applied() -> list[tuple[str, str]]:
        return _columns(apply_transforms(frame, steps, tables.__getitem__).schema)

    try:
        compiled = applied()
    except HakiriError as exc:
        raise CompileFailed(
            f"{exc.reason} ({source.shown}:{_transform_line(source.path)})", exc.hint
        ) from None
    if compiled != made:
        raise CompileFailed(
            "the compiled steps would make other columns than transform(df) makes: "
            f"{_listed(compiled)} instead of {_listed(made)} "
            f"({source.shown}:{_transform_line(source.path)})",
            "a bug in hakiri compile: report it with the module",
        )


def _listed(columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"{n} {t}" for n, t in columns)
