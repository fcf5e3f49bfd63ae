"""The transform sandbox: which Spark SQL expressions and types a transform may use.

A transform expression (a `filter`, a `with_columns` value, a `dedupe` sort key)
is Spark SQL text that Spark parses and evaluates on every row. It must be one
pure, deterministic expression over the row's own columns:

    literals; column references (`a`, `a.b`, `` `odd name` ``, `col[0]`, `m['k']`);
    arithmetic, comparison and logic; CASE, CAST, TRY_CAST; lambdas (`x -> x + 1`);
    and calls of the built-in functions in `ALLOWED_FUNCTIONS`

Everything else is refused, and the reason names the function or construct:
anything that reaches outside the row (reflect, java_method, input_file_name,
subqueries), anything that is not deterministic (rand, uuid, current_date, now,
current_user), aggregates and windows (a transform sees one row at a time),
generators, unknown functions (user-defined ones included), parameters,
comments, a second statement, and `${` anywhere: Spark substitutes variables,
environment values and settings into SQL text before it parses it
(`'${env:AWS_SECRET_ACCESS_KEY}'` would load a secret into the target).

The text is read with sqlglot's Spark tokenizer and parser, never with regular
expressions, and checked twice: on the tokens (every character accounted for,
every function name as it was written, backquoted or not) and on the syntax tree
(subqueries, windows, aggregates, functions written without parentheses such as
`current_date`). `hakiri.spark.transforms` checks a third time, before it
compiles, on Spark's own parse of the same text.

The type names of a `cast` step are checked in `hakiri.guards.spark_types`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from hakiri.errors import UnsafeExpression

__all__ = [
    "ALLOWED_FUNCTIONS",
    "LITERAL_FUNCTIONS",
    "SortKey",
    "UnsafeExpression",
    "check_expression",
    "function_refusal",
    "parse_sort_key",
    "referenced_columns",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Spark's built-in functions that read nothing but their arguments and give the
# same answer every time. Names as Spark registers them (lower case); a name is
# matched case-insensitively, backquoted or not.
ALLOWED_FUNCTIONS = _words(
    """
    coalesce if ifnull nullif nullifzero nvl nvl2 nanvl isnan isnull isnotnull equal_null
    zeroifnull typeof

    cast try_cast bigint binary boolean date decimal double float int smallint string
    timestamp tinyint to_binary try_to_binary to_number try_to_number to_char to_varchar

    ascii base64 unbase64 bit_length btrim char chr char_length character_length concat
    concat_ws contains crc32 decode encode elt endswith startswith find_in_set format_number
    format_string printf initcap instr lcase ucase lower upper left right len length
    levenshtein locate position lpad rpad ltrim rtrim trim mask
    octet_length overlay quote regexp_count regexp_extract regexp_extract_all regexp_instr
    regexp_like regexp_replace regexp_substr repeat replace reverse sentences soundex space
    split split_part substr substring substring_index translate hex unhex
    url_encode url_decode try_url_decode parse_url try_parse_url str_to_map
    is_valid_utf8 make_valid_utf8 validate_utf8 try_validate_utf8 luhn_check

    add_months convert_timezone date_add dateadd date_diff datediff date_format
    date_from_unix_date date_part datepart date_sub date_trunc day dayname dayofmonth
    dayofweek dayofyear extract from_unixtime from_utc_timestamp to_utc_timestamp hour
    minute second month monthname quarter year weekday weekofyear last_day next_day
    make_date make_dt_interval make_interval try_make_interval make_timestamp
    make_timestamp_ltz make_timestamp_ntz try_make_timestamp try_make_timestamp_ltz
    try_make_timestamp_ntz make_ym_interval months_between timestamp_micros timestamp_millis
    timestamp_seconds timestampadd timestampdiff to_date try_to_date to_timestamp
    to_timestamp_ltz to_timestamp_ntz try_to_timestamp to_unix_timestamp unix_timestamp
    unix_date unix_micros unix_millis unix_seconds trunc

    abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil ceiling conv cos cosh
    cot csc sec degrees radians e pi exp expm1 factorial floor greatest least hypot ln log
    log10 log1p log2 mod pmod negative positive pow power rint round sign signum sin sinh
    sqrt tan tanh try_add try_subtract try_multiply try_divide try_mod width_bucket
    bit_count bit_get getbit shiftleft shiftright shiftrightunsigned

    md5 sha sha1 sha2 hash xxhash64

    array array_append array_compact array_contains array_distinct array_except
    array_insert array_intersect array_join array_max array_min array_position
    array_prepend array_remove array_repeat array_size array_sort array_union
    arrays_overlap arrays_zip cardinality element_at try_element_at flatten get map
    map_concat map_contains_key map_entries map_from_arrays map_from_entries map_keys
    map_values named_struct sequence size slice sort_array struct

    aggregate reduce exists filter forall transform transform_keys transform_values
    map_filter map_zip_with zip_with

    from_json to_json get_json_object json_array_length json_object_keys schema_of_json
    from_csv to_csv schema_of_csv parse_json try_parse_json variant_get try_variant_get
    is_variant_null schema_of_variant to_variant_object
    """
)

# Names Spark resolves to a function when no column has the name, with or
# without parentheses: `user` is the session's user unless the row has a `user`.
LITERAL_FUNCTIONS = _words(
    "current_date current_time current_timestamp current_user session_user user"
)

_DEFAULT_HINT = (
    "a transform may use Spark's built-in, deterministic, row-by-row functions "
    "(the list is in docs/transforms.md)"
)
_ROW_WISE_HINT = (
    "transforms work one row at a time: keep one row per key with a dedupe step; "
    "aggregate in a view over the target"
)
_CLOCK_HINT = "derive the value from a column of the row (e.g. an updated_at column)"

# name -> (why, hint)
_REFUSED: dict[str, tuple[str, str]] = {}


def _refuse_names(names: str, why: str, hint: str = _DEFAULT_HINT) -> None:
    for name in names.split():
        _REFUSED[name] = (why, hint)


_refuse_names("reflect java_method try_reflect", "calls Java methods")
_refuse_names(
    "input_file_name input_file_block_start input_file_block_length",
    "reads where the row came from, not the row",
    "set `provenance = true` on a files source to load each row's file hash",
)
_refuse_names(
    "read_files from_protobuf to_protobuf xpath xpath_boolean xpath_double xpath_float "
    "xpath_int xpath_long xpath_number xpath_short xpath_string from_xml schema_of_xml",
    "can read files or other documents than the row",
)
_refuse_names(
    "rand randn random randstr uniform uuid shuffle monotonically_increasing_id spark_partition_id",
    "is not deterministic (a re-run would load different values)",
)
_refuse_names(
    "current_date curdate current_timestamp now current_time localtime localtimestamp "
    "current_timezone",
    "is not deterministic: it depends on when the batch runs",
    _CLOCK_HINT,
)
_refuse_names(
    "current_user user session_user current_database current_schema current_catalog "
    "current_path version",
    "reads the Spark session, not the row",
)
_refuse_names(
    "raise_error assert_true",
    "fails the whole batch",
    'use a row rule with on_fail = "abort" (docs/data-quality.md)',
)
_refuse_names(
    """
    sum count count_if avg mean min max min_by max_by first first_value last last_value
    any_value any some every bool_and bool_or collect_list collect_set array_agg listagg
    string_agg approx_count_distinct approx_percentile percentile percentile_approx
    percentile_cont percentile_disc median mode std stddev stddev_pop stddev_samp variance
    var_pop var_samp corr covar_pop covar_samp kurtosis skewness bit_and bit_or bit_xor
    histogram_numeric count_min_sketch grouping grouping_id try_sum try_avg regr_avgx
    regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy
    collect_union approx_top_k
    """,
    "is an aggregate",
    _ROW_WISE_HINT,
)
_refuse_names(
    "row_number rank dense_rank percent_rank cume_dist ntile lag lead nth_value",
    "is a window function",
    _ROW_WISE_HINT,
)
_refuse_names("window session_window window_time", "groups rows into time windows", _ROW_WISE_HINT)
_refuse_names(
    "explode explode_outer posexplode posexplode_outer inline inline_outer stack json_tuple "
    "variant_explode variant_explode_outer",
    "makes several rows out of one",
    "use an explode step",
)
_refuse_names(
    "identifier",
    "names a column or function only when Spark runs it",
    "write the column name itself (backquoted if it needs quoting)",
)

# Keywords that may stand before '(' without being a call (`x IN (1, 2)`, `NOT (a)`).
_SYNTAX_WORDS = _words(
    "and or not in is like ilike rlike regexp between when then else case from for div escape placing distinct"
)
_QUANTIFIERS = _words("any some all")  # only right after LIKE: `s LIKE ANY ('a%', 'b%')`
_LIKES = _words("like ilike rlike")
_SQL_WHITESPACE = " \t\n\r"

# sqlglot nodes for things written without a call's parentheses (or under other names).
_CLOCK_NODES = tuple(
    getattr(exp, n)
    for n in ("CurrentDate", "CurrentTime", "CurrentTimestamp", "CurrentDatetime", "Localtimestamp")
    if hasattr(exp, n)
)
_SESSION_NODES = tuple(
    getattr(exp, n)
    for n in ("CurrentUser", "SessionUser", "CurrentDatabase", "CurrentSchema", "CurrentCatalog")
    if hasattr(exp, n)
)
_RANDOM_NODES = tuple(
    getattr(exp, n) for n in ("Rand", "Randn", "Uuid", "Shuffle") if hasattr(exp, n)
)
# Functions that read the clock when called with no argument: `unix_timestamp()` is now.
_CLOCK_WITHOUT_ARGUMENTS = _words("unix_timestamp to_unix_timestamp")
_STATEMENT_TOKENS = frozenset(Spark.Parser.STATEMENT_PARSERS) | frozenset(Spark.Tokenizer.COMMANDS)


def check_expression(
    text: str, *, boolean: bool = False, columns: Collection[str] | None = None
) -> None:
    """Raise UnsafeExpression unless `text` is one expression the sandbox allows.

    `boolean`: the expression is a filter and must not be plainly something else
    (a number, a string). `columns`: the columns the expression will see, when
    known; a bare `user` (or `current_date`, ...) that is none of them is Spark's
    function of that name and is refused.
    """
    tokens = _tokens(text)
    _check_calls(tokens)
    root = _parse(text, tokens)
    known = None if columns is None else {c.lower() for c in columns}
    for node in root.walk():
        _check_node(node, known)
    if boolean:
        what = _not_boolean(root)
        if what:
            raise _refused(
                f"a filter needs a true/false expression, not {what}",
                "compare something, e.g. `amount > 0` or `status = 'open'`",
            )


def referenced_columns(text: str) -> list[str]:
    """The top-level columns an (allowed) expression reads, in order: `a` of `a.b` and `a[0]`.

    Spark would let a filter read a column an earlier step renamed or dropped (it looks
    below the projection); hakiri checks each name against the batch's columns instead.
    """
    root = _parse(text, _tokens(text))
    names: dict[str, None] = {}
    for column in root.find_all(exp.Column):
        if not isinstance(column.this, exp.Star) or column.parts[:-1]:
            names[column.parts[0].name] = None
    return list(names)


def function_refusal(name: str) -> UnsafeExpression | None:
    """The refusal for calling built-in function `name` (any case), or None if it is allowed."""
    lowered = name.lower()
    if lowered in _REFUSED:
        why, hint = _REFUSED[lowered]
        return _refused(f"{lowered}() {why}", hint)
    if lowered in ALLOWED_FUNCTIONS:
        return None
    if lowered.endswith("_agg"):
        return _refused(f"{lowered}() is an aggregate", _ROW_WISE_HINT)
    return _refused(
        f"{name}() is not a built-in function the sandbox allows",
        "user-defined functions are not allowed; " + _DEFAULT_HINT,
    )


# --------------------------------------------------------------------- order_by items


@dataclass(frozen=True)
class SortKey:
    """One `dedupe.order_by` item: `expression [ASC|DESC] [NULLS FIRST|LAST]`."""

    expression: str
    descending: bool = False
    nulls_first: bool | None = None  # None: Spark's default (first ascending, last descending)


def parse_sort_key(text: str) -> SortKey:
    """Split the ordering words off an order_by item and check its expression."""
    tokens = _tokens(text)
    words = [t.text.upper() if t.token_type is not TokenType.IDENTIFIER else "" for t in tokens]
    end, descending, nulls_first = len(tokens), False, None
    if end >= 2 and words[end - 2] == "NULLS" and words[end - 1] in ("FIRST", "LAST"):
        nulls_first, end = words[end - 1] == "FIRST", end - 2
    if end >= 1 and words[end - 1] in ("ASC", "DESC"):
        descending, end = words[end - 1] == "DESC", end - 1
    if end == 0:
        raise _refused("an order_by item needs an expression to sort by", "e.g. 'updated_at desc'")
    expression = text[: tokens[end - 1].end + 1].strip(_SQL_WHITESPACE)
    check_expression(expression)
    return SortKey(expression, descending, nulls_first)


# --------------------------------------------------------------------- reading


def _refused(why: str, hint: str = _DEFAULT_HINT) -> UnsafeExpression:
    return UnsafeExpression(f"transform expression refused: {why}", hint)


def _tokens(text: str) -> list[Token]:
    if not text.strip(_SQL_WHITESPACE):
        raise _refused("the expression is empty", "write a Spark SQL expression")
    if "${" in text:
        # Spark replaces ${...} with a variable, a setting or an environment value
        # before it parses the text, inside string literals too.
        raise _refused(
            "`${` is not allowed: Spark would substitute a variable, a setting or an "
            "environment value there",
            "write a `$` that must be followed by `{` as '\\$' inside a string literal",
        )
    try:
        tokens = Spark().tokenize(text)
    except TokenError as exc:
        raise UnsafeExpression(
            f"transform expression does not parse: {_first_line(str(exc))}",
            "check the quotes and parentheses",
        ) from None
    end = 0
    for token in tokens:
        _check_between(text[end : token.start])
        if token.comments:
            raise _comment()
        if token.token_type is TokenType.SEMICOLON:
            raise _refused("`;`: a transform expression is one expression, not statements")
        end = token.end + 1
    _check_between(text[end:])
    if tokens and tokens[0].token_type in _STATEMENT_TOKENS:
        raise _refused(
            f"{tokens[0].text.upper()} starts a statement, not an expression",
            "write one expression, e.g. `upper(name)` or `amount > 0`",
        )
    return tokens


def _check_between(gap: str) -> None:
    # sqlglot skips whitespace and comments between tokens. Comments are refused
    # (Spark nests /* */ comments; sqlglot does not), and so is any other space
    # character, so that both read the same tokens.
    rest = gap.strip(_SQL_WHITESPACE)
    if rest.startswith(("--", "/*")):
        raise _comment()
    if rest:
        raise _refused(
            f"unexpected character {rest[0]!r} between the words of the expression",
            "use plain spaces; write other characters inside a string literal",
        )


def _comment() -> UnsafeExpression:
    return _refused("SQL comments are not allowed in a transform expression", "remove the comment")


def _name_of(token: Token) -> str | None:
    """A token's text as a name, if it can name a function: a word, or backquoted."""
    if token.token_type is TokenType.IDENTIFIER:
        return token.text
    text = token.text
    if (
        text
        and (text[0].isalpha() or text[0] == "_")
        and all(c.isalnum() or c == "_" for c in text)
    ):
        return text
    return None


