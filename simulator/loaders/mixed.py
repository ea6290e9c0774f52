"""A seeded generator for a shared cluster's mix of work: notebooks, HPO searches, training.

Why apart from the plain synthetic spec (``synthetic.py``): that one draws every job from one
distribution, while the policies of issue 38 act on *kinds* of work that differ in every
respect at once. Notebooks are one GPU, short, interactive, from many users, in the daytime;
an HPO search is one owner submitting a burst of many small trials at once; distributed
training is large gangs running for hours. Each class is its own section of the spec
(``simulator/samples/synthetic_mixed.yaml``, documented in ``simulator/README.md``) and every
job carries its class (``TraceJob.job_class``) through to its outcome.

Determinism: each class draws from its own ``random.Random`` seeded by (seed, class), in a
fixed order, so the same spec and seed give identical jobs, and changing one class's section
leaves the other classes' jobs as they were.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simulator.loaders.synthetic import _number, _quantity, _section, _weights, read_spec_data
from simulator.trace import TraceError, TraceJob, roles_for_gpus, sort_jobs

DAY = 86400.0
HOUR = 3600.0
CLASSES = ("notebook", "hpo", "training")
_TOP_LEVEL = {"format", "seed", "days", "cpu_per_gpu", "memory_per_gpu", "gpus_per_worker",
              *CLASSES}
_ID_PREFIX = {"notebook": "nb", "hpo": "hpo", "training": "train"}


@dataclass(frozen=True, slots=True)
class Durations:
    """Log-normal seconds, clipped to [minimum, maximum]."""

    median: float
    sigma: float
    minimum: float
    maximum: float

    def draw(self, rng: random.Random) -> float:
        value = rng.lognormvariate(math.log(self.median), self.sigma)
        return round(min(max(value, self.minimum), self.maximum), 3)


@dataclass(frozen=True, slots=True)
class NotebookSpec:
    rate_per_hour: float  # Poisson arrivals while the day is on
    day_start_hour: float  # arrivals only between these hours of each UTC day
    day_end_hour: float
    users: int  # users user-000 ... drawn uniformly
    duration: Durations
    teams: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class HpoSpec:
    bursts_per_day: float  # Poisson burst arrivals, any hour
    trials_min: int
    trials_max: int  # trials per burst, uniform
    trial_gpus: tuple[tuple[int, float], ...]
    spread_seconds: float  # a burst's trials are submitted over this long
    owners: int  # owners hpo-owner-0 ... one per burst
    duration: Durations
    teams: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class TrainingSpec:
    rate_per_hour: float
    gang_gpus: tuple[tuple[int, float], ...]
    duration: Durations
    teams: tuple[tuple[str, float], ...]
    checkpoint_interval: float | None


@dataclass(frozen=True, slots=True)
class MixedSpec:
    seed: int
    horizon_seconds: float  # arrivals stop here
    cpu_millis_per_gpu: int
    memory_bytes_per_gpu: int
    gpus_per_worker: int
    notebook: NotebookSpec | None
    hpo: HpoSpec | None
    training: TrainingSpec | None


def generate(spec: MixedSpec) -> tuple[TraceJob, ...]:
    """Every class's jobs, in canonical (submit_time, job_id) order."""
    jobs: list[TraceJob] = []
    if spec.notebook is not None:
        jobs += _notebooks(spec, spec.notebook, _rng(spec.seed, "notebook"))
    if spec.hpo is not None:
        jobs += _hpo(spec, spec.hpo, _rng(spec.seed, "hpo"))
    if spec.training is not None:
        jobs += _training(spec, spec.training, _rng(spec.seed, "training"))
    return sort_jobs(jobs)


def _rng(seed: int, job_class: str) -> random.Random:
    return random.Random(f"{seed}:{job_class}")  # str seeds are hashed stably (version 2)


def _job(spec: MixedSpec, job_class: str, n: int, submit: float, duration: float, gpus: int,
         team: str, **extra: Any) -> TraceJob:
    roles = roles_for_gpus(gpus, spec.gpus_per_worker, spec.cpu_millis_per_gpu,
                           spec.memory_bytes_per_gpu)
    return TraceJob(f"{_ID_PREFIX[job_class]}-{n:06d}", round(submit, 3), duration, team, roles,
                    job_class=job_class, **extra)


