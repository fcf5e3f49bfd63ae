import re

import pytest

from hakiri.spec.base import duration_seconds
from hakiri.spec.interpolate import MissingVariable, expand, mask_url, references
from hakiri.spec.schedule import parse_schedule


def test_expand_uses_env_then_default_and_keeps_escaped_dollars() -> None:
    env = {"USER_NAME": "loader"}
    assert (
        expand("postgresql://${USER_NAME}:${PW:-none}@h/db", env) == "postgresql://loader:none@h/db"
    )
    assert expand("literal $${NOT_A_VAR}", env) == "literal ${NOT_A_VAR}"
    with pytest.raises(MissingVariable) as caught:
        expand("${MISSING}", env)
    assert caught.value.variable == "MISSING"


def test_references_carry_their_key_path() -> None:
    doc = {"a": {"b": ["x", "${ONE}"]}, "c": "${TWO:-2}"}
    found = [(r.path, r.variable, r.has_default) for r in references(doc)]
    assert found == [(("a", "b", 1), "ONE", False), (("c",), "TWO", True)]


def test_passwords_are_masked_in_urls() -> None:
    assert mask_url("postgresql://u:s3cret@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert mask_url("postgresql://u@db/x") == "postgresql://u@db/x"


@pytest.mark.parametrize(
    ("text", "cron", "seconds"),
    [
        ("every 15m", None, 900),
        ("every 30s", None, 30),
        ("every 2d", None, 172800),
        ("0 */2 * * *", "0 */2 * * *", None),
    ],
)
def test_schedules(text: str, cron: str | None, seconds: int | None) -> None:
    schedule = parse_schedule(text)
    assert (schedule.cron, schedule.interval_seconds) == (cron, seconds)


@pytest.mark.parametrize(
    "text", ["every 15 minutes", "every 0m", "61 * * * *", "* * * *", "hourly"]
)
def test_bad_schedules_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape("or 'every <n>s|m|h|d'")):
        parse_schedule(text)


def test_durations() -> None:
    assert duration_seconds("6h") == 21600
    with pytest.raises(ValueError):
        duration_seconds("6 hours")


def test_passwords_are_masked_in_key_value_and_query_forms() -> None:
    assert (
        mask_url("host=db user=u password=s3cret dbname=x")
        == "host=db user=u password=*** dbname=x"
    )
    assert mask_url("host=db password='it s' dbname=x") == "host=db password=*** dbname=x"
    assert mask_url("postgresql://db/x?user=u&password=s3cret&sslmode=require") == (
        "postgresql://db/x?user=u&password=***&sslmode=require"
    )
