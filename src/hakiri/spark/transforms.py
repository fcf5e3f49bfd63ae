"""Transform steps compiled to Spark DataFrame operations.

`apply_transforms(frame, steps)` is the whole interface: each step of a
pipeline's `transforms` becomes DataFrame and Column operations on the lazy
frame, in order. Nothing is collected and no job runs here; Spark analyses each
step as it is added, so a step that cannot apply fails right away, as one line
naming the step (`transforms[2] (filter)`) and the column, never a Java trace.

    select        the listed columns, in that order (hakiri's provenance columns stay)
    rename        withColumnsRenamed
    cast          each column cast to its (sandbox-checked) Spark type
    filter        where(expr)
    with_columns  withColumns(expr, ...): each expression sees the columns as they
                  were before the step
    drop          every other column, selected
    dedupe        one row per key: without order_by any one (dropDuplicates), else
                  the first by order_by (row_number over a window)
    flatten       a struct's fields become `<column><separator><field>` columns,
                  in its place
    explode       one row per element of an array column (explode_outer with
                  keep_empty), named `alias` (default: the column), in its place
    join          a USING join with a table of the context store, read through
                  `tables` (the caller's: the engine knows where the store is)

Column names are always quoted, so names with dots, spaces or backquotes are
plain names. Expressions pass the transform sandbox three times: when the
manifest loads, here against the frame's columns, and on Spark's own parse of
the text (see `hakiri.guards.expressions`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hakiri.errors import HakiriError, TransformError
from hakiri.guards.expressions import (
    LITERAL_FUNCTIONS,
    UnsafeExpression,
    check_expression,
    function_refusal,
    parse_sort_key,
    referenced_columns,
)
from hakiri.guards.spark_types import quoted_name, spark_type
from hakiri.spark.errors import is_spark_failure, translate
from hakiri.spec.transforms import (
    CastStep,
    DedupeStep,
    DropStep,
    ExplodeStep,
    FilterStep,
    FlattenStep,
    JoinStep,
    RenameStep,
    SelectStep,
    TransformStep,
    WithColumnsStep,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["HAKIRI_COLUMNS", "TransformError", "apply_transforms", "quoted_name"]

# Columns hakiri adds to a files batch (`provenance = true`); a select keeps them.
# The same names as hakiri.sources.files.reader.PROVENANCE_COLUMNS (sources sit above spark);
# lineage leaves them out of a table's columns.
HAKIRI_COLUMNS = ("_source_file_hash", "_hakiri_batch_id")
_SHOWN_COLUMNS = 20
_COLUMN_HINT = (
    "check the name against the source and the steps before this one; "
    "`hakiri plan` shows the columns the transforms produce"
)


ContextTables = Callable[[str], "DataFrame"]


def apply_transforms(
    frame: DataFrame, steps: Sequence[TransformStep], tables: ContextTables | None = None
) -> DataFrame:
    """`frame` with every step applied, in order (lazily: no Spark job runs). `tables` reads a
    table of the context store by name, for `join` steps."""
    if not steps:
        return frame
    case_sensitive = str(frame.sparkSession.conf.get("spark.sql.caseSensitive", "false")) == "true"
    for index, step in enumerate(steps):
        where = f"transforms[{index}] ({step.op})"
        compile_step = _STEPS[type(step)]
        try:
            frame = compile_step(_Batch(frame, where, case_sensitive, tables), step)
            _analyse(frame)
        except UnsafeExpression as exc:
            raise UnsafeExpression(f"{where}: {exc.reason}", exc.hint) from None
        except HakiriError:
            raise
        except Exception as exc:
            if not is_spark_failure(exc):
                raise
            raise _translated(exc, where, frame) from exc
    return frame


def _analyse(frame: DataFrame) -> None:
    """Have the engine analyse `frame` now, so that a step that does not fit the data fails as
    that step. Over Spark Connect a frame is analysed when the engine is first asked about it,
    and the client works some schemas out alone (a filter's is its input's): Apache Spark is
    asked whether the frame streams, one round trip. Sail analyses it for its schema (its
    answer to that question fails on some valid plans); a driver in this process analyses
    every frame at once."""
    from hakiri.spark.engines import SAIL, engine_of_session

    if engine_of_session(frame.sparkSession) == SAIL:
        frame.schema  # noqa: B018
    else:
        frame.isStreaming  # noqa: B018


class _Batch:
    """The frame one step applies to, with name lookups as Spark resolves them."""

    def __init__(
        self,
        frame: DataFrame,
        where: str,
        case_sensitive: bool,
        tables: ContextTables | None = None,
    ) -> None:
        self.frame, self.where, self.case_sensitive = frame, where, case_sensitive
        self.tables = tables
        self.columns: list[str] = list(frame.columns)

    def key(self, name: str) -> str:
        return name if self.case_sensitive else name.lower()

    def resolve(self, name: str) -> str:
        """The frame's own spelling of column `name`; TransformError when there is none."""
        if name in self.columns:
            return name
        matches = [c for c in self.columns if self.key(c) == self.key(name)]
        if len(matches) == 1:
            return matches[0]
        raise TransformError(
            f"{self.where}: no column {name!r} in the batch (columns: {_listed(self.columns)})",
            _COLUMN_HINT,
        )

    def refuse_taken(self, names: Sequence[str], leaving: set[str]) -> None:
        """New column names must not collide with each other or with a column that stays."""
        staying = {self.key(c) for c in self.columns if c not in leaving}
        seen: set[str] = set()
        for name in names:
            if self.key(name) in staying or self.key(name) in seen:
                raise TransformError(
                    f"{self.where}: it would make a second column named {name!r}",
                    "rename or drop the existing column first, or choose another name",
                )
            seen.add(self.key(name))

    def expression(self, text: str, *, boolean: bool = False) -> Column:
        """The Column of a sandbox-checked expression (checked again, now with the columns known)."""
        from pyspark.sql import functions as F

        check_expression(text, boolean=boolean, columns=self.columns)
        _check_spark_parse(self.frame, text, self.columns)
        for name in referenced_columns(text):
            self.resolve(name)
        return F.expr(text)


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(quoted_name(name))


