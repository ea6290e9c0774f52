"""`gang-scheduler chargeback`: GPU-hours and cost per team (queue, namespace, pool) per UTC day
or month, allocated, used and idle, as CSV (the default), a table or JSON.

Two sources, the same columns:

- ``--scheduler URL``: the leading scheduler's in-memory ledger (``/api/v1/chargeback``),
  exact to the second but only since that process started: a restart loses it.
- ``--prometheus URL``: the durable history, from the counters the scheduler exports
  (``gang_scheduler_allocated_gpu_seconds_total``, ``..._idle_gpu_seconds_total``,
  ``gang_scheduler_gpu_cost_total``): per day, their ``increase()`` over that UTC day. Prometheus
  extrapolates ``increase()`` to the window's edges, so a day's figures may differ from the
  ledger's by what a scrape interval or two holds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from scheduler.cli._args import iso_date, output_file_problem
from scheduler.report.chargeback import HOUR, Row, by_month, csv_fields, write_csv

EPILOG = """\
examples:
  # this month so far, per day, from the running scheduler (kubectl port-forward first)
  kubectl -n gang-scheduler-system port-forward svc/gang-scheduler-metrics 8080 &
  gang-scheduler chargeback --scheduler http://127.0.0.1:8080

  # last month's bill per team, from Prometheus (the durable history), into a file
  gang-scheduler chargeback --prometheus http://prometheus:9090 --period month \\
      --since 2026-11-01 --until 2026-11-30 --file november.csv

  # the same as a table to read
  gang-scheduler chargeback --prometheus http://prometheus:9090 --since 2026-12-01 -o table

columns: period (YYYY-MM-DD or YYYY-MM, UTC), queue, namespace, pool,
  allocated_gpu_hours, used_gpu_hours, idle_gpu_hours, cost, idle_cost, currency.
  used = allocated - idle; used, idle and idle_cost are empty when no GPU utilisation source
  told the idle GPUs (unknown, never assumed to equal allocated).

