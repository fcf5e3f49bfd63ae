"""The transform sandbox: what a transform expression may evaluate, and an adversarial table of
what it may not. Each refusal must name the function or construct it refused."""

from __future__ import annotations

import pytest

from hakiri.errors import HakiriError
from hakiri.guards.expressions import (
    ALLOWED_FUNCTIONS,
    SortKey,
    UnsafeExpression,
    check_expression,
    function_refusal,
    parse_sort_key,
)

# (expression, a fragment the refusal's reason must contain: the refused thing)
REFUSED = [
    # Java reflection, however it is spelled or hidden
    ("reflect('java.lang.Runtime', 'getRuntime')", "reflect()"),
    ("ReFlEcT('java.lang.Runtime', 'getRuntime')", "reflect()"),
    ("`reflect`('java.lang.Runtime', 'getRuntime')", "reflect()"),
    ("`ReFlEcT` ( 'java.lang.System', 'exit', 1 )", "reflect()"),
    ("upper(reflect('java.lang.Runtime', 'getRuntime'))", "reflect()"),
    (
        "coalesce(null, upper(lower(java_method('java.lang.System', 'getenv', 'HOME'))))",
        "java_method()",
    ),
    ("try_reflect('java.lang.Thread', 'sleep', 1000L)", "try_reflect()"),
    ("transform(tags, t -> reflect('java.lang.System', 'getenv', t))", "reflect()"),
    ("filter(tags, t -> rand() > 0.5)", "rand()"),
    ("upper\n(reflect('a', 'b'))", "reflect()"),
    # unknown functions: user-defined, qualified, built at run time
    ("my_udf(amount)", "my_udf()"),
    ("upper(my_udf(amount))", "my_udf()"),
    ("db.my_udf(amount)", "db.my_udf()"),
    ("system.builtin.reflect('a', 'b')", "system.builtin.reflect()"),
    ("identifier('reflect')('java.lang.Runtime', 'getRuntime')", "identifier()"),
    # reading something other than the row
    ("(SELECT max(id) FROM orders)", "subquery"),
    ("id IN (SELECT id FROM blocked)", "subquery"),
    ("EXISTS (SELECT 1 FROM blocked WHERE blocked.id = id)", "subquery"),
    ("input_file_name()", "input_file_name()"),
    ("input_file_block_start()", "input_file_block_start()"),
    ("read_files('/etc/passwd')", "read_files()"),
    ("xpath_string(doc, '//a')", "xpath_string()"),
    # not deterministic
    ("rand()", "rand()"),
    ("randn(42)", "randn()"),
    ("uuid()", "uuid()"),
    ("shuffle(tags)", "shuffle()"),
    ("monotonically_increasing_id()", "monotonically_increasing_id()"),
    ("current_date", "current_date"),
    ("CURRENT_DATE()", "current_date"),
    ("now()", "now()"),
    ("current_timestamp", "current_timestamp"),
    ("date_add(current_date(), 1)", "current_date"),
    ("from_unixtime(unix_timestamp())", "unix_timestamp() without an argument"),
    ("current_user()", "current_user"),
    ("current_user", "current_user"),
    ("session_user()", "session_user"),
    ("user()", "user()"),
    ("current_database()", "current_database"),
    ("version()", "version()"),
    # aggregates, windows, generators: transforms are row-wise
    ("sum(amount)", "sum()"),
    ("count(*)", "count()"),
    ("max(amount)", "max()"),
    ("collect_list(id)", "collect_list()"),
    ("count(id) FILTER (WHERE amount > 0)", "count()"),
    ("sum(amount) OVER (PARTITION BY customer)", "sum()"),
    ("row_number() OVER (ORDER BY id)", "row_number()"),
    ("lag(amount) OVER (ORDER BY id)", "lag()"),
    ("explode(tags)", "explode()"),
    ("raise_error('boom')", "raise_error()"),
    # the text around the expression
    ("'${env:AWS_SECRET_ACCESS_KEY}'", "${"),
    ("concat('${spark.app.name}', id)", "${"),
    ("upper(name); DROP TABLE orders", ";"),
    ("amount > 0;", ";"),
    ("upper(name) -- trailing comment", "comments"),
    ("upper /* hidden */ (name)", "comments"),
    ("amount /* /* nested */ reflect('a', 'b') */ + 1", "comments"),
    ("upper\u00a0(name)", "'\\xa0'"),
    ("amount > ?", "parameter"),
    ("amount > :limit", "parameter"),
    ("DROP TABLE orders", "DROP starts a statement"),
    ("upper(name) AS shouting", "alias"),
    ("x -> x + 1", "->"),
]