def _listed(columns: Sequence[str]) -> str:
    shown = ", ".join(columns[:_SHOWN_COLUMNS])
    return shown + (f", … ({len(columns)} in all)" if len(columns) > _SHOWN_COLUMNS else "")


# --------------------------------------------------------------------- the steps


def _select(batch: _Batch, step: SelectStep) -> DataFrame:
    chosen = [batch.resolve(name) for name in step.columns]
    kept = [c for c in batch.columns if c in HAKIRI_COLUMNS and c not in chosen]
    return batch.frame.select(*[_col(c) for c in [*chosen, *kept]])


def _rename(batch: _Batch, step: RenameStep) -> DataFrame:
    renames = {batch.resolve(old): new for old, new in step.columns.items()}
    batch.refuse_taken(list(renames.values()), leaving=set(renames))
    return batch.frame.withColumnsRenamed(renames)


def _cast(batch: _Batch, step: CastStep) -> DataFrame:
    casts = {}
    for name, type_text in step.columns.items():
        column = batch.resolve(name)
        casts[column] = _col(column).cast(spark_type(type_text))
    return batch.frame.withColumns(casts)


def _filter(batch: _Batch, step: FilterStep) -> DataFrame:
    return batch.frame.where(batch.expression(step.expr, boolean=True))


def _with_columns(batch: _Batch, step: WithColumnsStep) -> DataFrame:
    return batch.frame.withColumns(
        {name: batch.expression(text) for name, text in step.columns.items()}
    )


def _drop(batch: _Batch, step: DropStep) -> DataFrame:
    dropped = {batch.resolve(name) for name in step.columns}
    return batch.frame.select(*[_col(c) for c in batch.columns if c not in dropped])


