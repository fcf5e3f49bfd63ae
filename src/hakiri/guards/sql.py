"""The admin-SQL guard: the only statements a `sql` hook may run.

A hook statement is read with sqlglot's PostgreSQL tokenizer, never matched
with regular expressions. It must be exactly one statement with no comment,
and one of:

    ANALYZE / ANALYSE        statistics; options, tables and columns only
    VACUUM                   options, tables and columns only (needs autocommit)
    REFRESH MATERIALIZED VIEW [CONCURRENTLY] name [WITH DATA]
    CLUSTER                  options, table [USING index] (without a table: needs autocommit)
    SET [SESSION | LOCAL]    of an ordinary planner/resource setting (see `ORDINARY_SETTINGS`)
    EXPLAIN                  without ANALYZE, of a SELECT
    SELECT                   read-only: no data-modifying WITH, no INTO, no FOR UPDATE/SHARE,
                             and every function known to be free of side effects

Everything else is refused, REINDEX included (it takes an ACCESS EXCLUSIVE lock
and its CONCURRENTLY form cannot run in a transaction; schedule it outside
hakiri). The guard is strict on purpose: what it cannot read with certainty, it
refuses. It is a guard against mistakes and obvious misuse; the destination
role's privileges remain the real boundary (a view or a user-defined operator
can still reach a function the guard never sees).

The admin verbs (VACUUM, REFRESH, CLUSTER, EXPLAIN) are ones sqlglot only half
understands (it falls back to an opaque `Command`), so they are checked token by
token here; only SELECT is checked on sqlglot's syntax tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from hakiri.errors import UnsafeHook

__all__ = ["ORDINARY_SETTINGS", "AdminStatement", "check_admin_sql"]

ALLOWED = (
    "allowed: one ANALYZE, VACUUM, REFRESH MATERIALIZED VIEW, CLUSTER, SET/SET LOCAL of an "
    "ordinary setting, EXPLAIN (without ANALYZE) of a SELECT, or a read-only SELECT; "
    "no comments, no second statement"
)


@dataclass(frozen=True)
class AdminStatement:
    """A hook statement the guard accepted, ready to execute as it was written."""

    kind: str  # 'ANALYZE' | 'VACUUM' | 'REFRESH MATERIALIZED VIEW' | 'CLUSTER' | 'SET' | 'EXPLAIN' | 'SELECT'
    sql: str  # the original text, stripped, without a trailing ';'
    needs_autocommit: bool  # PostgreSQL refuses it inside a transaction block


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Settings a hook may change for its session or transaction: resource limits,
# timeouts, planner knobs, formatting. Anything that changes who the session is
# (role, session_authorization) or switches off triggers and foreign keys
# (session_replication_role) is refused with its own reason.
ORDINARY_SETTINGS = _words(
    """
    application_name client_min_messages constraint_exclusion cpu_index_tuple_cost
    cpu_operator_cost cpu_tuple_cost datestyle default_statistics_target effective_cache_size
    effective_io_concurrency extra_float_digits from_collapse_limit hash_mem_multiplier
    idle_in_transaction_session_timeout intervalstyle jit join_collapse_limit lock_timeout
    maintenance_io_concurrency maintenance_work_mem max_parallel_maintenance_workers
    max_parallel_workers_per_gather parallel_setup_cost parallel_tuple_cost random_page_cost
    search_path seq_page_cost statement_timeout synchronous_commit temp_buffers timezone
    vacuum_cost_delay vacuum_cost_limit work_mem
    """
)
_PLANNER_TOGGLE_PREFIX = "enable_"  # enable_seqscan, enable_hashjoin, ...
_PRIVILEGE_SETTINGS = {
    "role": "SET ROLE changes the privileges of the session",
    "session_authorization": "SET SESSION AUTHORIZATION changes the privileges of the session",
    "session_replication_role": "setting session_replication_role switches off triggers and "
    "foreign keys",
}

# Functions sqlglot does not know by name (it parses them as `Anonymous`) that a
# hook SELECT may still call: size and catalog lookups with no side effects.
# Functions sqlglot does know (count, max, coalesce, upper, now, ...) are allowed.
READ_ONLY_FUNCTIONS = _words(
    """
    age current_setting has_table_privilege obj_description pg_column_size pg_database_size
    pg_indexes_size pg_is_in_recovery pg_postmaster_start_time pg_relation_size pg_size_pretty
    pg_table_size pg_total_relation_size pg_typeof to_regclass to_regtype version
    """
)

# Named so that the refusal can say *why*: every one of them would be refused
# anyway as a function the guard does not know. Matched lower-cased and without
# its schema, so pg_catalog.pg_terminate_backend is caught too.
_SIDE_EFFECT_FUNCTIONS = _words(
    """
    cursor_to_xml nextval pg_cancel_backend pg_log_backend_memory_contexts pg_notify pg_promote
    pg_reload_conf pg_rotate_logfile pg_sleep pg_sleep_for pg_sleep_until pg_stat_file
    pg_switch_wal pg_terminate_backend query_to_xml query_to_xml_and_xmlschema
    query_to_xmlschema set_config setval table_to_xml
    """
)
_SIDE_EFFECT_PREFIXES = tuple(
    _words(
        """
        copy dblink lo_ pg_advisory pg_backup_ pg_copy pg_create_ pg_drop_ pg_file_ pg_import_
        pg_logical_ pg_ls_ pg_read_ pg_replication_ pg_start_backup pg_stat_reset pg_stop_backup
        pg_try_advisory pg_write txid_
        """
    )
)

# Keywords that never belong in a read-only SELECT, whatever sqlglot made of them.
_WRITE_KEYWORDS = {
    TokenType.INSERT: "INSERT",
    TokenType.UPDATE: "UPDATE",
    TokenType.DELETE: "DELETE",
    TokenType.MERGE: "MERGE",
    TokenType.INTO: "INTO",
    TokenType.CREATE: "CREATE",
    TokenType.DROP: "DROP",
    TokenType.ALTER: "ALTER",
    TokenType.TRUNCATE: "TRUNCATE",
    TokenType.COPY: "COPY",
    TokenType.GRANT: "GRANT",
    TokenType.REVOKE: "REVOKE",
    TokenType.COMMAND: "a command",
    TokenType.LOCK: "LOCK",
}
_DML: dict[type[exp.Expr], str] = {
    exp.Insert: "INSERT",
    exp.Update: "UPDATE",
    exp.Delete: "DELETE",
    exp.Merge: "MERGE",
}

_QUOTED_TYPES = frozenset(
    getattr(TokenType, name)
    for name in _words(
        "STRING NATIONAL_STRING BYTE_STRING BIT_STRING HEX_STRING UNICODE_STRING RAW_STRING "
        "HEREDOC_STRING IDENTIFIER"
    )
)
# PostgreSQL's own idea of whitespace; anything else between tokens is refused.
_PG_WHITESPACE = " \t\n\r\f\v"
_MULTIWORD_VERBS = {"COMMENT", "SECURITY", "SET", "RESET", "CREATE", "DROP", "ALTER", "REFRESH"}


class _Tokenizer(Postgres.Tokenizer):
    # sqlglot swallows the rest of a "command" (VACUUM, EXPLAIN, REFRESH, SHOW, ...)
    # into one opaque string, hiding comments and statements inside it. Without
    # commands every word is a token of its own.
    COMMANDS: ClassVar[set[TokenType]] = set()


def check_admin_sql(statement: str) -> AdminStatement:
    """The statement, if it is one admin statement the guard allows; else UnsafeHook."""
    text = statement.strip(_PG_WHITESPACE)
    every_token = _tokenize(text)
    tokens, end = every_token, len(text)
    if tokens and tokens[-1].token_type is TokenType.SEMICOLON:  # one trailing ';' is fine
        tokens, end = tokens[:-1], tokens[-1].start
    if tokens:  # name a refused verb first: that is what the author needs to hear
        verb = _verb(tokens)
        if (verb.split()[0] if verb else "") not in _VERBS:
            raise _refuse(f"{verb} is not an admin statement" if verb else "it starts with no verb")
    _check_lexically(text, every_token)
    if not tokens:
        raise _refuse("the statement is empty")
    if any(t.token_type is TokenType.SEMICOLON for t in tokens):
        raise _refuse("several statements (one hook runs one statement)")
    text = text[:end].rstrip(_PG_WHITESPACE)
    kind, needs_autocommit = _VERBS[_word(tokens[0])](text, tokens)
    return AdminStatement(kind=kind, sql=text, needs_autocommit=needs_autocommit)


# --------------------------------------------------------------------- reading


def _refuse(why: str) -> UnsafeHook:
    return UnsafeHook(f"hook SQL refused: {why}", ALLOWED)


def _tokenize(text: str) -> list[Token]:
    try:
        return _Tokenizer(dialect=Postgres()).tokenize(text)
    except TokenError as exc:
        raise _refuse(f"it cannot be read as SQL ({str(exc).splitlines()[0]})") from exc


def _check_lexically(text: str, tokens: Sequence[Token]) -> None:
    """The tokens cover every non-blank character, with no comment and nothing ambiguous."""
    end = 0
    for token in tokens:
        _check_between(text[end : token.start])
        _check_token(token, text[token.start : token.end + 1])
        end = token.end + 1
    _check_between(text[end:])


def _check_between(gap: str) -> None:
    # Between tokens sqlglot skips whitespace and comments. A comment is refused
    # anywhere: it can hide the rest of a line from whoever reviews the hook.
    rest = gap.strip(_PG_WHITESPACE)
    if rest.startswith(("--", "/*")):
        raise _refuse("SQL comments are not allowed in a hook")
    if rest:
        raise _refuse("it contains text the SQL reader skipped")


def _check_token(token: Token, raw: str) -> None:
    if token.comments:
        raise _refuse("SQL comments are not allowed in a hook")
    # Whether a backslash escapes depends on standard_conforming_strings and on
    # the string syntax; the guard and the server must agree on every boundary.
    if "\\" in raw:
        raise _refuse("backslashes are not allowed in a hook")
    if token.token_type is TokenType.HEREDOC_STRING:
        raise _refuse("dollar-quoted strings are not allowed in a hook")
    if "$" in raw and token.token_type not in _QUOTED_TYPES:
        raise _refuse("`$` outside a quoted string is not allowed in a hook")


def _is_word(token: Token) -> bool:
    """An unquoted keyword or name: ASCII letters, digits and '_', not starting with a digit."""
    if token.token_type in _QUOTED_TYPES or not token.text:
        return False
    first, rest = token.text[0], token.text[1:]
    return (
        token.text.isascii()
        and (first.isalpha() or first == "_")
        and all(c.isalnum() or c == "_" for c in rest)
    )


def _word(token: Token) -> str:
    return token.text.upper() if _is_word(token) else ""


def _is_name(token: Token) -> bool:
    return _is_word(token) or token.token_type is TokenType.IDENTIFIER


def _verb(tokens: Sequence[Token]) -> str:
    first = _word(tokens[0])
    if first in _MULTIWORD_VERBS and len(tokens) > 1 and _word(tokens[1]):
        return f"{first} {_word(tokens[1])}"
    return first


def _qualified_name_end(tokens: Sequence[Token]) -> int:
    """Length of a leading name[.name[.name]]; 0 when there is none."""
    end = 0
    while end < len(tokens) and _is_name(tokens[end]) and end < 5:
        end += 1
        if end < len(tokens) and tokens[end].token_type is TokenType.DOT:
            end += 1
        else:
            return end
    return 0


_OPTION_VALUES = frozenset({"TRUE", "FALSE", "ON", "OFF", "AUTO"})


def _options(verb: str, tokens: Sequence[Token], legacy: frozenset[str]) -> list[Token]:
    """Skip `( option [value], ... )`, or else the older bare keywords; return what follows."""
    rest = list(tokens)
    if not rest or rest[0].token_type is not TokenType.L_PAREN:
        while rest and _word(rest[0]) in legacy:
            rest = rest[1:]
        return rest
    close = next((i for i, t in enumerate(rest) if t.token_type is TokenType.R_PAREN), 0)
    if close == 0:
        raise _refuse(f"unbalanced parentheses after {verb}")
    option: list[Token] = []
    for token in [*rest[1:close], None]:
        if token is not None and token.token_type is not TokenType.COMMA:
            option.append(token)
            continue
        value_ok = len(option) == 1 or (
            len(option) == 2
            and (_word(option[1]) in _OPTION_VALUES or option[1].token_type is TokenType.NUMBER)
        )
        if not (option and _word(option[0]) and value_ok):
            shown = " ".join(t.text for t in option) or "nothing"
            raise _refuse(f"{verb} option {shown!r} is not an option name and value")
        option = []
    return rest[close + 1 :]


def _tables_and_columns(verb: str, tokens: Sequence[Token]) -> None:
    """`table [(column, ...)] [, ...]`, and nothing else."""
    i = 0
    while i < len(tokens):
        end = _qualified_name_end(tokens[i:])
        if end == 0:
            raise _refuse(f"{verb} may name only options, tables and columns ({tokens[i].text!r})")
        i += end
        if i < len(tokens) and tokens[i].token_type is TokenType.L_PAREN:
            i = _after_column_list(verb, tokens, i)
        if i < len(tokens):
            if tokens[i].token_type is not TokenType.COMMA or i + 1 == len(tokens):
                raise _refuse(
                    f"{verb} may name only options, tables and columns ({tokens[i].text!r})"
                )
            i += 1


def _after_column_list(verb: str, tokens: Sequence[Token], open_at: int) -> int:
    i = open_at + 1
    while i + 1 < len(tokens) and _is_name(tokens[i]):
        if tokens[i + 1].token_type is TokenType.R_PAREN:
            return i + 2
        if tokens[i + 1].token_type is not TokenType.COMMA:
            break
        i += 2
    raise _refuse(f"{verb} may list only column names in parentheses")


# --------------------------------------------------------------------- the admin verbs


def _analyze(text: str, tokens: Sequence[Token]) -> tuple[str, bool]:
    _tables_and_columns("ANALYZE", _options("ANALYZE", tokens[1:], frozenset({"VERBOSE"})))
    return "ANALYZE", False


def _vacuum(text: str, tokens: Sequence[Token]) -> tuple[str, bool]:
    legacy = frozenset({"FULL", "FREEZE", "VERBOSE", "ANALYZE", "ANALYSE"})
    _tables_and_columns("VACUUM", _options("VACUUM", tokens[1:], legacy))
    return "VACUUM", True


def _cluster(text: str, tokens: Sequence[Token]) -> tuple[str, bool]:
    target = _options("CLUSTER", tokens[1:], frozenset({"VERBOSE"}))
    end = _qualified_name_end(target)
    using_index = (
        len(target) == end + 2 and _word(target[end]) == "USING" and _is_name(target[end + 1])
    )
    if target and not (end and (end == len(target) or using_index)):
        raise _refuse("CLUSTER may name only a table and USING an index")
    # Without a table CLUSTER re-clusters every table it clustered before, and
    # PostgreSQL refuses that form inside a transaction block.
    return "CLUSTER", not target


def _refresh(text: str, tokens: Sequence[Token]) -> tuple[str, bool]:
    if [_word(t) for t in tokens[:3]] != ["REFRESH", "MATERIALIZED", "VIEW"]:
        raise _refuse(f"{_verb(tokens)} is not an admin statement")
    rest = list(tokens[3:])
    if len(rest) > 1 and _word(rest[0]) == "CONCURRENTLY":
        rest = rest[1:]
    end = _qualified_name_end(rest)
    if end == 0:
        raise _refuse("REFRESH MATERIALIZED VIEW needs the view's name")
    tail = [_word(t) for t in rest[end:]]
    if tail == ["WITH", "NO", "DATA"]:
        raise _refuse("REFRESH ... WITH NO DATA empties the view; refresh it WITH DATA")
    if tail not in ([], ["WITH", "DATA"]):
        shown = text[rest[end].start :]
        raise _refuse(f"unexpected {shown!r} after the view's name")
    return "REFRESH MATERIALIZED VIEW", False


def _set(text: str, tokens: Sequence[Token]) -> tuple[str, bool]:
    rest = list(tokens[1:])
    if rest and _word(rest[0]) in ("SESSION", "LOCAL"):
        if _word(rest[0]) == "SESSION" and len(rest) > 1 and _word(rest[1]) == "AUTHORIZATION":
            raise _refuse(_PRIVILEGE_SETTINGS["session_authorization"])
        rest = rest[1:]
    if len(rest) >= 2 and (_word(rest[0]), _word(rest[1])) == ("TIME", "ZONE"):
        name, values = "timezone", rest[2:]
    else:
        end = _qualified_name_end(rest)
        if end == 0:
            raise _refuse("SET needs a setting name")
        name = "".join(t.text for t in rest[:end]).lower()
        if name in _PRIVILEGE_SETTINGS:
            raise _refuse(_PRIVILEGE_SETTINGS[name])
        if name not in ORDINARY_SETTINGS and not name.startswith(_PLANNER_TOGGLE_PREFIX):
            raise _refuse(f"SET of {name} is not an ordinary setting hakiri allows")
        if end >= len(rest) or not (
            rest[end].token_type is TokenType.EQ or _word(rest[end]) == "TO"
        ):
            raise _refuse(f"SET {name} must be followed by TO or =")
        values = rest[end + 1 :]
    if not values:
        raise _refuse(f"SET {name} needs a value")
    literal = (TokenType.STRING, TokenType.NUMBER, TokenType.COMMA, TokenType.DASH)
    for token in values:
        if not (_is_name(token) or token.token_type in literal):
            raise _refuse(f"SET {name} may be given only literal values ({token.text!r})")
    return "SET", False


def _reset(text: str, tokens: Sequence[Token]) -> tuple[str, bool]:
    what = _word(tokens[1]) if len(tokens) > 1 else ""
    if what in ("ROLE", "SESSION"):
        raise _refuse(f"RESET {what} changes the privileges of the session")
    raise _refuse("RESET is not an admin statement")


def _explain(text: str, tokens: Sequence[Token]) -> tuple[str, bool]:
    rest = list(tokens[1:])
    if rest and rest[0].token_type is TokenType.L_PAREN:
        close = next(
            (i for i, t in enumerate(rest) if t.token_type is TokenType.R_PAREN), len(rest)
        )
        _check_explain_options(rest[1:close])
        rest = rest[close + 1 :]
    else:
        while rest and _word(rest[0]) in ("ANALYZE", "ANALYSE", "VERBOSE"):
            if _word(rest[0]) != "VERBOSE":
                raise _refuse("EXPLAIN ANALYZE executes the statement it explains")
            rest = rest[1:]
    if not rest:
        raise _refuse("EXPLAIN needs a SELECT to explain")
    if _word(rest[0]) not in ("SELECT", "WITH"):
        explained = _verb(rest) or rest[0].text
        raise _refuse(f"EXPLAIN of {explained} is refused: only a SELECT may be explained")
    _check_select(text, rest)
    return "EXPLAIN", False


_EXPLAIN_OPTIONS = frozenset(
    {"VERBOSE", "COSTS", "SETTINGS", "BUFFERS", "SUMMARY", "FORMAT", "GENERIC_PLAN", "MEMORY"}
)
_EXPLAIN_VALUES = frozenset({"TRUE", "FALSE", "ON", "OFF", "TEXT", "XML", "JSON", "YAML"})


def _check_explain_options(tokens: Sequence[Token]) -> None:
    expect_name = True
    for token in tokens:
        word = _word(token)
        if token.token_type is TokenType.COMMA:
            expect_name = True
        elif expect_name and word in ("ANALYZE", "ANALYSE"):
            raise _refuse("EXPLAIN ANALYZE executes the statement it explains")
        elif expect_name and word in _EXPLAIN_OPTIONS:
            expect_name = False
        elif not (expect_name or word in _EXPLAIN_VALUES or token.text in ("0", "1")):
            raise _refuse(f"EXPLAIN option value {token.text!r} is not allowed")
        elif expect_name:
            raise _refuse(f"EXPLAIN option {token.text!r} is not allowed")


# --------------------------------------------------------------------- SELECT


def _select(text: str, tokens: Sequence[Token]) -> tuple[str, bool]:
    _check_select(text, tokens)
    return "SELECT", False


def _check_select(text: str, tokens: Sequence[Token]) -> None:
    """A read-only SELECT, judged on sqlglot's tree of exactly these tokens."""
    _check_function_names(tokens)
    try:
        trees = Postgres().parser(error_level=ErrorLevel.RAISE).parse(list(tokens), text)
    except ParseError as exc:
        raise _refuse("it cannot be parsed as a SELECT") from exc
    if len(trees) != 1 or trees[0] is None:
        raise _refuse("several statements (one hook runs one statement)")
    tree = trees[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise _refuse(f"{_dml_verb(tree) or type(tree).__name__.upper()} is not an admin statement")
    for node in tree.walk():
        _check_select_node(node)
    for token in tokens:  # a backstop, whatever sqlglot made of these words
        if token.token_type in _WRITE_KEYWORDS:
            raise _refuse(f"{_WRITE_KEYWORDS[token.token_type]} has no place in a read-only SELECT")


def _check_select_node(node: exp.Expr) -> None:
    if isinstance(node, exp.CTE | exp.Subquery) and not isinstance(
        node.this, exp.Select | exp.SetOperation
    ):
        inner = _dml_verb(node.this)
        raise _refuse(
            f"a data-modifying WITH ({inner}) is not read-only"
            if inner
            else "a WITH or a subquery may hold only a SELECT"
        )
    if _dml_verb(node):
        raise _refuse(f"a data-modifying {_dml_verb(node)} is not read-only")
    if isinstance(node, exp.Into):
        raise _refuse("SELECT INTO creates a table")
    if isinstance(node, exp.Lock):
        raise _refuse("SELECT ... FOR UPDATE/SHARE locks rows")
    if isinstance(node, exp.DDL | exp.Command | exp.Copy | exp.TruncateTable):
        raise _refuse(f"{type(node).__name__.upper()} has no place in a read-only SELECT")
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        # sqlglot reads every qualified call as an unknown function; only the
        # system catalog's own read-only functions may be named with a schema.
        schema = node.this.sql("postgres")
        if schema.lower() != "pg_catalog":
            raise _refuse(
                f"SELECT calls {schema}.{node.expression.name}(), a function the guard "
                "cannot tell is free of side effects"
            )
    if isinstance(node, exp.Anonymous) and node.name.lower() not in READ_ONLY_FUNCTIONS:
        raise _refuse(
            f"SELECT calls {node.name}(), a function the guard cannot tell is free of side effects"
        )


def _dml_verb(node: object) -> str | None:
    return next((verb for kind, verb in _DML.items() if isinstance(node, kind)), None)


def _check_function_names(tokens: Sequence[Token]) -> None:
    """Refuse a call of a known side-effecting function, however sqlglot parses it."""
    for token, following in pairwise(tokens):
        if following.token_type is not TokenType.L_PAREN or not _is_name(token):
            continue
        name = token.text.lower()
        if name in _SIDE_EFFECT_FUNCTIONS or name.startswith(_SIDE_EFFECT_PREFIXES):
            raise _refuse(f"SELECT calls {name}(), which has side effects")


_VERBS = {
    "ANALYZE": _analyze,
    "ANALYSE": _analyze,
    "VACUUM": _vacuum,
    "CLUSTER": _cluster,
    "REFRESH": _refresh,
    "SET": _set,
    "RESET": _reset,
    "EXPLAIN": _explain,
    "SELECT": _select,
    "WITH": _select,
}