ALLOWED = [
    "amount > 0",
    "status = 'open' AND NOT deleted",
    "x IS NULL OR y IS NOT NULL",
    "id IN (1, 2, 3)",
    "amount BETWEEN 1 AND 10",
    "name LIKE 'a%' OR name RLIKE '^[0-9]+$'",
    "name LIKE ANY ('a%', 'b%')",
    "CASE WHEN amount > 100 THEN 'big' ELSE 'small' END",
    "coalesce(a, b, 0) + nvl(c, 0) + nullif(d, 0)",
    "if(amount > 1, 'x', 'y')",
    "cast(amount AS decimal(12,2))",
    "try_cast(code AS int)",
    "amount::bigint",
    "upper(trim(name))",
    "Upper(name)",
    "`upper`(name)",
    "concat_ws('-', a, b) || '!'",
    "substring(s, 1, 3) = substring(s FROM 1 FOR 3)",
    "trim(BOTH 'x' FROM s)",
    "regexp_extract(s, '(\\\\d+)', 1)",
    "regexp_replace(s, '[^a-z]', '')",
    "split(s, ',')[0]",
    "lpad(id, 8, '0')",
    "initcap(name)",
    "date_trunc('month', ts)",
    "date_add(d, 1)",
    "datediff(a, b)",
    "to_date(s, 'yyyy-MM-dd')",
    "to_timestamp(s)",
    "year(d) * 100 + month(d)",
    "extract(YEAR FROM d)",
    "abs(x) + round(y, 2) - floor(z) + ceil(w)",
    "greatest(a, b) - least(a, b)",
    "pow(a, 2) + sqrt(b) + mod(c, 3)",
    "md5(email) = sha2(email, 256)",
    "hash(a, b) + xxhash64(a)",
    "size(tags) > 0 AND array_contains(tags, 'x')",
    "element_at(tags, 1)",
    "payload.customer.id",
    "tags[0]",
    "attrs['k']",
    "`weird col.name` + 1",
    "`user`",
    "get_json_object(j, '$.a.b')",
    "from_json(j, 'a int, b string')",
    "to_json(named_struct('a', a))",
    "transform(items, x -> x.price * x.qty)",
    "aggregate(items, 0D, (acc, x) -> acc + x.price)",
    "filter(tags, t -> t <> '')",
    "exists(tags, t -> t = 'vip')",
    "parse_url(u, 'HOST')",
    "url_decode(u)",
    "DATE '2024-01-01' <= d",
    "ts + INTERVAL 1 DAY",
    "x IS DISTINCT FROM y",
    "unix_timestamp(ts)",
    "r'\\d+'",
    "'it''s'",
    "concat('$', '{not a variable}')",
]


@pytest.mark.parametrize(("expression", "named"), REFUSED)
def test_refused_expressions_name_what_was_refused(expression: str, named: str) -> None:
    with pytest.raises(UnsafeExpression) as caught:
        check_expression(expression)

    error = caught.value
    assert isinstance(error, HakiriError)
    assert named.lower() in error.reason.lower(), error.reason
    assert "\n" not in error.reason
    assert error.hint