def _dedupe(batch: _Batch, step: DedupeStep) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = [batch.resolve(name) for name in step.keys]
    if not step.order_by:
        return batch.frame.dropDuplicates(keys)
    order = []
    for text in step.order_by:
        key = parse_sort_key(text)
        column = batch.expression(key.expression)
        nulls_first = (not key.descending) if key.nulls_first is None else key.nulls_first
        if key.descending:
            order.append(column.desc_nulls_first() if nulls_first else column.desc_nulls_last())
        else:
            order.append(column.asc_nulls_first() if nulls_first else column.asc_nulls_last())
    row = _unused(batch.columns, "_hakiri_row")
    window = Window.partitionBy(*[_col(k) for k in keys]).orderBy(*order)
    ranked = batch.frame.withColumn(row, F.row_number().over(window))
    return ranked.where(F.col(row) == 1).select(*[_col(c) for c in batch.columns])


def _unused(columns: Sequence[str], stem: str) -> str:
    taken = {c.lower() for c in columns}
    name, n = stem, 1
    while name.lower() in taken:
        name, n = f"{stem}_{n}", n + 1
    return name


def _flatten(batch: _Batch, step: FlattenStep) -> DataFrame:
    from pyspark.sql.types import StructType

    column = batch.resolve(step.column)
    kind = batch.frame.schema[column].dataType
    if not isinstance(kind, StructType):
        raise TransformError(
            f"{batch.where}: column {column!r} is {kind.simpleString()}, not a struct",
            "flatten works on struct columns; for an array, use an explode step first",
        )
    fields = [(f.name, f"{column}{step.separator}{f.name}") for f in kind.fields]
    batch.refuse_taken([new for _, new in fields], leaving={column})
    selected: list[Column] = []
    for c in batch.columns:
        if c == column:
            selected += [_col(column).getField(field).alias(new) for field, new in fields]
        else:
            selected.append(_col(c))
    return batch.frame.select(*selected)


def _explode(batch: _Batch, step: ExplodeStep) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    column = batch.resolve(step.column)
    kind = batch.frame.schema[column].dataType
    if not isinstance(kind, ArrayType):
        raise TransformError(
            f"{batch.where}: column {column!r} is {kind.simpleString()}, not an array",
            "explode works on array columns; for a struct, use a flatten step",
        )
    alias = step.alias or column
    batch.refuse_taken([alias], leaving={column})
    explode = F.explode_outer if step.keep_empty else F.explode
    selected = [explode(_col(c)).alias(alias) if c == column else _col(c) for c in batch.columns]
    return batch.frame.select(*selected)


def _join(batch: _Batch, step: JoinStep) -> DataFrame:
    if batch.tables is None:
        raise TransformError(
            f"{batch.where}: this command cannot read the context store for a join",
            "a bug: report it with the command that was run",
        )
    keys = [batch.resolve(name) for name in step.on]
    table = batch.tables(step.table)
    table_columns = list(table.columns)
    right = _Batch(table, f"{batch.where} table {step.table!r}", batch.case_sensitive)
    wanted = table_columns if step.columns is None else [right.resolve(c) for c in step.columns]
    for key in keys:
        right.resolve(key)
    if step.how not in ("left_semi", "left_anti"):
        joined = {batch.key(k) for k in keys}
        batch.refuse_taken([c for c in wanted if batch.key(c) not in joined], leaving=set())
    table = table.select(*[_col(c) for c in wanted])
    return batch.frame.join(table, on=keys, how=step.how)


_STEPS: dict[type, Callable[[_Batch, Any], DataFrame]] = {
    SelectStep: _select,
    RenameStep: _rename,
    CastStep: _cast,
    FilterStep: _filter,
    WithColumnsStep: _with_columns,
    DropStep: _drop,
    DedupeStep: _dedupe,
    FlattenStep: _flatten,
    ExplodeStep: _explode,
    JoinStep: _join,
}


# --------------------------------------------------------------------- Spark's own parse

