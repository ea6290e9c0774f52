"""The trace record refuses impossible jobs, and gangs are split the documented way."""

from __future__ import annotations

import math

import pytest

from simulator.trace import TraceError, TraceJob, TraceRole, roles_for_gpus, sort_jobs

ROLE = TraceRole("worker", 2, 8, 32_000, 2**30)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"job_id": ""}, "job_id"),
        ({"submit_time": -1.0}, "submit_time"),
        ({"submit_time": math.nan}, "submit_time"),
        ({"duration": 0.0}, "duration"),
        ({"duration": math.inf}, "duration"),
        ({"roles": ()}, "at least one role"),
        ({"roles": (ROLE, ROLE)}, "unique"),
        ({"checkpoint_interval": 0.0}, "checkpoint_interval"),
    ],
)
def test_invalid_jobs_are_refused(change: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "job_id": "j", "submit_time": 0.0, "duration": 1.0, "queue": "q", "roles": (ROLE,),
    }
    with pytest.raises(ValueError, match=message):
        TraceJob(**{**fields, **change})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "args", [("", 1, 1, 1, 1), ("w", 0, 1, 1, 1), ("w", 1, -1, 1, 1), ("w", 1, 1, 1, -1)]
)
def test_invalid_roles_are_refused(args: tuple[str, int, int, int, int]) -> None:
    with pytest.raises(ValueError):
        TraceRole(*args)


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        (0, [("worker", 1, 0)]),
        (3, [("worker", 1, 3)]),
        (8, [("worker", 1, 8)]),
        (16, [("worker", 2, 8)]),
        (12, [("worker", 1, 8), ("worker-rest", 1, 4)]),
        (130, [("worker", 16, 8), ("worker-rest", 1, 2)]),
    ],
)
def test_roles_for_gpus(gpus: int, expected: list[tuple[str, int, int]]) -> None:
    roles = roles_for_gpus(gpus, 8, 1000, 100)
    assert [(r.name, r.count, r.gpus) for r in roles] == expected
    assert sum(r.count * r.gpus for r in roles) == gpus
    assert all(r.cpu_millis == 1000 * max(r.gpus, 1) for r in roles)


def test_totals_and_canonical_order() -> None:
    roles = (TraceRole("launcher", 1, 0, 500, 1), ROLE)
    a = TraceJob("b", 5.0, 10.0, "q", roles)
    b = TraceJob("a", 5.0, 10.0, "q", roles)
    c = TraceJob("z", 1.0, 10.0, "q", roles)
    assert (a.total_gpus, a.total_pods, a.gpu_seconds) == (16, 3, 160.0)
    assert [j.job_id for j in sort_jobs([a, b, c])] == ["z", "a", "b"]


def test_trace_error_message_format() -> None:
    assert str(TraceError("p.csv", 12, "num_gpus", "bad")) == "p.csv:12: num_gpus: bad"
    assert str(TraceError("s.yaml", None, "seed", "bad")) == "s.yaml: seed: bad"
    assert str(TraceError("p.csv", 3, "", "short row")) == "p.csv:3: short row"