def _pick(rng: random.Random, table: tuple[tuple[Any, float], ...]) -> Any:
    values, weights = zip(*table, strict=True)
    return rng.choices(values, weights)[0]


def _notebooks(spec: MixedSpec, nb: NotebookSpec, rng: random.Random) -> list[TraceJob]:
    """Poisson arrivals over the day-time hours only (the clock jumps over the night)."""
    out: list[TraceJob] = []
    day_length = (nb.day_end_hour - nb.day_start_hour) * HOUR
    open_seconds = 0.0  # day-time seconds elapsed
    while True:
        open_seconds += rng.expovariate(nb.rate_per_hour / HOUR)
        day, into = divmod(open_seconds, day_length)
        submit = day * DAY + nb.day_start_hour * HOUR + into
        if submit >= spec.horizon_seconds:
            return out
        user = rng.randrange(nb.users)
        duration = nb.duration.draw(rng)
        team = _pick(rng, nb.teams)
        out.append(_job(spec, "notebook", len(out), submit, duration, 1, team,
                        interactive=True, user=f"user-{user:03d}"))


def _hpo(spec: MixedSpec, hpo: HpoSpec, rng: random.Random) -> list[TraceJob]:
    """Bursts: one owner submits all of a search's trials within ``spread_seconds``."""
    out: list[TraceJob] = []
    burst = 0.0
    while True:
        burst += rng.expovariate(hpo.bursts_per_day / DAY)
        if burst >= spec.horizon_seconds:
            return out
        trials = rng.randint(hpo.trials_min, hpo.trials_max)
        owner = f"hpo-owner-{rng.randrange(hpo.owners)}"
        team = _pick(rng, hpo.teams)
        gpus = _pick(rng, hpo.trial_gpus)  # one search's trials are alike
        for i in range(trials):
            submit = burst + hpo.spread_seconds * i / trials
            out.append(_job(spec, "hpo", len(out), submit, hpo.duration.draw(rng), gpus, team,
                            user=owner))


def _training(spec: MixedSpec, tr: TrainingSpec, rng: random.Random) -> list[TraceJob]:
    out: list[TraceJob] = []
    now = 0.0
    while True:
        now += rng.expovariate(tr.rate_per_hour / HOUR)
        if now >= spec.horizon_seconds:
            return out
        gpus = _pick(rng, tr.gang_gpus)
        duration = tr.duration.draw(rng)
        team = _pick(rng, tr.teams)
        out.append(_job(spec, "training", len(out), now, duration, gpus, team,
                        checkpoint_interval=tr.checkpoint_interval))


def load_mixed(path: str | Path, *, seed: int | None = None) -> tuple[TraceJob, ...]:
    """Read a ``format: mixed`` spec file and generate its jobs; *seed* overrides the file's."""
    spec = parse_mixed(read_spec_data(path), str(path))
    return generate(spec if seed is None else replace(spec, seed=seed))


def parse_mixed(data: Any, source: str = "<spec>") -> MixedSpec:
    """Validate a mixed spec; errors name the field path: ``hpo.trials.max: must be > 0``."""

    def fail(field: str, reason: str) -> TraceError:
        return TraceError(source, None, field, reason)

    if not isinstance(data, Mapping):
        raise fail("", "a mixed spec must be a mapping")
    for key in data:
        if key not in _TOP_LEVEL:
            raise fail(str(key), f"unknown field (known: {', '.join(sorted(_TOP_LEVEL))})")
    if data.get("format") != "mixed":
        raise fail("format", f"must be 'mixed', got {data.get('format')!r}")
    if not any(c in data for c in CLASSES):
        raise fail("", f"give at least one class section ({', '.join(CLASSES)})")
    nb = _notebook(data["notebook"], fail) if "notebook" in data else None
    hpo = _hpo_spec(data["hpo"], fail) if "hpo" in data else None
    training = _training_spec(data["training"], fail) if "training" in data else None
    return MixedSpec(
        seed=int(_number(data, "seed", fail, integer=True, minimum=0, default=0)),
        horizon_seconds=_number(data, "days", fail) * DAY,
        cpu_millis_per_gpu=_quantity(data, "cpu_per_gpu", "4", fail, milli=True),
        memory_bytes_per_gpu=_quantity(data, "memory_per_gpu", "16Gi", fail, milli=False),
        gpus_per_worker=int(_number(data, "gpus_per_worker", fail, integer=True, default=8)),
        notebook=nb, hpo=hpo, training=training)