# Catalyst nodes Spark's expression parser makes for what the sandbox refuses.
_REFUSED_NODES = {
    "ScalarSubquery": "a subquery (SELECT ...) reads other tables",
    "Exists": "a subquery (EXISTS ...) reads other tables",
    "ListQuery": "a subquery (IN (SELECT ...)) reads other tables",
    "InSubquery": "a subquery (IN (SELECT ...)) reads other tables",
    "LateralSubquery": "a subquery reads other tables",
    "UnresolvedWindowExpression": "a window (OVER ...) reads other rows",
    "WindowExpression": "a window (OVER ...) reads other rows",
    "WindowSpecDefinition": "a window (OVER ...) reads other rows",
    "ExpressionWithUnresolvedIdentifier": "IDENTIFIER(...) names a column or function at run time",
    "NamedParameter": "a parameter marker is not allowed",
    "PosParameter": "a parameter marker is not allowed",
}
_FUNCTION_NODES = {
    "CurrentDate": "current_date",
    "CurrentTimestamp": "current_timestamp",
    "CurrentTime": "current_time",
    "Now": "now",
    "LocalTimestamp": "localtimestamp",
    "CurrentUser": "current_user",
    "CurrentDatabase": "current_database",
    "CurrentCatalog": "current_catalog",
    "CurrentTimeZone": "current_timezone",
}


def _check_spark_parse(frame: DataFrame, text: str, columns: Sequence[str]) -> None:
    """Walk Spark's own parse of `text`: every function it would call must be allowed.

    sqlglot and Spark read the same text; this catches any place where they would
    not (a session setting such as spark.sql.parser.escapedStringLiterals changes
    where a string ends). A driver in this process hands over the parse tree itself; over
    Spark Connect, Apache Spark's parse comes back as the parsed plan EXPLAIN prints. Sail
    parses SQL with a parser of its own, not Spark's, has no JVM to reflect into, and its
    EXPLAIN analyses the statement first: there the sandbox's first two checks stand alone.
    """
    from hakiri.spark.engines import SAIL, engine_of_session

    session = getattr(frame.sparkSession, "_jsparkSession", None)
    if session is None:
        if engine_of_session(frame.sparkSession) != SAIL:
            _check_parsed_plan(_parsed_plan(frame, text), columns)
        return
    tree = session.sessionState().sqlParser().parseExpression(text)
    known = {c.lower() for c in columns}
    pending = [tree]
    while pending:
        node = pending.pop()
        kind = node.getClass().getSimpleName().rstrip("$")
        if kind in _REFUSED_NODES:
            raise UnsafeExpression(f"transform expression refused: {_REFUSED_NODES[kind]}")
        if kind in _FUNCTION_NODES:
            raise _refusal(_FUNCTION_NODES[kind])
        if kind == "UnresolvedFunction":
            _check_function(node)
        if kind == "UnresolvedAttribute":
            parts = _seq(node.nameParts())
            if len(parts) == 1 and parts[0].lower() in LITERAL_FUNCTIONS - known:
                raise _refusal(parts[0])
        pending.extend(_seq(node.children()))


def _parsed_plan(frame: DataFrame, text: str) -> str:
    """Spark's parse of `SELECT <text>`, as EXPLAIN prints its parsed plan. Only parsed and
    explained: no row is read, and the plan is never run."""
    explained = frame.sparkSession.sql(f"EXPLAIN EXTENDED SELECT {text}").collect()
    plan = str(explained[0][0]) if explained else ""
    parsed = plan.split("== Analyzed Logical Plan ==", 1)[0]
    parsed = parsed.split("== Parsed Logical Plan ==", 1)[-1].strip()
    # 'Project [<the expression>] over a OneRowRelation, and any subquery's lines below it.
    return parsed.removeprefix("'Project [")


# In a parsed plan, an unresolved function prints as 'name(args) and a column as 'name; a
# string literal prints without quotes, so a quote before a name is Spark's, never the text's
# (a literal holding one is refused too: the error is on the safe side).
_NAME = r"(?:`(?:[^`]|``)*`|[A-Za-z_$][\w$]*)"
_PRINTED_CALL = re.compile(rf"'({_NAME}(?:\.{_NAME})*)\((\)?)")
_PRINTED_COLUMN = re.compile(rf"'({_NAME})(?![\w$`.(])")
_PRINTED_NODES = {
    "scalar-subquery#": _REFUSED_NODES["ScalarSubquery"],
    "exists#": _REFUSED_NODES["Exists"],
    "list#": _REFUSED_NODES["ListQuery"],
    "lateral-subquery#": _REFUSED_NODES["LateralSubquery"],
    "windowspecdefinition(": _REFUSED_NODES["WindowSpecDefinition"],
    "unresolvedwindowexpression(": _REFUSED_NODES["UnresolvedWindowExpression"],
    "expressionwithunresolvedidentifier(": _REFUSED_NODES["ExpressionWithUnresolvedIdentifier"],
    "namedparameter(": _REFUSED_NODES["NamedParameter"],
    "posparameter(": _REFUSED_NODES["PosParameter"],
}