The scheduler's ledger is in memory: a restart or a change of leader starts it afresh (and
it keeps 400 days at most). Use --prometheus for anything older than the current leader.
"""

QUERY = "sum by (queue, namespace, pool{extra}) (increase({metric}[{window}s]))"
METRICS = {"allocated": ("gang_scheduler_allocated_gpu_seconds_total", ""),
           "idle": ("gang_scheduler_idle_gpu_seconds_total", ""),
           "cost": ("gang_scheduler_gpu_cost_total", ", currency")}
TIMEOUT = 30.0


class _Usage(ValueError):
    """A flag value that cannot work; the message names the flag."""


def http_url(text: str) -> str:
    """An http(s) URL with a host (a path prefix is kept)."""
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise argparse.ArgumentTypeError(
            f"must be an http:// or https:// URL with a host, got {text!r}")
    return text.rstrip("/")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "chargeback", help="GPU-hours and cost per team per day or month (CSV for finance)",
        description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--scheduler", type=http_url, metavar="URL",
                        help="the scheduler's metrics port (its in-memory ledger, since "
                        "the process started; lost on restart)")
    source.add_argument("--prometheus", type=http_url, metavar="URL",
                        help="a Prometheus that scrapes the scheduler (the durable history)")
    p.add_argument("--period", choices=("day", "month"), default="day",
                   help="one row per UTC day or calendar month (default: %(default)s)")
    p.add_argument("--since", type=iso_date, metavar="YYYY-MM-DD",
                   help="first day (default: the first of the current month)")
    p.add_argument("--until", type=iso_date, metavar="YYYY-MM-DD",
                   help="last day, included (default: today, UTC)")
    p.add_argument("-o", "--output", choices=("csv", "table", "json"), default="csv",
                   help="format (default: %(default)s)")
    p.add_argument("--file", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, today: dt.date | None = None) -> int:
    today = today or dt.datetime.now(dt.UTC).date()
    since, until = args.since or today.replace(day=1), args.until or today
    try:
        if since > until:
            raise _Usage(f"--since {since}: after --until {until}")
        if args.file is not None and (problem := output_file_problem(Path(args.file))):
            raise _Usage(f"--file {args.file}: {problem}")
        if args.scheduler:
            rows = [r for r in _from_scheduler(args.scheduler)
                    if since.isoformat() <= r.period <= until.isoformat()]
            rows = list(by_month(rows)) if args.period == "month" else rows
        else:
            days = _from_prometheus(args.prometheus, since, until)
            rows = list(by_month(days)) if args.period == "month" else list(days)
    except _Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except _Unreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.file is None:
        _write(rows, args.output, sys.stdout)
    else:
        with open(args.file, "w", encoding="utf-8", newline="") as out:
            _write(rows, args.output, out)
    return 0


class _Unreachable(RuntimeError):
    """A source that did not answer, or not as expected; the message names its flag."""


def _get_json(flag: str, url: str) -> object:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace").strip()[:300]
        raise _Unreachable(f"{flag}: {url} answered {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Unreachable(f"{flag}: cannot reach {url}: {reason}") from None
    except ValueError:
        raise _Unreachable(f"{flag}: {url} did not answer JSON") from None


def _from_scheduler(base: str) -> list[Row]:
    body = _get_json("--scheduler", f"{base}/api/v1/chargeback?period=day")
    if not isinstance(body, dict) or not isinstance(body.get("rows"), list):
        raise _Unreachable(f"--scheduler: {base}/api/v1/chargeback: no rows in the answer")
    return [Row.from_dict(r) for r in body["rows"]]


def _from_prometheus(base: str, since: dt.date, until: dt.date,
                     now: dt.datetime | None = None) -> tuple[Row, ...]:
    """One row per day and key, each counter's increase over that UTC day (up to *now* for
    today)."""
    now = now or dt.datetime.now(dt.UTC)
    rows: list[Row] = []
    day = since
    while day <= until:
        start = dt.datetime.combine(day, dt.time(), dt.UTC)
        end = min(start + dt.timedelta(days=1), now)
        if end > start:
            window = int((end - start).total_seconds())
            got = {name: _vector(base, QUERY.format(metric=metric, extra=extra, window=window),
                                 end.timestamp())
                   for name, (metric, extra) in METRICS.items()}
            rows.extend(_day_rows(day, got))
        day += dt.timedelta(days=1)
    return tuple(rows)


def _vector(base: str, query: str, at: float) -> list[tuple[Mapping[str, str], float]]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": f"{at:.3f}"})
    body = _get_json("--prometheus", url)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise _Unreachable(f"--prometheus: {base}: unexpected answer to {query!r}")
    return [(item["metric"], float(item["value"][1])) for item in data["result"]]


def _day_rows(day: dt.date, got: Mapping[str, list[tuple[Mapping[str, str], float]]]
              ) -> list[Row]:
    """The rows of one day from the three vectors; idle is unknown for a key without an idle
    series (no utilisation source), and so are used and idle cost."""
    def key(labels: Mapping[str, str]) -> tuple[str, str, str]:
        return labels.get("queue", ""), labels.get("namespace", ""), labels.get("pool", "")

    allocated = {key(m): v for m, v in got["allocated"]}
    idle = {key(m): v for m, v in got["idle"]}
    cost = {key(m): (v, m.get("currency", "")) for m, v in got["cost"]}
    out = []
    for k in sorted(allocated):
        gpu_hours = allocated[k] / HOUR
        if gpu_hours <= 0:
            continue
        price_cost, currency = cost.get(k, (0.0, ""))
        idle_h = idle[k] / HOUR if k in idle else None
        out.append(Row(
            period=day.isoformat(), queue=k[0], namespace=k[1], pool=k[2],
            allocated_gpu_hours=gpu_hours, idle_gpu_hours=idle_h, cost=price_cost,
            idle_cost=None if idle_h is None else price_cost * idle_h / gpu_hours,
            currency=currency))
    return out


def _write(rows: Sequence[Row], output: str, out: TextIO) -> None:
    if output == "csv":
        write_csv(rows, out)
    elif output == "json":
        json.dump([r.to_dict() for r in rows], out, indent=2)
        out.write("\n")
    else:
        header = ("PERIOD", "QUEUE", "NAMESPACE", "POOL", "GPU-H", "USED GPU-H", "IDLE GPU-H",
                  "COST", "IDLE COST", "")
        cells = [header] + [tuple(_brief(c) if 4 <= i <= 8 else c
                                  for i, c in enumerate(csv_fields(r))) for r in rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
        for row in cells:
            out.write("  ".join(c.ljust(w) if i < 4 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                      .rstrip() + "\n")


def _brief(cell: str) -> str:
    """A CSV figure for a person: two decimals, '-' for unknown."""
    return "-" if cell == "" else f"{float(cell):,.2f}"