def _check_calls(tokens: Sequence[Token]) -> None:
    """Every `name(` is an allowed built-in function, whatever sqlglot makes of it."""
    if any(t.token_type is TokenType.SELECT for t in tokens):
        raise _refused("a subquery (SELECT ...) reads other tables")
    for i, token in enumerate(tokens[:-1]):
        if tokens[i + 1].token_type is not TokenType.L_PAREN:
            continue
        name = _name_of(token)
        if name is None:
            continue
        lowered = name.lower()
        if i > 0 and tokens[i - 1].token_type is TokenType.DOT:
            raise _refused(
                f"{_qualified(tokens, i)}() is a qualified function name; only Spark's "
                "built-in functions may be called, by their plain names",
                "user-defined functions are not allowed; " + _DEFAULT_HINT,
            )
        keyword = token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER)
        if keyword and lowered == "over":
            raise _refused("a window (OVER ...) reads other rows", _ROW_WISE_HINT)
        if keyword and lowered == "select":
            raise _refused("a subquery (SELECT ...) reads other tables")
        if keyword and lowered in _SYNTAX_WORDS:
            continue
        previous = _name_of(tokens[i - 1]) if i > 0 else None
        if keyword and lowered in _QUANTIFIERS and (previous or "").lower() in _LIKES:
            continue
        refusal = function_refusal(name)
        if refusal is not None:
            raise refusal
        if (
            lowered in _CLOCK_WITHOUT_ARGUMENTS
            and tokens[i + 2 : i + 3]
            and (tokens[i + 2].token_type is TokenType.R_PAREN)
        ):
            raise _refused(
                f"{lowered}() without an argument is not deterministic: it is the time the "
                "batch runs",
                _CLOCK_HINT,
            )