def _check_parsed_plan(plan: str, columns: Sequence[str]) -> None:
    """`_check_spark_parse`'s walk, over the printed parsed plan."""
    lowered = plan.lower()
    for marker, why in _PRINTED_NODES.items():
        if marker in lowered:
            raise UnsafeExpression(f"transform expression refused: {why}")
    for match in _PRINTED_CALL.finditer(plan):
        _check_call(
            [_unquoted(p) for p in re.findall(_NAME, match.group(1))],
            no_arguments=bool(match.group(2)),
            aggregates=plan[match.end() :].lstrip().lower().startswith("distinct "),
        )
    if " filter (" in lowered or ") filter " in lowered:
        raise UnsafeExpression(
            "transform expression refused: an aggregate's FILTER (WHERE ...) aggregates rows"
        )
    known = {c.lower() for c in columns}
    for match in _PRINTED_COLUMN.finditer(plan):
        name = _unquoted(match.group(1))
        if name.lower() in LITERAL_FUNCTIONS - known:
            raise _refusal(name)


def _unquoted(part: str) -> str:
    return part[1:-1].replace("``", "`") if part.startswith("`") else part


def _check_function(node: Any) -> None:
    _check_call(
        [str(p) for p in _seq(node.nameParts())],
        no_arguments=node.children().size() == 0,
        aggregates=bool(node.isDistinct() or node.filter().isDefined()),
    )


def _check_call(parts: list[str], *, no_arguments: bool, aggregates: bool) -> None:
    """A call in Spark's parse: function `parts` (its name, maybe qualified), with no arguments
    or with DISTINCT/FILTER."""
    if len(parts) != 1:
        raise UnsafeExpression(
            f"transform expression refused: {'.'.join(parts)}() is a qualified function name; "
            "only Spark's built-in functions may be called, by their plain names"
        )
    refusal = function_refusal(parts[0])
    if refusal is not None:
        raise refusal
    if parts[0].lower() == "unix_timestamp" and no_arguments:
        raise UnsafeExpression(
            "transform expression refused: unix_timestamp() without an argument is not "
            "deterministic: it is the time the batch runs"
        )
    if aggregates:
        raise UnsafeExpression(
            f"transform expression refused: {parts[0]}(DISTINCT/FILTER ...) aggregates rows"
        )


def _refusal(name: str) -> UnsafeExpression:
    return function_refusal(name) or UnsafeExpression(f"transform expression refused: {name}")


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


# --------------------------------------------------------------------- errors


def _translated(exc: BaseException, where: str, frame: DataFrame) -> HakiriError:
    """Spark's refusal of a step, as one line naming the step."""
    condition = _call(exc, "getCondition") or ""
    parameters = _call(exc, "getMessageParameters") or {}
    if condition.startswith("UNRESOLVED_COLUMN") and "objectName" in parameters:
        return TransformError(
            f"{where}: no column {parameters['objectName']} in the batch "
            f"(columns: {_listed(list(frame.columns))})",
            _COLUMN_HINT,
        )
    if condition == "FIELD_NOT_FOUND" and "fieldName" in parameters:
        return TransformError(
            f"{where}: no struct field {parameters['fieldName']} "
            f"(fields: {parameters.get('fields', '?')})",
            _COLUMN_HINT,
        )
    if condition == "PARSE_SYNTAX_ERROR":
        return TransformError(
            f"{where}: Spark cannot parse the expression "
            f"(syntax error at or near {parameters.get('error', '?')})",
            "check the expression's syntax (it is Spark SQL)",
        )
    error = translate(exc, where)
    return TransformError(error.reason, error.hint)


def _call(exc: BaseException, method: str) -> Any:
    try:
        return getattr(exc, method)()
    except Exception:
        return None
