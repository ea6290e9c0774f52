"""Statistics building blocks on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import stats


def test_describe_uses_linear_interpolation_between_order_statistics() -> None:
    d = stats.describe([4.0, 1.0, 3.0, 2.0])
    assert (d.count, d.mean, d.p50, d.max) == (4, 2.5, 2.5, 4.0)
    assert d.p95 == pytest.approx(3.85)  # 1 + 0.95 * (4 - 1)
    assert d.p99 == pytest.approx(3.97)


def test_describe_of_nothing_is_all_none() -> None:
    assert stats.describe([]) == stats.Distribution(0, None, None, None, None, None)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1, 1, 1], 1.0), ([0.3, 0.3], 1.0), ([1, 0, 0], 1 / 3), ([1, 2], 0.9), ([0, 0], 1.0),
     ([], None)],
)
def test_jain_index(values: list[float], expected: float | None) -> None:
    assert stats.jain_index(values) == (pytest.approx(expected) if expected else expected)


def test_jain_rows_only_counts_masked_columns() -> None:
    x = np.array([[1.0, 0.0, 5.0], [1.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    mask = np.array([[True, True, False], [True, True, False], [False, False, False]])
    out = stats.jain_rows(x, mask)
    assert out[0] == pytest.approx(0.5) and out[1] == pytest.approx(0.9)
    assert np.isnan(out[2])


@pytest.mark.parametrize(
    ("capacity", "demand", "weights", "expected"),
    [
        (10, [2, 20, 20], [1, 1, 1], [2, 4, 4]),
        (10, [2, 20, 20], [1, 1, 2], [2, 8 / 3, 16 / 3]),
        (6, [0, 5, 5], [1, 1, 1], [0, 3, 3]),
        (100, [2, 3], [1, 1], [2, 3]),
        (8, [1, 2, 100], [1, 1, 1], [1, 2, 5]),
        (0, [1, 1], [1, 1], [0, 0]),
    ],
)
def test_water_fill_is_weighted_max_min_capped_by_demand(
    capacity: float, demand: list[float], weights: list[float], expected: list[float]
) -> None:
    out = stats.water_fill(
        np.array([capacity], dtype=float), np.array([demand], dtype=float), np.array(weights, float)
    )
    assert out[0] == pytest.approx(expected)


def test_water_fill_rows_are_independent() -> None:
    rows = [(10, [2, 20, 20]), (6, [0, 5, 5]), (100, [2, 3, 0])]
    capacity = np.array([c for c, _ in rows], dtype=float)
    demand = np.array([d for _, d in rows], dtype=float)
    together = stats.water_fill(capacity, demand, np.ones(3))
    for i, (c, d) in enumerate(rows):
        alone = stats.water_fill(np.array([c], float), np.array([d], float), np.ones(3))
        assert together[i] == pytest.approx(alone[0])


def test_interval_lengths_step_function() -> None:
    t = np.array([0.0, 10.0, 10.0, 25.0])
    assert list(stats.interval_lengths(t)) == [10.0, 0.0, 15.0, 0.0]
    assert list(stats.interval_lengths(t, end=30.0)) == [10.0, 0.0, 15.0, 5.0]
    with pytest.raises(ValueError, match="before the last sample"):
        stats.interval_lengths(t, end=20.0)
