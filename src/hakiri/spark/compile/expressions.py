"""Spark Connect expression protos -> Spark SQL expression text, for compiled transforms.

PySpark's Column API builds `spark.connect.Expression` messages; each supported kind is
written back as the Spark SQL text a transform step holds, and that text then passes the
transform sandbox like any hand-written step (`hakiri.guards.expressions`):

    literal                   'text' (backslash-escaped, as Spark reads it), 42, 1.5D, 1.50BD,
                              true, NULL, DATE '…', TIMESTAMP_NTZ '…', timestamp_micros(…)
    unresolved_attribute      `name`, `struct`.`field` (each part backquoted)
    unresolved_function       operators (`a + b`, `a = b`, AND, OR, NOT, IS NULL, IN, LIKE…),
                              `when`/`otherwise` as CASE, every other name as name(args)
    cast                      CAST(x AS type), TRY_CAST(x AS type)
    unresolved_extract_value  x['key'], x[0], x.field (getItem, getField, col["k"])
    lambda_function           x -> … inside a higher-order function (F.transform, F.filter…)
    expression_string         F.expr(...) text, in parentheses (the sandbox reads it)
    call_function             F.call_function(name, ...) as name(args)

Everything else is refused with a `CompileRefusal` that says what it is: Python UDFs, windows
(`.over(...)`), sort orders outside a dedupe, struct updates (withField/dropFields), subqueries.
The refusal carries the Python call site PySpark recorded for the expression, when it did.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from typing import Any

from hakiri.errors import HakiriError

__all__ = ["CompileRefusal", "call_site", "expression_sql", "quote_name", "split_name"]

# Column operators PySpark sends as functions: name -> SQL infix operator.
_INFIX = {
    "==": "=",
    "!=": "!=",
    "<=>": "<=>",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "and": "AND",
    "or": "OR",
    "like": "LIKE",
    "ilike": "ILIKE",
    "rlike": "RLIKE",
    "&": "&",
    "|": "|",
    "^": "^",
}
_POSTFIX = {"isnull": "IS NULL", "isnotnull": "IS NOT NULL"}
_WINDOW_HINT = (
    "a compiled transform works one row at a time; keep one row per key with "
    "df.dropDuplicates([...]) (a dedupe step), or compute it in a view over the target"
)


class CompileRefusal(HakiriError):
    """Something in transform(df) a compiled transform cannot carry. `site` is the Python
    call site ('path.py:12') PySpark recorded for it, when there is one; else `calls` names
    the DataFrame methods that make it, for the compiler to find in the module's source."""

    def __init__(
        self,
        reason: str,
        hint: str | None = None,
        site: str | None = None,
        calls: tuple[str, ...] = (),
    ) -> None:
        super().__init__(reason, hint)
        self.site, self.calls = site, calls


def call_site(message: Any) -> str | None:
    """The first Python call site PySpark recorded in `message` (or a list of them) or below
    it ('file.py:7')."""
    pending = list(message) if isinstance(message, list) else [message]
    while pending:
        node = pending.pop(0)
        common = getattr(node, "common", None)
        if common is not None and common.HasField("origin"):
            site = common.origin.python_origin.call_site
            if site:
                return str(site)
        for field, value in node.ListFields():
            if field.message_type is None:
                continue
            if hasattr(value, "ListFields"):
                pending.append(value)
            elif not isinstance(value, Mapping):  # a repeated field (a map's values: skipped)
                pending.extend(value)
    return None


def split_name(text: str) -> list[str]:
    """A column name as Spark parses `F.col(text)`: parts split on dots outside backquotes."""
    parts: list[str] = []
    current: list[str] = []
    quoted, i = False, 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "`" and text[i + 1 : i + 2] == "`":
                current.append("`")
                i += 1
            elif c == "`":
                quoted = False
            else:
                current.append(c)
        elif c == "`":
            quoted = True
        elif c == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    parts.append("".join(current))
    return parts


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def expression_sql(expression: Any) -> str:
    """The Spark SQL text of one `spark.connect.Expression`; CompileRefusal if it has none."""
    return _Writer().write(expression)