def _qualified(tokens: Sequence[Token], i: int) -> str:
    parts = [tokens[i].text]
    while i >= 2 and tokens[i - 1].token_type is TokenType.DOT:
        i -= 2
        parts.insert(0, tokens[i].text)
    return ".".join(parts)


def _parse(text: str, tokens: list[Token]) -> exp.Expr:
    try:
        trees = Spark().parser(error_level=ErrorLevel.RAISE).parse(tokens, text)
    except ParseError as exc:
        raise UnsafeExpression(
            f"transform expression does not parse: {_parse_message(exc)}",
            "check the expression's syntax (it is Spark SQL)",
        ) from None
    if len(trees) != 1 or trees[0] is None:
        raise _refused("a transform expression is exactly one expression")
    root = trees[0]
    if isinstance(root, exp.Alias):
        raise _refused(
            "an alias (AS ...) is not part of an expression",
            "name a new column by its key in with_columns",
        )
    if not isinstance(root, exp.Condition) or isinstance(root, exp.Query):
        if isinstance(root, exp.Query | exp.Subquery):
            raise _refused("a subquery (SELECT ...) reads other tables")
        raise _refused(
            f"{root.key.upper()} is not an expression",
            "write one expression, e.g. `upper(name)` or `amount > 0`",
        )
    return root


