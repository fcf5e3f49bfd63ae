"""Spark SQL type names, read without Spark: the types a `cast` step may name, and what
the planner can tell about a column's type (a struct's fields, an array's elements).

`spark_type` accepts only the words Spark's own type grammar knows (`bigint`, `long`,
`decimal(12,2)`, `array<int>`, `struct<a: int>`, ...) and names each type canonically
(`long` -> `bigint`, `varchar(10)` -> `string`, as Spark reads it); sqlglot alone would
also take `text`, `bool` or `int8` (a tinyint to it, a bigint to PostgreSQL).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from hakiri.guards.expressions import UnsafeExpression

__all__ = [
    "array_element_type",
    "is_array",
    "is_struct",
    "quoted_name",
    "spark_type",
    "static_type",
    "struct_fields",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The type words Spark's parser knows (SqlBaseParser's dataType rule), lower case.
_SPARK_TYPE_WORDS = _words(
    """
    boolean byte tinyint short smallint int integer long bigint float real double date
    timestamp timestamp_ltz timestamp_ntz binary variant string char character varchar
    decimal dec numeric interval year month day hour minute second to array map struct
    not null comment
    """
)
_SIMPLE_TYPES = {
    exp.DataType.Type.BOOLEAN: "boolean",
    exp.DataType.Type.TINYINT: "tinyint",
    exp.DataType.Type.SMALLINT: "smallint",
    exp.DataType.Type.INT: "int",
    exp.DataType.Type.BIGINT: "bigint",
    exp.DataType.Type.FLOAT: "float",
    exp.DataType.Type.DOUBLE: "double",
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamp",
    exp.DataType.Type.TIMESTAMPLTZ: "timestamp",
    exp.DataType.Type.TIMESTAMPNTZ: "timestamp_ntz",
    exp.DataType.Type.BINARY: "binary",
    exp.DataType.Type.VARIANT: "variant",
    # Spark reads char(n) and varchar(n) values as strings.
    exp.DataType.Type.TEXT: "string",
    exp.DataType.Type.CHAR: "string",
    exp.DataType.Type.VARCHAR: "string",
}
_TYPE_HINT = (
    "use a Spark SQL type: boolean, tinyint, smallint, int, bigint, float, double, "
    "decimal(p,s), string, binary, date, timestamp, timestamp_ntz, array<...>, map<...>, struct<...>"
)


def spark_type(text: str) -> str:
    """The canonical Spark name of type `text` ('long' -> 'bigint', 'DECIMAL(12, 2)' ->
    'decimal(12,2)'); UnsafeExpression when Spark would not know it."""
    try:
        tokens = Spark().tokenize(text)
    except TokenError:
        tokens = []
    if not tokens:
        raise _not_a_type(text)
    _check_type_words(text, tokens)
    try:
        built = exp.DataType.build(text, dialect="spark", udt=False)
    except (ParseError, TokenError, ValueError):
        raise _not_a_type(text) from None
    return _canonical(built, text)


def _not_a_type(text: str, why: str = "") -> UnsafeExpression:
    detail = f": {why}" if why else ""
    return UnsafeExpression(f"{text.strip()!r} is not a Spark SQL type{detail}", _TYPE_HINT)


# The words a type starts with, for a suggestion when one is misspelt.
_TYPE_NAMES = sorted(
    _SPARK_TYPE_WORDS - _words("to not null comment year month day hour minute second")
)


# Other systems' names for Spark's types (PostgreSQL's, mostly), named by what Spark calls them.
_ELSEWHERE = {
    "text": "string",
    "bool": "boolean",
    "int2": "smallint",
    "int4": "int",
    "int8": "bigint",
    "float4": "float",
    "float8": "double",
    "timestamptz": "timestamp",
    "datetime": "timestamp",
    "bytea": "binary",
    "uuid": "string",
    "json": "string",
    "jsonb": "string",
}


def _did_you_mean(word: str) -> str:
    if word.lower() in _ELSEWHERE:
        return f" (Spark calls it {_ELSEWHERE[word.lower()]!r})"
    close = difflib.get_close_matches(word.lower(), _TYPE_NAMES, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_type_words(text: str, tokens: Sequence[Token]) -> None:
    """Every word in a type position is one of Spark's type words (struct field names aside)."""
    stack: list[str] = []  # what each open '<' or '(' belongs to: 'struct' or 'other'
    expect_field = False
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind in (TokenType.LT, TokenType.L_PAREN):
            stack.append("struct" if i and tokens[i - 1].text.lower() == "struct" else "other")
            expect_field = stack[-1] == "struct"
            continue
        if kind in (TokenType.GT, TokenType.R_PAREN):
            if not stack:
                raise _not_a_type(text, f"unbalanced {token.text!r}")
            stack.pop()
            expect_field = False
            continue
        if kind is TokenType.COMMA:
            expect_field = bool(stack) and stack[-1] == "struct"
            continue
        if expect_field:  # a struct field's name: any word, backquoted or not
            expect_field = False
            continue
        if kind in (TokenType.COLON, TokenType.NUMBER, TokenType.STRING):
            continue
        if token.text.lower() not in _SPARK_TYPE_WORDS:
            raise _not_a_type(text, f"Spark has no type {token.text!r}{_did_you_mean(token.text)}")
    if stack:
        raise _not_a_type(text, "unbalanced '<' or '('")


