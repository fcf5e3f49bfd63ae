"""Times go in aware and come out aware UTC; JSON goes in and out as documents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy.dialects import postgresql, sqlite

from hakiri.catalog.schema import JSONText, UTCDateTime

DIALECTS = [sqlite.dialect(), postgresql.dialect()]


@pytest.mark.parametrize("dialect", DIALECTS, ids=["sqlite", "postgresql"])
def test_times_are_stored_naive_utc_and_returned_aware(dialect: object) -> None:
    kind = UTCDateTime()
    tokyo = datetime(2024, 3, 1, 9, 30, 0, 123456, tzinfo=timezone(timedelta(hours=9)))
    stored = kind.process_bind_param(tokyo, dialect)  # type: ignore[arg-type]
    assert stored == datetime(2024, 3, 1, 0, 30, 0, 123456)
    assert stored is not None and stored.tzinfo is None
    loaded = kind.process_result_value(stored, dialect)  # type: ignore[arg-type]
    assert loaded == tokyo and loaded is not None and loaded.tzinfo is UTC
    assert kind.process_bind_param(None, dialect) is None  # type: ignore[arg-type]


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        UTCDateTime().process_bind_param(datetime(2024, 1, 1), sqlite.dialect())


def test_json_text_round_trips_with_sorted_keys() -> None:
    kind = JSONText()
    text = kind.process_bind_param({"b": [1, None], "a": "${SECRET}"}, sqlite.dialect())
    assert text == '{"a": "${SECRET}", "b": [1, null]}'
    assert kind.process_result_value(text, sqlite.dialect()) == {"a": "${SECRET}", "b": [1, None]}