def _parse_message(exc: ParseError) -> str:
    if exc.errors:
        error = exc.errors[0]
        where = (
            f" (line {error.get('line')}, column {error.get('col')})" if error.get("line") else ""
        )
        return f"{_first_line(str(error.get('description') or ''))}{where}"
    return _first_line(str(exc))


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "unreadable text")


# --------------------------------------------------------------------- the syntax tree


def _check_node(node: exp.Expr, columns: set[str] | None) -> None:
    if isinstance(node, exp.Query | exp.Subquery | exp.Table | exp.From):
        raise _refused("a subquery (SELECT ...) reads other tables")
    if isinstance(node, exp.Window):
        raise _refused("a window (OVER ...) reads other rows", _ROW_WISE_HINT)
    if isinstance(node, exp.Placeholder | exp.Parameter | exp.SessionParameter):
        raise _refused(
            f"a parameter ({node.sql('spark')}) is not allowed", "write the value itself"
        )
    if isinstance(node, _CLOCK_NODES):
        raise _refusal_of(_function_name(node, "current_timestamp"))
    if isinstance(node, _SESSION_NODES):
        raise _refusal_of(_function_name(node, "current_user"))
    if isinstance(node, _RANDOM_NODES):
        raise _refusal_of(_function_name(node, "rand"))
    if isinstance(node, exp.AggFunc):
        name = _function_name(node, "an aggregate")
        raise _refused(f"{name}() is an aggregate", _ROW_WISE_HINT)
    if isinstance(node, exp.Anonymous):
        refusal = function_refusal(node.name)
        if refusal is not None:
            raise refusal
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        raise _refused(
            f"{node.sql('spark')} calls a qualified function; only Spark's built-in functions "
            "may be called, by their plain names"
        )
    if isinstance(node, exp.JSONExtract):  # sqlglot's reading of a stray `->`
        raise _refused(
            "`->` outside a function's lambda argument",
            "a lambda goes inside a call, e.g. transform(items, x -> x.price)",
        )
    if isinstance(node, exp.Column) and not node.table:
        name = node.name.lower()
        unquoted = not node.this.args.get("quoted")
        if name in LITERAL_FUNCTIONS and (
            (columns is None and unquoted and name != "user")
            or (columns is not None and name not in columns)
        ):
            raise _refusal_of(name)


