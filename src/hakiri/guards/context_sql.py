"""The query guard: the only SQL a view or `hakiri query` may run over the context store.

A view's SQL (and a query's) is Spark SQL, read with sqlglot's Spark tokenizer and parser,
never with regular expressions. It must be exactly one read-only query:

    SELECT / WITH / UNION / INTERSECT / EXCEPT, joins, subqueries, GROUP BY, windows,
    LATERAL VIEW explode(...), over tables named bare (`orders`, not `db.orders`)

Everything else is refused, with the line and column of what was refused:

- a second statement, any statement that is not a query (INSERT, CREATE, SET, CACHE, …),
  `SELECT … INTO`, parameters, and `${` anywhere (Spark substitutes variables, environment
  values and settings into SQL text before it parses it);
- a table that is not a plain name: a path or a qualified name (``parquet.`/tmp/x` ``,
  `db.orders`), a table function (`read_csv('x.csv')`, `read_files(…)`, `range(…)`);
- a function that reaches outside the tables (`reflect`, `java_method`, `input_file_name`,
  `read_files`, `xpath…`, `current_user`, `raise_error`, …) or that is not a Spark built-in
  (user-defined functions included). Aggregates, window functions, generators and the
  clock (`current_date`) are allowed here, unlike in a transform.

Which names a query may read (the context store's tables, the project's views) is the
caller's to check against `ContextQuery.reads`; a view's reads decide the order views are
defined in, and a cycle is refused by the loader.

Time travel, for `hakiri query` only: `orders@v3` (or Spark's `orders VERSION AS OF 3`)
reads version 3 of the table; `ContextQuery.versions` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from hakiri.errors import UnsafeQuery
from hakiri.guards.expressions import ALLOWED_FUNCTIONS, function_refusal

__all__ = ["QUERY_FUNCTIONS", "ContextQuery", "check_context_sql"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# What a query may call beyond a transform's functions: it reads whole tables.
QUERY_FUNCTIONS = ALLOWED_FUNCTIONS | _words(
    """
    sum count count_if avg mean min max min_by max_by first first_value last last_value
    any_value every bool_and bool_or collect_list collect_set array_agg listagg string_agg
    approx_count_distinct approx_percentile percentile percentile_approx percentile_cont
    percentile_disc median mode std stddev stddev_pop stddev_samp variance var_pop var_samp
    corr covar_pop covar_samp kurtosis skewness bit_and bit_or bit_xor grouping grouping_id
    try_sum try_avg regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx
    regr_sxy regr_syy

    row_number rank dense_rank percent_rank cume_dist ntile lag lead nth_value

    explode explode_outer posexplode posexplode_outer inline inline_outer

    current_date curdate current_timestamp now localtimestamp current_timezone
    """
)
_HINT = (
    "a view or query may read the context store's tables and views, and call Spark's built-in "
    "functions that read nothing else (docs/views.md)"
)
# Keywords that stand before '(' without being a call.
_SYNTAX = _words(
    """
    and or not in is like ilike rlike regexp between when then else case from for div escape
    distinct exists over as using values on join select where by filter within cube rollup
    sets lateral view pivot unpivot tablesample all any some union intersect except with
    """
)
_STATEMENTS = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.Command,
    exp.Set,
    exp.Use,
    exp.Into,
    exp.TruncateTable,
    exp.Cache,
    exp.Uncache,
    exp.Describe,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Copy,
    exp.LoadData,
    exp.Pragma,
)


@dataclass(frozen=True)
class ContextQuery:
    """A query the guard accepted."""

    sql: str  # Spark SQL; time travel written `name VERSION AS OF n`
    reads: tuple[str, ...]  # the tables and views it names, lower case, first mention first
    versions: Mapping[str, int] = field(default_factory=dict)  # time travel: name -> version


def check_context_sql(text: str, *, time_travel: bool = False) -> ContextQuery:
    """The query, if the guard accepts it; else UnsafeQuery with the line and column of the
    first thing refused. `time_travel`: `name@vN` is allowed (queries, not views)."""
    if "${" in text:
        raise _refused(
            "`${` is not allowed: Spark would substitute variables into the SQL",
            text,
            text.index("${"),
        )
    tokens = _tokenize(text)
    text, tokens = _rewrite_time_travel(text, tokens, time_travel)
    _check_calls(text, tokens)
    tree = _parse(text)
    reads, versions = _check_tree(text, tree, time_travel)
    return ContextQuery(text.strip().rstrip(";").strip(), reads, versions)


# -- tokens -------------------------------------------------------------------------------


def _tokenize(text: str) -> list[Token]:
    try:
        return Spark().tokenize(text)
    except TokenError as exc:
        raise UnsafeQuery(f"cannot read the SQL: {exc}", _HINT) from None


def _rewrite_time_travel(text: str, tokens: list[Token], allowed: bool) -> tuple[str, list[Token]]:
    """`orders@v3` -> `orders VERSION AS OF 3`, which sqlglot and Spark both read."""
    spans = []
    for i in range(1, len(tokens) - 1):
        at, version = tokens[i], tokens[i + 1]
        if at.token_type is not TokenType.PARAMETER or at.text != "@":
            continue
        word = version.text.lower()
        if not (word.startswith("v") and word[1:].isdigit()) or at.end + 1 != version.start:
            raise _at(text, at, "`@` is not allowed here (time travel is written `orders@v3`)")
        if not allowed:
            raise _at(
                text,
                at,
                f"time travel ({tokens[i - 1].text}@{version.text}) is for `hakiri query`; a "
                "view reads the tables' current versions",
            )
        spans.append((at.start, version.end + 1, f" VERSION AS OF {int(word[1:])}"))
    for start, end, replacement in reversed(spans):
        text = text[:start] + replacement + text[end:]
    return (text, _tokenize(text)) if spans else (text, tokens)


def _check_calls(text: str, tokens: Sequence[Token]) -> None:
    """Every `name(` is a built-in function a query may call, whatever sqlglot makes of it."""
    for i, token in enumerate(tokens[:-1]):
        if tokens[i + 1].token_type is not TokenType.L_PAREN:
            continue
        name = token.text
        lowered = name.lower()
        word = token.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
        if not word and (lowered in _SYNTAX or lowered not in QUERY_FUNCTIONS | _refusable()):
            continue  # a keyword such as IN ( … ), not a call
        if i > 0 and tokens[i - 1].token_type is TokenType.DOT:
            raise _at(
                text,
                token,
                f"{name}() is a qualified function name; call Spark's built-in functions by their plain names",
            )
        if _is_cte_or_alias_columns(tokens, i):
            continue
        if lowered in QUERY_FUNCTIONS:
            continue
        refusal = function_refusal(lowered)
        why = f"{name}() is not a built-in function"
        if refusal is not None:
            why = refusal.reason.split(": ", 1)[-1]  # without the sandbox's "transform …" prefix
        if lowered.startswith("read_") or lowered in ("range", "read_files"):
            why = f"{name}() reads files or makes rows outside the context store's tables"
        raise _at(text, token, why)


def _refusable() -> frozenset[str]:
    from hakiri.guards import expressions

    return frozenset(expressions._REFUSED)  # the sandbox's own refusal list


def _is_cte_or_alias_columns(tokens: Sequence[Token], i: int) -> bool:
    """`WITH totals (a, b) AS (...)` and `AS t (a, b)`: a name with a column list."""
    if i > 0 and tokens[i - 1].token_type in (TokenType.ALIAS, TokenType.WITH, TokenType.COMMA):
        depth, j = 0, i + 1
        while j < len(tokens):
            kind = tokens[j].token_type
            depth += kind is TokenType.L_PAREN
            depth -= kind is TokenType.R_PAREN
            if depth == 0:
                break
            j += 1
        return tokens[i - 1].token_type is TokenType.ALIAS or (
            j + 1 < len(tokens) and tokens[j + 1].token_type is TokenType.ALIAS
        )
    return False


# -- the tree -----------------------------------------------------------------------------


def _parse(text: str) -> exp.Expr:
    try:
        statements = [
            s
            for s in sqlglot.parse(text, read="spark", error_level=ErrorLevel.RAISE)
            if s is not None
        ]
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        raise UnsafeQuery(
            f"cannot parse the SQL: {first.get('description') or exc}".split("\n")[0],
            _HINT,
            line=first.get("line"),
            column=first.get("col"),
        ) from None
    if len(statements) != 1:
        raise UnsafeQuery(
            f"one query is allowed, found {len(statements)} statements"
            if statements
            else "the SQL is empty",
            _HINT,
        )
    return statements[0]


def _check_tree(
    text: str, tree: exp.Expr, time_travel: bool
) -> tuple[tuple[str, ...], dict[str, int]]:
    if not isinstance(tree, exp.Query):
        raise UnsafeQuery(
            f"only a query (SELECT, WITH, UNION …) is allowed, not {tree.key.upper()}", _HINT
        )
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    reads: dict[str, None] = {}
    versions: dict[str, int] = {}
    for node in tree.walk():
        if isinstance(node, _STATEMENTS):
            raise UnsafeQuery(f"{node.key.upper()} is not allowed in a query", _HINT)
        if isinstance(node, exp.Placeholder | exp.Parameter):
            raise UnsafeQuery("parameters are not allowed in a query", _HINT)
        if isinstance(node, exp.Lock):
            raise UnsafeQuery("FOR UPDATE / FOR SHARE is not allowed in a query", _HINT)
        if isinstance(node, exp.Table):
            name = _table_name(node)
            version = node.args.get("version")
            if version is not None:
                if not time_travel:
                    raise UnsafeQuery(
                        f"time travel ({name} VERSION AS OF …) is for `hakiri query`; a view "
                        "reads the tables' current versions",
                        _HINT,
                    )
                versions[name] = _version_number(name, version)
            if name not in ctes:
                reads[name] = None
    return tuple(reads), versions


def _table_name(node: exp.Table) -> str:
    where = _position(node)
    if not isinstance(node.this, exp.Identifier):
        what = node.this.sql(dialect="spark") if node.this is not None else "?"
        raise UnsafeQuery(
            f"{what} is not a table: a query reads the context store's tables and views, "
            "not files or table functions",
            _HINT,
            **where,
        )
    if node.args.get("db") is not None or node.args.get("catalog") is not None:
        raise UnsafeQuery(
            f"{node.sql(dialect='spark')} is a path or a qualified name: name context-store "
            "tables and views bare (`orders`)",
            _HINT,
            **where,
        )
    return node.this.name.lower()


def _position(node: exp.Expr) -> dict[str, int | None]:
    """Where sqlglot read the node (its first identifier's token), if it says."""
    for part in node.walk():
        meta = getattr(part, "meta", None) or {}
        if "line" in meta:
            return {"line": meta.get("line"), "column": meta.get("col")}
    return {}


def _version_number(name: str, version: exp.Expr) -> int:
    value = version.args.get("expression")
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    raise UnsafeQuery(f"time travel of {name} takes a version number (`{name}@v3`)", _HINT)


# -- errors -------------------------------------------------------------------------------


def _at(text: str, token: Token, why: str) -> UnsafeQuery:
    return _refused(why, text, token.start)


def _refused(why: str, text: str, offset: int) -> UnsafeQuery:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return UnsafeQuery(why, _HINT, line=line, column=column)