@pytest.mark.parametrize("expression", ALLOWED)
def test_pure_row_wise_expressions_are_allowed(expression: str) -> None:
    check_expression(expression)


def test_the_tables_are_big_enough() -> None:
    assert len(REFUSED) >= 25
    assert len(ALLOWED) >= 15


def test_refusals_carry_hints_that_say_what_to_do_instead() -> None:
    hints = {}
    for expression in ("sum(amount)", "current_date", "input_file_name()", "explode(tags)"):
        with pytest.raises(UnsafeExpression) as caught:
            check_expression(expression)
        hints[expression] = caught.value.hint

    assert "dedupe" in hints["sum(amount)"]
    assert "column of the row" in hints["current_date"]
    assert "provenance" in hints["input_file_name()"]
    assert "explode step" in hints["explode(tags)"]


def test_text_that_does_not_parse_gets_the_parsers_one_line_message() -> None:
    with pytest.raises(UnsafeExpression) as caught:
        check_expression("upper(name")

    assert caught.value.reason == (
        "transform expression does not parse: Expecting ) (line 1, column 10)"
    )


@pytest.mark.parametrize("empty", ["", "   ", "\n"])
def test_an_empty_expression_is_refused(empty: str) -> None:
    with pytest.raises(UnsafeExpression, match="empty"):
        check_expression(empty)


def test_a_filter_must_be_able_to_be_true_or_false() -> None:
    for expression in ("amount + 1", "'yes'", "1", "cast(a AS int)", "upper(name)"):
        with pytest.raises(UnsafeExpression, match="true/false"):
            check_expression(expression, boolean=True)
    for expression in ("amount > 0", "is_active", "cast(a AS boolean)", "coalesce(a, false)"):
        check_expression(expression, boolean=True)


def test_a_bare_session_name_is_a_column_only_when_the_batch_has_it() -> None:
    # Spark reads `user` as the session's user unless a column has that name.
    check_expression("user = 'bob'")
    check_expression("user = 'bob'", columns=["id", "USER"])
    with pytest.raises(UnsafeExpression, match=r"user\(\) reads the Spark session"):
        check_expression("user = 'bob'", columns=["id"])
    with pytest.raises(UnsafeExpression, match="current_user"):
        check_expression("`current_user`", columns=["id"])


def test_every_allowed_function_is_pure_by_the_tables_own_account() -> None:
    assert all(function_refusal(name) is None for name in ALLOWED_FUNCTIONS)
    assert function_refusal("REFLECT") is not None
    assert function_refusal("some_new_agg") is not None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("updated_at", SortKey("updated_at")),
        ("updated_at desc", SortKey("updated_at", descending=True)),
        ("updated_at DESC NULLS FIRST", SortKey("updated_at", True, True)),
        ("coalesce(a, b) asc nulls last", SortKey("coalesce(a, b)", False, False)),
        ("`desc`", SortKey("`desc`")),
    ],
)
def test_sort_keys_split_the_ordering_from_the_expression(text: str, key: SortKey) -> None:
    assert parse_sort_key(text) == key


def test_sort_keys_are_checked_like_any_expression() -> None:
    with pytest.raises(UnsafeExpression, match=r"rand\(\)"):
        parse_sort_key("rand() desc")
    with pytest.raises(UnsafeExpression, match="needs an expression"):
        parse_sort_key("nulls last")


def test_a_filter_is_qualified_and_quoted_for_the_destination_that_runs_it() -> None:
    from hakiri.guards.expressions import filter_for

    text = "region = 'EU' AND order_date >= date'2026-01-01'"
    assert filter_for(text, dialect="postgres", alias="t") == (
        '"t"."region" = \'EU\' AND "t"."order_date" >= CAST(\'2026-01-01\' AS DATE)'
    )
    assert filter_for(text, dialect="spark", alias="t").startswith("`t`.`region` = 'EU'")
    with pytest.raises(UnsafeExpression):
        filter_for("region = (SELECT 1)", dialect="postgres")