def _class_section(section: Any, name: str, known: set[str], fail: Any) -> Mapping[str, Any]:
    if not isinstance(section, Mapping):
        raise fail(name, "must be a mapping")
    for key in section:
        if key not in known:
            raise fail(f"{name}.{key}", f"unknown field (known: {', '.join(sorted(known))})")
    return section


def _durations(section: Mapping[str, Any], name: str, fail: Any) -> Durations:
    d = _section(section, "duration", lambda f, r: fail(f"{name}.{f}", r))
    prefix = f"{name}.duration."
    out = Durations(median=_number(d, "median", fail, prefix),
                    sigma=_number(d, "sigma", fail, prefix),
                    minimum=_number(d, "min", fail, prefix, minimum=0, default=1.0),
                    maximum=_number(d, "max", fail, prefix, default=math.inf))
    if out.maximum < out.minimum:
        raise fail(f"{prefix}max", "must be >= duration.min")
    return out


def _teams(section: Mapping[str, Any], name: str, fail: Any) -> tuple[tuple[str, float], ...]:
    return tuple((str(k), w) for k, w in _weights(section, "teams", _under(name, fail), str))


def _under(name: str, fail: Any) -> Any:
    return lambda field, reason: fail(f"{name}.{field}", reason)


def _notebook(raw: Any, fail: Any) -> NotebookSpec:
    s = _class_section(raw, "notebook", {"rate_per_hour", "day_hours", "users", "duration",
                                         "teams"}, fail)
    hours = s.get("day_hours", [0, 24])
    if (not isinstance(hours, list) or len(hours) != 2
            or not all(isinstance(h, int | float) and not isinstance(h, bool) for h in hours)
            or not 0 <= hours[0] < hours[1] <= 24):
        raise fail("notebook.day_hours", f"must be [start, end] with 0 <= start < end <= 24, "
                   f"got {hours!r}")
    return NotebookSpec(
        rate_per_hour=_number(s, "rate_per_hour", fail, "notebook."),
        day_start_hour=float(hours[0]), day_end_hour=float(hours[1]),
        users=int(_number(s, "users", fail, "notebook.", integer=True)),
        duration=_durations(s, "notebook", fail), teams=_teams(s, "notebook", fail))


def _hpo_spec(raw: Any, fail: Any) -> HpoSpec:
    s = _class_section(raw, "hpo", {"bursts_per_day", "trials", "trial_gpus", "spread_minutes",
                                    "owners", "duration", "teams"}, fail)
    trials = _section(s, "trials", _under("hpo", fail))
    low = int(_number(trials, "min", fail, "hpo.trials.", integer=True))
    high = int(_number(trials, "max", fail, "hpo.trials.", integer=True))
    if high < low:
        raise fail("hpo.trials.max", "must be >= trials.min")
    return HpoSpec(
        bursts_per_day=_number(s, "bursts_per_day", fail, "hpo."),
        trials_min=low, trials_max=high,
        trial_gpus=tuple((int(k), w) for k, w in _weights(s, "trial_gpus", _under("hpo", fail),
                                                          int)),
        spread_seconds=60 * _number(s, "spread_minutes", fail, "hpo.", minimum=0, default=0),
        owners=int(_number(s, "owners", fail, "hpo.", integer=True, default=1)),
        duration=_durations(s, "hpo", fail), teams=_teams(s, "hpo", fail))


def _training_spec(raw: Any, fail: Any) -> TrainingSpec:
    s = _class_section(raw, "training", {"rate_per_hour", "gang_gpus", "duration", "teams",
                                         "checkpoint_interval"}, fail)
    interval = s.get("checkpoint_interval")
    return TrainingSpec(
        rate_per_hour=_number(s, "rate_per_hour", fail, "training."),
        gang_gpus=tuple((int(k), w) for k, w in _weights(s, "gang_gpus",
                                                         _under("training", fail), int)),
        duration=_durations(s, "training", fail), teams=_teams(s, "training", fail),
        checkpoint_interval=None if interval is None
        else _number(s, "checkpoint_interval", fail, "training."))