def _canonical(node: exp.Expr, text: str) -> str:
    if not isinstance(node, exp.DataType):
        raise _not_a_type(text)
    kind = node.this
    if isinstance(kind, exp.Interval):  # `interval day to second`, `interval year`
        return node.sql("spark").lower()
    if kind in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[kind]
    params = [p for p in node.expressions if isinstance(p, exp.DataTypeParam)]
    if kind is exp.DataType.Type.DECIMAL:
        numbers = [p.name for p in params] or ["10", "0"]
        return f"decimal({numbers[0]},{numbers[1] if len(numbers) > 1 else 0})"
    if kind is exp.DataType.Type.ARRAY and len(node.expressions) == 1:
        return f"array<{_canonical(node.expressions[0], text)}>"
    if kind is exp.DataType.Type.MAP and len(node.expressions) == 2:
        key, value = node.expressions
        return f"map<{_canonical(key, text)},{_canonical(value, text)}>"
    if kind is exp.DataType.Type.STRUCT:
        fields = []
        for field in node.expressions:
            if not isinstance(field, exp.ColumnDef) or not isinstance(field.kind, exp.DataType):
                raise _not_a_type(text)
            fields.append(f"{_field_name(field.name)}:{_canonical(field.kind, text)}")
        return f"struct<{','.join(fields)}>"
    raise _not_a_type(text)


def _field_name(name: str) -> str:
    plain = (
        name
        and (name[0].isalpha() or name[0] == "_")
        and all(c.isalnum() or c == "_" for c in name)
    )
    return name if plain else quoted_name(name)


def quoted_name(name: str) -> str:
    """`name` as one Spark SQL identifier (for SQL text and `F.col`): backquoted, so dots,
    spaces and unicode in it are part of the name; a backquote in it is doubled."""
    return "`" + name.replace("`", "``") + "`"


def struct_fields(type_text: str | None) -> list[tuple[str, str | None]] | None:
    """(name, canonical type) of each field of a struct type; None unless it is a struct
    whose fields can be read. Lenient: a field of a type Spark would not name gets None."""
    node = _lenient_type(type_text)
    if node is None or node.this is not exp.DataType.Type.STRUCT:
        return None
    fields: list[tuple[str, str | None]] = []
    for field in node.expressions:
        if not isinstance(field, exp.ColumnDef):
            return None
        fields.append((field.name, _canonical_or_none(field.kind)))
    return fields


def array_element_type(type_text: str | None) -> str | None:
    """The canonical element type of an array type; None when unknown or not an array."""
    node = _lenient_type(type_text)
    if node is None or node.this is not exp.DataType.Type.ARRAY or len(node.expressions) != 1:
        return None
    return _canonical_or_none(node.expressions[0])


def is_struct(type_text: str | None) -> bool | None:
    """True/False when the type is known; None when it is not."""
    node = _lenient_type(type_text)
    return None if node is None else node.this is exp.DataType.Type.STRUCT


def is_array(type_text: str | None) -> bool | None:
    node = _lenient_type(type_text)
    return None if node is None else node.this is exp.DataType.Type.ARRAY


def _lenient_type(type_text: str | None) -> exp.DataType | None:
    if not type_text:
        return None
    try:
        node = exp.DataType.build(type_text, dialect="spark", udt=False)
    except (ParseError, TokenError, ValueError):
        return None
    return node if isinstance(node, exp.DataType) else None


def _canonical_or_none(node: object) -> str | None:
    if not isinstance(node, exp.DataType):
        return None
    try:
        return _canonical(node, node.sql("spark"))
    except UnsafeExpression:
        return None


def static_type(text: str, types: dict[str, str | None]) -> str | None:
    """The Spark type of expression `text` when it shows without data: a plain column
    reference (`types` maps each column to its type), a CAST/TRY_CAST, or a literal."""
    try:
        root = Spark().parse(text)[0]
    except (ParseError, TokenError):
        return None
    if isinstance(root, exp.Paren):
        root = root.unnest()
    if isinstance(root, exp.Column) and not root.table:
        lowered = {k.lower(): v for k, v in types.items()}
        return types.get(root.name, lowered.get(root.name.lower()))
    if isinstance(root, exp.Cast):  # TryCast included
        return _canonical_or_none(root.to)
    if isinstance(root, exp.Boolean):
        return "boolean"
    if isinstance(root, exp.Literal):
        if root.is_string:
            return "string"
        return "int" if root.this.isdigit() and int(root.this) < 2**31 else None
    return None
