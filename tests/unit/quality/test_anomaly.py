import pytest

from hakiri.quality.anomaly import AnomalyCheck, check_row_count


@pytest.mark.parametrize("history", [[], [1000], [1000, 1000]])
def test_skipped_until_there_are_three_prior_runs(history: list[int]) -> None:
    assert check_row_count(12, history, 50) is None


def test_min_history_is_adjustable() -> None:
    assert check_row_count(12, [1000, 1000], 50, min_history=2) is not None
    assert check_row_count(12, [1000, 1000, 1000], 50, min_history=4) is None


@pytest.mark.parametrize("rows", [500, 501, 1000, 1499, 1500])
def test_silent_inside_the_band_edges_included(rows: int) -> None:
    check = check_row_count(rows, [900, 1000, 1100], 50)
    assert check is not None and check.ok
    assert (check.mean, check.low, check.high, check.window) == (1000, 500, 1500, 3)


@pytest.mark.parametrize("rows", [499, 1501, 0])
def test_fires_below_and_above(rows: int) -> None:
    check = check_row_count(rows, [900, 1000, 1100], 50)
    assert check is not None and not check.ok
    assert check.rows == rows


def test_edges_survive_floating_point() -> None:
    # 1000 * 1.1 is 1100.0000000000002 in binary floating point.
    for rows in (900, 1100):
        check = check_row_count(rows, [1000, 1000, 1000], 10)
        assert check is not None and check.ok, rows
    low = check_row_count(899, [1000, 1000, 1000], 10)
    assert low is not None and not low.ok


def test_message_of_a_failed_check() -> None:
    check = check_row_count(12, [1000] * 7, 50)
    assert check == AnomalyCheck(
        ok=False,
        rows=12,
        mean=1000,
        low=500,
        high=1500,
        window=7,
        message=(
            "loaded 12 rows; the mean of the last 7 successful runs is 1,000 (band ±50%: 500-1,500)"
        ),
    )


def test_message_of_a_passing_check_and_fractions() -> None:
    check = check_row_count(1, [1, 2, 2], 12.5)
    assert check is not None and not check.ok
    assert check.message == (
        "loaded 1 row; the mean of the last 3 successful runs is 1.7 (band ±12.5%: 1.5-1.9)"
    )
    ok = check_row_count(1000, [1000, 1000, 1000], 50)
    assert ok is not None and ok.ok
    assert ok.message == (
        "loaded 1,000 rows; within the band around the mean of the last 3 successful runs, "
        "1,000 (±50%: 500-1,500)"
    )


def test_delta_zero_accepts_only_the_mean() -> None:
    check = check_row_count(10, [10, 10, 10], 0)
    assert check is not None and check.ok and check.low == check.high == 10
    off = check_row_count(11, [10, 10, 10], 0)
    assert off is not None and not off.ok
    assert off.message.endswith("(band ±0%: 10-10)")


def test_a_history_of_empty_loads() -> None:
    check = check_row_count(5, [0, 0, 0], 50)
    assert check is not None and not check.ok
    assert (
        check.message
        == "loaded 5 rows; the mean of the last 3 successful runs is 0 (band ±50%: 0-0)"
    )
    same = check_row_count(0, [0, 0, 0], 50)
    assert same is not None and same.ok


def test_negative_delta_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="negative"):
        check_row_count(1, [1, 1, 1], -1)
