"""The chargeback ledger: intervals split at UTC midnights, summed per day and month, as CSV."""

from __future__ import annotations

import datetime as dt
import io
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scheduler.report.chargeback import (
    COLUMNS,
    Interval,
    Ledger,
    Row,
    split_at_midnights,
    write_csv,
)

KEY = ("team-a", "ns-a", "a100")
OTHER = ("team-b", "ns-b", "v100")


def at(text: str) -> float:
    """Epoch seconds of an ISO UTC time."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


def ledger_of(*intervals: Interval) -> Ledger:
    ledger = Ledger("EUR")
    ledger.add(intervals)
    return ledger


@pytest.mark.parametrize(("interval", "expected"), [
    # within a day: 2 GPUs x 3 h at 2.5/GPU-h
    (Interval(at("2026-12-06T09:00"), at("2026-12-06T12:00"), KEY, 2, None, 2.5),
     [("2026-12-06", 6.0, None, 15.0)]),
    # across midnight: 1 h before, 2 h after
    (Interval(at("2026-12-06T23:00"), at("2026-12-07T02:00"), KEY, 4, 1, 1.0),
     [("2026-12-06", 4.0, 1.0, 4.0), ("2026-12-07", 8.0, 2.0, 8.0)]),
    # across a month end (and a year end), idle known
    (Interval(at("2026-12-31T22:00"), at("2027-01-01T01:00"), KEY, 1, 0, 3.0),
     [("2026-12-31", 2.0, 0.0, 6.0), ("2027-01-01", 1.0, 0.0, 3.0)]),
    # a whole day and a bit: three days touched
    (Interval(at("2026-12-05T12:00"), at("2026-12-07T00:30"), KEY, 1, None, 0.0),
     [("2026-12-05", 12.0, None, 0.0), ("2026-12-06", 24.0, None, 0.0),
      ("2026-12-07", 0.5, None, 0.0)]),
])
def test_day_rows(interval: Interval, expected: list[tuple[str, float, float | None, float]]
                  ) -> None:
    rows = ledger_of(interval).rows("day")
    got = [(r.period, r.allocated_gpu_hours, r.idle_gpu_hours, r.cost) for r in rows]
    assert got == [(p, pytest.approx(a), None if i is None else pytest.approx(i), pytest.approx(c))
                   for p, a, i, c in expected]
    assert all(r.currency == "EUR" and (r.queue, r.namespace, r.pool) == KEY for r in rows)


def test_month_rollup_sums_days_per_calendar_month() -> None:
    ledger = ledger_of(
        Interval(at("2026-11-30T23:00"), at("2026-12-01T01:00"), KEY, 2, 1, 1.0),
        Interval(at("2026-12-15T00:00"), at("2026-12-15T10:00"), KEY, 1, 0, 1.0),
        Interval(at("2026-12-15T00:00"), at("2026-12-15T01:00"), OTHER, 8, None, 2.0))
    rows = {(r.period, r.queue): r for r in ledger.rows("month")}
    assert sorted(rows) == [("2026-11", "team-a"), ("2026-12", "team-a"), ("2026-12", "team-b")]
    december = rows[("2026-12", "team-a")]
    assert december.allocated_gpu_hours == pytest.approx(12.0)  # 2 (after midnight) + 10
    assert december.idle_gpu_hours == pytest.approx(1.0)
    assert december.used_gpu_hours == pytest.approx(11.0)
    assert rows[("2026-11", "team-a")].cost == pytest.approx(2.0)
    assert rows[("2026-12", "team-b")].used_gpu_hours is None  # no utilisation source


def test_used_is_unknown_when_idleness_was_unknown_for_part_of_the_row() -> None:
    ledger = ledger_of(Interval(at("2026-12-06T00:00"), at("2026-12-06T01:00"), KEY, 2, None, 1),
                       Interval(at("2026-12-06T01:00"), at("2026-12-06T02:00"), KEY, 2, 1, 1))
    (row,) = ledger.rows()
    assert (row.allocated_gpu_hours, row.idle_gpu_hours, row.used_gpu_hours,
            row.idle_cost) == (4.0, None, None, None)


def test_idle_never_exceeds_allocated() -> None:
    (row,) = ledger_of(Interval(0.0, 3600.0, KEY, 2, 5, 1.0)).rows()
    assert (row.idle_gpu_hours, row.used_gpu_hours, row.idle_cost) == (2.0, 0.0, 2.0)


def test_csv_has_a_stable_header_iso_dates_and_empty_unknowns() -> None:
    ledger = ledger_of(Interval(at("2026-12-06T23:00"), at("2026-12-07T00:20"), KEY, 3, None,
                                1.5))
    out = io.StringIO()
    write_csv(ledger.rows("day"), out)
    assert out.getvalue().splitlines() == [
        ",".join(COLUMNS),
        "2026-12-06,team-a,ns-a,a100,3.000000,,,4.500000,,EUR",
        "2026-12-07,team-a,ns-a,a100,1.000000,,,1.500000,,EUR",
    ]


def test_days_beyond_the_retention_are_dropped() -> None:
    ledger = Ledger(retention_days=2)
    for day in range(5):
        ledger.add([Interval(day * 86400.0, day * 86400.0 + 60, KEY, 1, None, 0.0)])
    assert [r.period for r in ledger.rows()] == ["1970-01-04", "1970-01-05"]
    with pytest.raises(ValueError, match="retention_days"):
        Ledger(retention_days=0)


def test_an_unknown_period_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="period: must be one of day, month"):
        Ledger().rows("week")  # type: ignore[arg-type]


def test_rows_survive_their_json_form() -> None:
    (row,) = ledger_of(Interval(0.0, 7200.0, KEY, 1, 1, 2.0)).rows("month")
    assert Row.from_dict(row.to_dict()) == row


# Within the default retention (400 days), so no day expires.
_times = st.floats(min_value=at("2026-06-01T00:00"), max_value=at("2027-03-01T00:00"),
                   allow_nan=False)


@st.composite
def intervals(draw: st.DrawFn) -> Interval:
    start = draw(_times)
    length = draw(st.floats(min_value=0.0, max_value=5 * 86400.0, allow_nan=False))
    idle = draw(st.none() | st.integers(0, 8))
    return Interval(start, start + length, draw(st.sampled_from([KEY, OTHER])),
                    draw(st.integers(0, 64)), idle, draw(st.sampled_from([0.0, 1.0, 2.75])))


@settings(max_examples=200, deadline=None)
@given(st.lists(intervals(), max_size=12))
def test_rows_sum_to_what_was_charged_never_lost_never_twice(charged: list[Interval]) -> None:
    ledger = Ledger()
    ledger.add(charged)
    for period in ("day", "month"):
        rows = ledger.rows(period)  # type: ignore[arg-type]
        for key in (KEY, OTHER):
            mine = [c for c in charged if c.key == key]
            theirs = [r for r in rows if (r.queue, r.namespace, r.pool) == key]
            assert math.isclose(sum(r.allocated_gpu_hours for r in theirs) * 3600,
                                sum(c.gpu_seconds for c in mine), rel_tol=1e-9, abs_tol=1e-6)
            assert math.isclose(sum(r.cost for r in theirs), sum(c.cost for c in mine),
                                rel_tol=1e-9, abs_tol=1e-9)


@given(intervals())
@example(Interval(1803859199.9999998, 1803859200.9999998, KEY, 0, None, 0.0))  # rounds to midnight
def test_pieces_tile_the_interval_one_per_day(interval: Interval) -> None:
    pieces = list(split_at_midnights(interval))
    assert [p.start for _, p in pieces[1:]] == [p.end for _, p in pieces[:-1]]
    if pieces:
        assert (pieces[0][1].start, pieces[-1][1].end) == (interval.start, interval.end)
    days = [d for d, _ in pieces]
    assert len(days) == len(set(days)) and days == sorted(days)


def test_an_origin_relabels_days_from_time_zero() -> None:
    # A simulation's clock starts at 0: 26 h from there are two days from the origin on, and
    # the months follow the relabelled days.
    ledger = ledger_of(Interval(0.0, 26 * 3600.0, KEY, 1, None, 1.0))
    assert [(r.period, r.allocated_gpu_hours) for r in ledger.rows(
        "day", origin=dt.date(2026, 12, 31))] == [("2026-12-31", 24.0), ("2027-01-01", 2.0)]
    assert [r.period for r in ledger.rows("month", origin=dt.date(2026, 12, 31))] == [
        "2026-12", "2027-01"]