class _Writer:
    def write(self, e: Any) -> str:
        kind = e.WhichOneof("expr_type")
        method = getattr(self, f"_{kind}", None)
        if method is None:
            raise _refusal_of_kind(kind, e)
        return str(method(e))

    def all(self, expressions: Sequence[Any]) -> list[str]:
        return [self.write(x) for x in expressions]

    # ---------------------------------------------------------------- leaves

    def _literal(self, e: Any) -> str:
        return literal_sql(e.literal, e)

    def _unresolved_attribute(self, e: Any) -> str:
        attribute = e.unresolved_attribute
        if attribute.is_metadata_column:
            raise CompileRefusal(
                f"metadata column {attribute.unparsed_identifier!r} is not part of the row",
                "for the file of a row, set `provenance = true` on a files source",
                call_site(e),
            )
        parts = split_name(attribute.unparsed_identifier)
        if parts == ["*"]:
            return "*"
        return ".".join(quote_name(p) for p in parts)

    def _unresolved_named_lambda_variable(self, e: Any) -> str:
        return ".".join(e.unresolved_named_lambda_variable.name_parts)

    def _expression_string(self, e: Any) -> str:
        return f"({e.expression_string.expression})"

    # ---------------------------------------------------------------- composites

    def _alias(self, e: Any) -> str:
        # An alias inside an expression names nothing a step keeps (the step's key does).
        return self.write(e.alias.expr)

    def _cast(self, e: Any) -> str:
        cast = e.cast
        if cast.HasField("type"):
            from pyspark.sql.connect.types import proto_schema_to_pyspark_data_type

            type_text = proto_schema_to_pyspark_data_type(cast.type).simpleString()
        else:
            type_text = cast.type_str
        keyword = "TRY_CAST" if cast.eval_mode == cast.EVAL_MODE_TRY else "CAST"
        return f"{keyword}({self.write(cast.expr)} AS {type_text})"

    def _unresolved_extract_value(self, e: Any) -> str:
        extract = e.unresolved_extract_value
        # `x[0]`, `x['key']`, and a struct's field as `x['field']`, which Spark reads alike.
        return f"{self.write(extract.child)}[{self.write(extract.extraction)}]"

    def _lambda_function(self, e: Any) -> str:
        function = e.lambda_function
        names = [".".join(v.name_parts) for v in function.arguments]
        body = self.write(function.function)
        params = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
        return f"{params} -> {body}"

    def _call_function(self, e: Any) -> str:
        call = e.call_function
        return f"{call.function_name}({', '.join(self.all(call.arguments))})"

    def _unresolved_function(self, e: Any) -> str:
        function = e.unresolved_function
        name = function.function_name
        lowered = name.lower()
        if function.is_user_defined_function:
            raise CompileRefusal(
                f"{name}() is a user-defined function",
                "use Spark's built-in functions (pyspark.sql.functions)",
                call_site(e),
            )
        if function.is_distinct:
            raise CompileRefusal(
                f"{name}(DISTINCT ...) aggregates rows",
                "a compiled transform works one row at a time",
                call_site(e),
            )
        args = self.all(function.arguments)
        if lowered in _INFIX and len(args) == 2:
            return f"({args[0]} {_INFIX[lowered]} {args[1]})"
        if lowered in _POSTFIX and len(args) == 1:
            return f"({args[0]} {_POSTFIX[lowered]})"
        if lowered == "not" and len(args) == 1:
            return f"(NOT {args[0]})"
        if lowered == "negative" and len(args) == 1:
            return f"(- {args[0]})"
        if lowered == "~" and len(args) == 1:
            return f"(~ {args[0]})"
        if lowered == "in" and args:
            return f"({args[0]} IN ({', '.join(args[1:])}))"
        if lowered == "when":
            return _case_when(args)
        return f"{name}({', '.join(args)})"


