"""A seeded synthetic workload generator, for what-if questions no real trace answers.

Why: real traces fix the mix of gang sizes, teams and runtimes; capacity planners also want
"what if our jobs were twice as large" or "what if a second team arrives". The generator reads
a small spec (a mapping, usually a YAML file, documented in ``simulator/README.md`` and shipped
as ``simulator/samples/synthetic.yaml``) and draws jobs from it:

- Poisson arrivals at ``arrivals.rate_per_hour`` (exponential inter-arrival times);
- GPUs per job from ``gang_gpus`` (a {gpus: weight} table), split into pods of at most
  ``gpus_per_worker`` GPUs by `trace.roles_for_gpus`;
- log-normal durations with a given median and sigma, clipped to [min, max];
- a team (queue) per job from ``teams`` ({name: share}), a priority from ``priorities``,
  a checkpoint interval with probability ``checkpoint.probability``.

Determinism: one `random.Random(seed)` and a fixed order of draws per job, so the same spec and
seed give identical jobs on every platform and Python version that keeps `random`'s documented
reproducibility guarantee.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml
from kubernetes.utils.quantity import parse_quantity

from scheduler.world.clusterspec import read_problem, yaml_problem
from simulator.trace import TraceError, TraceJob, roles_for_gpus

_TOP_LEVEL = {
    "format", "seed", "jobs", "horizon_hours", "arrivals", "gang_gpus", "gpus_per_worker",
    "duration", "teams", "priorities", "checkpoint", "cpu_per_gpu", "memory_per_gpu",
    "gpu_models",
}


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    seed: int
    jobs: int | None  # stop after this many jobs ...
    horizon_seconds: float | None  # ... or at the first arrival past this time
    rate_per_second: float
    gang_gpus: tuple[tuple[int, float], ...]  # (gpus, weight)
    gpus_per_worker: int
    duration_median: float
    duration_sigma: float
    duration_min: float
    duration_max: float
    teams: tuple[tuple[str, float], ...]
    priorities: tuple[tuple[int, float], ...]
    checkpoint_probability: float
    checkpoint_intervals: tuple[float, ...]
    cpu_millis_per_gpu: int
    memory_bytes_per_gpu: int
    gpu_models: tuple[tuple[tuple[str, ...], float], ...]  # (models, weight); () = any


def generate(spec: SyntheticSpec) -> tuple[TraceJob, ...]:
    """Draw the jobs of *spec*; already in canonical (submit_time, job_id) order."""
    rng = random.Random(spec.seed)
    gang_sizes, gang_weights = zip(*spec.gang_gpus, strict=True)
    teams, team_weights = zip(*spec.teams, strict=True)
    prios, prio_weights = zip(*spec.priorities, strict=True)
    models, model_weights = zip(*spec.gpu_models, strict=True)
    mu = math.log(spec.duration_median)
    jobs: list[TraceJob] = []
    now = 0.0
    limit = spec.jobs if spec.jobs is not None else math.inf
    while len(jobs) < limit:
        now += rng.expovariate(spec.rate_per_second)
        if spec.horizon_seconds is not None and now > spec.horizon_seconds:
            break
        # Fixed draw order per job: changing it changes every trace generated from a seed.
        gpus = rng.choices(gang_sizes, gang_weights)[0]
        duration = rng.lognormvariate(mu, spec.duration_sigma)
        team = rng.choices(teams, team_weights)[0]
        priority = rng.choices(prios, prio_weights)[0]
        checkpoints = rng.random() < spec.checkpoint_probability
        interval = rng.choice(spec.checkpoint_intervals) if spec.checkpoint_intervals else None
        model = rng.choices(models, model_weights)[0]
        duration = min(max(duration, spec.duration_min), spec.duration_max)
        roles = roles_for_gpus(
            gpus, spec.gpus_per_worker, spec.cpu_millis_per_gpu, spec.memory_bytes_per_gpu, model
        )
        jobs.append(
            TraceJob(
                f"syn-{len(jobs):06d}", round(now, 3), round(duration, 3), team, roles,
                priority, interval if checkpoints else None,
            )
        )
    return tuple(jobs)


def load_synthetic(
    path: str | Path, *, seed: int | None = None, jobs: int | None = None
) -> tuple[TraceJob, ...]:
    """Read a spec file and generate its jobs; *seed* and *jobs* override the file."""
    spec = load_spec(path)
    if seed is not None:
        spec = replace(spec, seed=seed)
    if jobs is not None:
        spec = replace(spec, jobs=jobs)
    return generate(spec)


def load_spec(path: str | Path) -> SyntheticSpec:
    return parse_spec(read_spec_data(path), str(path))


def read_spec_data(path: str | Path) -> Any:
    """The YAML document of a spec file; a `TraceError` naming the file when unreadable."""
    name = str(path)
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceError(name, None, "", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(name, None, "", read_problem(exc)) from None
    except yaml.YAMLError as exc:
        raise TraceError(name, None, "", yaml_problem(exc)) from None


def parse_spec(data: Any, source: str = "<spec>") -> SyntheticSpec:
    """Validate a spec mapping; errors name the field path: ``duration.sigma: must be > 0``."""

    def fail(field: str, reason: str) -> TraceError:
        return TraceError(source, None, field, reason)

    if not isinstance(data, Mapping):
        raise fail("", "a synthetic spec must be a mapping")
    if "pools" in data:
        raise fail("pools", "this is a cluster description, not a synthetic trace spec")
    for key in data:
        if key not in _TOP_LEVEL:
            raise fail(str(key), f"unknown field (known: {', '.join(sorted(_TOP_LEVEL))})")
    if data.get("format", "synthetic") != "synthetic":
        raise fail("format", f"must be 'synthetic', got {data['format']!r}")
    jobs = _opt_number(data, "jobs", fail, integer=True)
    horizon = _opt_number(data, "horizon_hours", fail)
    if jobs is None and horizon is None:
        raise fail("jobs", "give jobs, horizon_hours or both")
    arrivals = _section(data, "arrivals", fail)
    duration = _section(data, "duration", fail)
    checkpoint = data.get("checkpoint") or {}
    if not isinstance(checkpoint, Mapping):
        raise fail("checkpoint", "must be a mapping")
    intervals = checkpoint.get("interval", [])
    intervals = intervals if isinstance(intervals, list) else [intervals]
    spec = SyntheticSpec(
        seed=int(_number(data, "seed", fail, integer=True, minimum=0, default=0)),
        jobs=None if jobs is None else int(jobs),
        horizon_seconds=None if horizon is None else horizon * 3600.0,
        rate_per_second=_number(arrivals, "rate_per_hour", fail, "arrivals.") / 3600.0,
        gang_gpus=tuple((int(k), w) for k, w in _weights(data, "gang_gpus", fail, int)),
        gpus_per_worker=int(_number(data, "gpus_per_worker", fail, integer=True, default=8)),
        duration_median=_number(duration, "median", fail, "duration."),
        duration_sigma=_number(duration, "sigma", fail, "duration."),
        duration_min=_number(duration, "min", fail, "duration.", minimum=0, default=1.0),
        duration_max=_number(duration, "max", fail, "duration.", default=math.inf),
        teams=tuple((str(k), w) for k, w in _weights(data, "teams", fail, str)),
        priorities=tuple(
            (int(k), w) for k, w in _weights(data, "priorities", fail, int, default={0: 1})
        ),
        checkpoint_probability=_number(
            checkpoint, "probability", fail, "checkpoint.", minimum=0, default=0.0
        ),
        checkpoint_intervals=tuple(
            _number({"interval": v}, "interval", fail, "checkpoint.") for v in intervals
        ),
        cpu_millis_per_gpu=_quantity(data, "cpu_per_gpu", "4", fail, milli=True),
        memory_bytes_per_gpu=_quantity(data, "memory_per_gpu", "16Gi", fail, milli=False),
        gpu_models=tuple(
            (() if k == "any" else tuple(m for m in str(k).split("|") if m), w)
            for k, w in _weights(data, "gpu_models", fail, str, default={"any": 1})
        ),
    )
    if spec.checkpoint_probability > 1:
        raise fail("checkpoint.probability", "must be <= 1")
    if spec.checkpoint_probability > 0 and not spec.checkpoint_intervals:
        raise fail("checkpoint.interval", "required when checkpoint.probability > 0")
    if spec.duration_max < spec.duration_min:
        raise fail("duration.max", "must be >= duration.min")
    return spec


def _section(data: Mapping[str, Any], key: str, fail: Any) -> Mapping[str, Any]:
    section = data.get(key)
    if not isinstance(section, Mapping):
        raise fail(key, "required mapping")
    return section


def _opt_number(data: Mapping[str, Any], key: str, fail: Any, integer: bool = False) -> Any:
    return _number(data, key, fail, integer=integer, default=None) if key in data else None


def _number(
    data: Mapping[str, Any], key: str, fail: Any, prefix: str = "", *, integer: bool = False,
    minimum: float | None = None, default: float | None = None,
) -> float:
    """A number > 0 (or >= *minimum*); integers only when *integer*."""
    value = data.get(key, default)
    field = prefix + key
    if value is None:
        raise fail(field, "required")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(field, f"must be a number, got {value!r}")
    if integer and not float(value).is_integer():
        raise fail(field, f"must be an integer, got {value!r}")
    if math.isnan(value) or (value < minimum if minimum is not None else value <= 0):
        bound = f">= {minimum}" if minimum is not None else "> 0"
        raise fail(field, f"must be {bound}, got {value!r}")
    return float(value)


def _weights(
    data: Mapping[str, Any], key: str, fail: Any, kind: type, default: Any = None
) -> list[tuple[Any, float]]:
    """A non-empty {value: weight} table with weights >= 0 summing to > 0."""
    table = data.get(key, default)
    if not isinstance(table, Mapping) or not table:
        raise fail(key, "required non-empty mapping of value: weight")
    out = []
    for k, w in table.items():
        if kind is int and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            raise fail(f"{key}.{k}", "key must be an integer >= 0")
        if isinstance(w, bool) or not isinstance(w, int | float) or not w >= 0:
            raise fail(f"{key}.{k}", f"weight must be a number >= 0, got {w!r}")
        out.append((k, float(w)))
    if sum(w for _, w in out) <= 0:
        raise fail(key, "weights must not all be 0")
    return sorted(out, key=lambda kw: str(kw[0]) if kind is str else kw[0])


def _quantity(data: Mapping[str, Any], key: str, default: str, fail: Any, *, milli: bool) -> int:
    text = str(data.get(key, default))
    try:
        value: Decimal = parse_quantity(text)
    except (ValueError, InvalidOperation, TypeError):
        raise fail(key, f"not a Kubernetes quantity: {text!r}") from None
    if value < 0:
        raise fail(key, "must be >= 0")
    return math.ceil(value * 1000 if milli else value)