def _refusal_of(name: str) -> UnsafeExpression:
    return function_refusal(name) or _refused(f"{name} is not allowed")


def _function_name(node: exp.Expr, default: str) -> str:
    try:
        return node.sql_name().lower() if isinstance(node, exp.Func) else default
    except Exception:
        return default


_ARITHMETIC = (
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.IntDiv,
    exp.Neg,
    exp.DPipe,
    exp.BitwiseAnd,
    exp.BitwiseOr,
    exp.BitwiseXor,
    exp.BitwiseNot,
)


_NOT_BOOLEAN_CALLS = (
    exp.Upper,
    exp.Lower,
    exp.Concat,
    exp.ConcatWs,
    exp.Substring,
    exp.Length,
    exp.Trim,
    exp.Initcap,
    exp.Abs,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.MD5,
    exp.SHA2,
)


def _not_boolean(root: exp.Expr) -> str | None:
    """What `root` plainly is when it cannot be true or false; None when it may be."""
    node = root.unnest() if isinstance(root, exp.Paren) else root
    if isinstance(node, exp.Literal):
        return "a string" if node.is_string else "a number"
    if isinstance(node, _ARITHMETIC):
        return f"arithmetic ({node.sql('spark')})"
    if isinstance(node, exp.Cast) and not node.to.is_type(exp.DataType.Type.BOOLEAN):
        return f"a cast to {node.to.sql('spark').lower()}"
    if isinstance(node, _NOT_BOOLEAN_CALLS):
        return f"a call of {_function_name(node, 'a function')}()"
    return None


def filter_for(text: str, *, dialect: str, alias: str | None = None) -> str:
    """An allowed filter (Spark SQL, as manifests write them) in `dialect` ('postgres' or
    'spark'), every column qualified by `alias` when given (so a MERGE or a correlated query
    cannot read another table's column of the same name). Every identifier is quoted: hakiri
    creates columns with their names' exact case, and a name may be a keyword."""
    check_expression(text, boolean=True)
    import sqlglot

    tree = sqlglot.parse_one(text, read="spark")
    if alias is not None:
        for column in tree.find_all(exp.Column):
            if not column.table:
                column.set("table", exp.to_identifier(alias))
    return tree.sql(dialect=dialect, identify=True)
