"""Chargeback finance can read: GPU-hours and cost per team per UTC day and month.

The accrual (``scheduler.run.accrual``) charges what is allocated as ``Interval``s: so many
GPUs of a (queue, namespace, pool), of which so many idle, from one time to another, at a price.
The same intervals go to the Prometheus counters and to the ``Ledger`` here, so the two can
never disagree on what was charged; the ledger only splits them at UTC midnights and sums them
per day. Pure: times in, rows out; no clock, no I/O (``write_csv`` writes to the file given).

- **allocated**: GPU-hours the team was allocated (what it pays for);
- **idle**: of those, GPU-hours a utilisation source (dcgm-exporter) saw idle;
- **used** = allocated - idle. Unknown, never assumed equal to allocated, when no source told
  the idle GPUs for the whole of the row: the CSV leaves idle, used and idle cost empty.

The ledger lives in memory: a restart loses it. Prometheus keeps the durable history
(``gang-scheduler chargeback --prometheus``). It keeps at most ``retention_days`` days.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, TextIO

HOUR = 3600.0
DAY = 86400.0
Key = tuple[str, str, str]  # (queue, namespace, pool)
Period = Literal["day", "month"]
PERIODS: tuple[Period, ...] = ("day", "month")

#: Column order of the CSV, fixed: finance's spreadsheets refer to columns by position too.
COLUMNS = ("period", "queue", "namespace", "pool", "allocated_gpu_hours", "used_gpu_hours",
           "idle_gpu_hours", "cost", "idle_cost", "currency")
#: Decimal places of every figure in the CSV: a micro-GPU-hour (3.6 ms of one GPU), and a
#: millionth of the currency unit, so sums of rows match the counters to 1e-6 relative.
PLACES = 6
DEFAULT_RETENTION_DAYS = 400
EPOCH_DAY = dt.date(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class Interval:
    """*gpus* (GPU-equivalents: 0.5 is half a GPU held as a share) of *key* allocated from
    *start* to *end* (epoch seconds), *idle* of them idle
    (None: unknown, no utilisation source), at *price* per GPU-hour. The one place a charge
    is computed: the counters and the ledger both take these figures."""

    start: float
    end: float
    key: Key
    gpus: float
    idle: float | None
    price: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.seconds

    @property
    def idle_gpu_seconds(self) -> float | None:
        return None if self.idle is None else min(self.idle, self.gpus) * self.seconds

    @property
    def cost(self) -> float:
        return self.gpu_seconds / HOUR * self.price

    @property
    def idle_cost(self) -> float | None:
        idle = self.idle_gpu_seconds
        return None if idle is None else idle / HOUR * self.price


@dataclass(frozen=True, slots=True)
class Row:
    """One period (``2026-12-06`` or ``2026-12``) of one (queue, namespace, pool).
    ``idle_gpu_hours``/``idle_cost`` are None when idleness was unknown for part of it."""

    period: str
    queue: str
    namespace: str
    pool: str
    allocated_gpu_hours: float
    idle_gpu_hours: float | None
    cost: float
    idle_cost: float | None
    currency: str

    @property
    def used_gpu_hours(self) -> float | None:
        idle = self.idle_gpu_hours
        return None if idle is None else self.allocated_gpu_hours - idle

    def to_dict(self) -> dict[str, object]:
        return {"period": self.period, "queue": self.queue, "namespace": self.namespace,
                "pool": self.pool, "allocated_gpu_hours": self.allocated_gpu_hours,
                "used_gpu_hours": self.used_gpu_hours, "idle_gpu_hours": self.idle_gpu_hours,
                "cost": self.cost, "idle_cost": self.idle_cost, "currency": self.currency}

    @staticmethod
    def from_dict(d: dict[str, object]) -> Row:
        """A row from ``to_dict``'s form (the /api/v1/chargeback JSON); ``used`` is derived."""
        def opt(name: str) -> float | None:
            value = d.get(name)
            return None if value is None else float(value)  # type: ignore[arg-type]

        return Row(period=str(d["period"]), queue=str(d["queue"]),
                   namespace=str(d["namespace"]), pool=str(d["pool"]),
                   allocated_gpu_hours=float(d["allocated_gpu_hours"]),  # type: ignore[arg-type]
                   idle_gpu_hours=opt("idle_gpu_hours"),
                   cost=float(d["cost"]), idle_cost=opt("idle_cost"),  # type: ignore[arg-type]
                   currency=str(d["currency"]))


class _Sums:
    """What one (day, key) was charged so far, in GPU-seconds and currency."""

    __slots__ = ("cost", "gpu_seconds", "idle_cost", "idle_gpu_seconds", "idle_known")

    def __init__(self) -> None:
        self.gpu_seconds = self.idle_gpu_seconds = self.cost = self.idle_cost = 0.0
        self.idle_known = True

    def add(self, part: Interval) -> None:
        self.gpu_seconds += part.gpu_seconds
        self.cost += part.cost
        idle, idle_cost = part.idle_gpu_seconds, part.idle_cost
        if idle is None or idle_cost is None:
            self.idle_known = self.idle_known and part.gpu_seconds == 0
        else:
            self.idle_gpu_seconds += idle
            self.idle_cost += idle_cost


EPOCH_DAY = dt.date(1970, 1, 1)