def _case_when(args: list[str]) -> str:
    pairs = [f"WHEN {args[i]} THEN {args[i + 1]}" for i in range(0, len(args) - 1, 2)]
    otherwise = f" ELSE {args[-1]}" if len(args) % 2 else ""
    return f"CASE {' '.join(pairs)}{otherwise} END"


# What each refused expression kind is, and what to do instead.
_REFUSED_KINDS = {
    "common_inline_user_defined_function": (
        "a Python UDF runs Python code on every row, which a compiled transform cannot carry",
        "use Spark's built-in functions (pyspark.sql.functions); the runtime never runs the module",
    ),
    "window": ("a window function (.over(...)) reads other rows of the batch", _WINDOW_HINT),
    "sort_order": (
        "a sort order (asc()/desc()) outside a dedupe orders rows, which a load does not keep",
        "sort when you read the target",
    ),
    "update_fields": (
        "withField/dropFields (struct updates) are not compiled yet",
        "build the struct with F.struct(...) or flatten it",
    ),
    "unresolved_regex": (
        "colRegex picks columns by a pattern when the batch runs",
        "name the columns",
    ),
    "unresolved_star": ("* is allowed only as a select item", "name the columns"),
    "subquery_expression": ("a subquery reads other tables", "join a context table instead"),
    "named_argument_expression": (
        "a named function argument (name => value) is not compiled",
        "pass the arguments by position",
    ),
}


def _refusal_of_kind(kind: str | None, e: Any) -> CompileRefusal:
    why, hint = _REFUSED_KINDS.get(
        kind or "",
        (f"a {kind} expression cannot be compiled", "use Spark's built-in functions"),
    )
    return CompileRefusal(why, hint, call_site(e))


# ---------------------------------------------------------------- literals


def literal_sql(literal: Any, where: Any = None) -> str:
    """One `Expression.Literal` as Spark SQL text that reads back as the same value and type."""
    kind = literal.WhichOneof("literal_type")
    value = getattr(literal, kind) if kind else None
    if kind == "null":
        return "NULL"
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("integer", "long"):
        return str(value)
    if kind == "short":
        return f"{value}S"
    if kind == "byte":
        return f"{value}Y"
    if kind == "double":
        return _floating(value, "DOUBLE")
    if kind == "float":
        return _floating(value, "FLOAT")
    if kind == "decimal":
        return _decimal(literal.decimal)
    if kind == "string":
        return string_sql(value)
    if kind == "binary":
        return f"X'{bytes(value).hex().upper()}'"
    if kind == "date":
        return f"DATE '{(dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()}'"
    if kind == "timestamp":
        # microseconds since the epoch, an instant: exact, whatever the session's time zone
        return f"timestamp_micros({value})"
    if kind == "timestamp_ntz":
        moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value)
        return f"TIMESTAMP_NTZ '{moment.isoformat(sep=' ')}'"
    if kind == "array":
        items = [literal_sql(x, where) for x in literal.array.elements]
        return f"array({', '.join(items)})"
    raise CompileRefusal(
        f"a {kind} literal cannot be compiled",
        "write the value with Spark SQL inside F.expr(...)",
        call_site(where) if where is not None else None,
    )


def _floating(value: float, type_name: str) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        text = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        return f"CAST('{text}' AS {type_name})"
    if type_name == "DOUBLE":
        return f"{value!r}D"
    return f"CAST({value!r} AS FLOAT)"


def _decimal(literal: Any) -> str:
    """A decimal keeps every digit it was written with: PySpark sends lit(Decimal("1.50")) as
    decimal(10,0), which Apache Spark would round to 2 (Sail keeps 1.50); the text says
    decimal(10,2), the value's own scale, at least the precision PySpark sent."""
    number = decimal.Decimal(literal.value)
    _, digits, exponent = number.as_tuple()
    scale = max(0, -int(exponent))
    precision = max(literal.precision if literal.HasField("precision") else 10, len(digits), scale)
    return f"CAST('{number}' AS DECIMAL({min(precision, 38)},{scale}))"


def string_sql(value: str) -> str:
    """A Spark SQL string literal: Spark reads backslash escapes inside quotes."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f"'{escaped}'"