def day_of(t: float) -> dt.date:
    """The UTC calendar day of epoch second *t*, by whole days since the epoch: the same
    arithmetic as ``midnight_after``, so a piece never lands on the next day the way
    ``datetime.fromtimestamp`` would put it by rounding 23:59:59.9999998 up to midnight."""
    return EPOCH_DAY + dt.timedelta(days=int(t // DAY))


def midnight_after(t: float) -> float:
    """The first UTC midnight strictly after *t* (epoch seconds)."""
    return (t // DAY + 1) * DAY


def split_at_midnights(interval: Interval) -> Iterator[tuple[dt.date, Interval]]:
    """*interval* cut at each UTC midnight it spans, each piece with its day."""
    start = interval.start
    while start < interval.end:
        end = min(interval.end, midnight_after(start))
        yield day_of(start), Interval(start, end, interval.key, interval.gpus, interval.idle,
                                      interval.price)
        start = end


class Ledger:
    """GPU-hours and cost per (UTC day, queue, namespace, pool), in *currency*; days more than
    *retention_days* before the newest charged are dropped (memory stays bounded)."""

    def __init__(self, currency: str = "USD",
                 retention_days: int = DEFAULT_RETENTION_DAYS) -> None:
        if retention_days < 1:
            raise ValueError(f"retention_days: must be >= 1, got {retention_days}")
        self.currency, self.retention_days = currency, retention_days
        self._days: dict[dt.date, dict[Key, _Sums]] = {}

    def add(self, intervals: Iterable[Interval]) -> None:
        """Charge *intervals* (each split at UTC midnights)."""
        for interval in intervals:
            for day, part in split_at_midnights(interval):
                self._days.setdefault(day, {}).setdefault(part.key, _Sums()).add(part)
        self._expire()

    def _expire(self) -> None:
        if len(self._days) <= self.retention_days:
            return
        oldest = max(self._days) - dt.timedelta(days=self.retention_days - 1)
        for day in [d for d in self._days if d < oldest]:
            del self._days[day]

    def rows(self, period: Period = "day", origin: dt.date | None = None,
             since: dt.date | None = None) -> tuple[Row, ...]:
        """The rows of every day (``period="day"``) or calendar month, sorted by period then
        key; a month's sums are its days' sums. *origin*: the date that day 1970-01-01 (time 0)
        stands for (a simulation, whose clock starts at 0 with the trace). *since*: only the
        days from then on (as charged, before *origin* moves them)."""
        if period not in PERIODS:
            raise ValueError(f"period: must be one of {', '.join(PERIODS)}, got {period!r}")
        shift = dt.timedelta() if origin is None else origin - EPOCH_DAY
        days = tuple(_row((day + shift).isoformat(), key, self._days[day][key], self.currency)
                     for day in sorted(self._days) if since is None or day >= since
                     for key in sorted(self._days[day]))
        return days if period == "day" else by_month(days)


def by_month(days: Iterable[Row]) -> tuple[Row, ...]:
    """Day rows (``YYYY-MM-DD``) summed per calendar month (``YYYY-MM``) and key."""
    return merged(days, lambda r: (r.period[:7], r.queue, r.namespace, r.pool))


#: What rows are summed by: (period, queue, namespace, pool) of the sum ("" to sum over one).
Grouping = Callable[[Row], tuple[str, str, str, str]]


def merged(rows: Iterable[Row], group: Grouping) -> tuple[Row, ...]:
    """*rows* summed per *group* and currency, sorted; a sum's idle (and used) is unknown when
    one of its rows' is (the rule for every roll-up: months, a queue's namespaces)."""
    sums: dict[tuple[tuple[str, str, str, str], str], Row] = {}
    for r in rows:
        at = (group(r), r.currency)
        seen = sums.get(at)
        sums[at] = r if seen is None else dataclasses.replace(
            r, allocated_gpu_hours=seen.allocated_gpu_hours + r.allocated_gpu_hours,
            idle_gpu_hours=_plus(seen.idle_gpu_hours, r.idle_gpu_hours),
            cost=seen.cost + r.cost, idle_cost=_plus(seen.idle_cost, r.idle_cost))
    return tuple(dataclasses.replace(r, period=p, queue=q, namespace=n, pool=pool)
                 for ((p, q, n, pool), _), r in sorted(sums.items(), key=lambda kv: kv[0]))


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _row(label: str, key: Key, s: _Sums, currency: str) -> Row:
    return Row(period=label, queue=key[0], namespace=key[1], pool=key[2],
               allocated_gpu_hours=s.gpu_seconds / HOUR,
               idle_gpu_hours=s.idle_gpu_seconds / HOUR if s.idle_known else None,
               cost=s.cost, idle_cost=s.idle_cost if s.idle_known else None, currency=currency)


def _figure(value: float | None) -> str:
    return "" if value is None else f"{value:.{PLACES}f}"


def csv_fields(row: Row) -> list[str]:
    """*row* as the CSV's cells, in ``COLUMNS`` order (unknown figures empty)."""
    return [row.period, row.queue, row.namespace, row.pool, _figure(row.allocated_gpu_hours),
            _figure(row.used_gpu_hours), _figure(row.idle_gpu_hours), _figure(row.cost),
            _figure(row.idle_cost), row.currency]


def write_csv(rows: Iterable[Row], out: TextIO) -> None:
    """The header and one line per row (RFC 4180 quoting, ``\\n`` line ends)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(csv_fields(row))
