"""The scheduler's own configuration file (everything that is not a per-queue policy).

Read from YAML (the deploy/ ConfigMap); unknown keys and wrong types are errors naming the
field, because a silently ignored typo in a scheduler config is an outage waiting to happen.
Command-line flags override the file.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from policies.parsing import SCHEDULER_POLICY_KIND, parse_scheduler_policy
from policies.queues import API_VERSION, SchedulerPolicy
from scheduler.model import (
    DEFAULT_POOL_LABEL,
    DEFAULT_TOPOLOGY_LABELS,
    HOSTNAME_LABEL,
    NodeLabelConfig,
)
from scheduler.model.numerals import is_digits
from scheduler.run.kueue_mode import KueueConfig
from scheduler.world.clusterspec import read_problem, yaml_problem


class ConfigError(ValueError):
    """A configuration error; the message names the field path and the reason."""


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    enabled: bool = True
    lease_name: str = "gang-scheduler"
    lease_namespace: str = "gang-scheduler-system"
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0


@dataclass(frozen=True, slots=True)
class PricingConfig:
    """What a GPU-hour costs, per node pool, for the chargeback metrics (``gpu_cost_total``).

    A pool not listed costs ``default_gpu_hour``; all prices are in ``currency``.
    """

    currency: str = "USD"
    gpu_hour: Mapping[str, float] = field(default_factory=dict, hash=False)
    default_gpu_hour: float = 0.0

    def price(self, pool: str) -> float:
        return self.gpu_hour.get(pool, self.default_gpu_hour)


@dataclass(frozen=True, slots=True)
class GpuMetricsConfig:
    """Where the GPU metrics (NVIDIA dcgm-exporter's, stored by Prometheus) are read from, to
    show allocated-but-idle GPUs, straggler and missing ranks (``scheduler.run.gpu_metrics``).

    The section absent: the feature is off. ``window``: seconds each device's utilisation is
    averaged over; ``interval``: seconds between reads; ``idle_below``: a GPU below this mean
    utilisation (0..1) is idle; ``straggler_below``: a rank below this fraction of its gang's
    median lags.
    """

    prometheus: str = ""
    metric: str = "DCGM_FI_DEV_GPU_UTIL"
    window: float = 300.0
    interval: float = 30.0
    idle_below: float = 0.05
    straggler_below: float = 0.75

    def __post_init__(self) -> None:
        # Built in code (the --gpu-metrics-url flag) as well as read from a file: one check.
        _check_gpu_metrics(self)


def gpu_metrics_at(given: GpuMetricsConfig | None, url: str) -> GpuMetricsConfig:
    """*given* (the config's ``gpuMetrics``, or the defaults) reading from *url*: what a
    command's ``--gpu-metrics-url`` means (``run`` and ``explain`` alike). ``ConfigError``
    when *url* is not one."""
    return dataclasses.replace(given or GpuMetricsConfig(prometheus=url), prometheus=url)


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """The optional admission webhook (``scheduler.run.webhook``): off unless enabled. It
    serves HTTPS only (the apiserver calls webhooks over TLS) with this certificate and key,
    read again when they change."""

    enabled: bool = False
    bind_address: str = "0.0.0.0:9443"
    cert_file: str = "/etc/gang-scheduler-webhook/tls.crt"
    key_file: str = "/etc/gang-scheduler-webhook/tls.key"


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    scheduler_name: str = "gang-scheduler"
    default_queue: str = "default"
    #: The idle loop's longest sleep (its heartbeat and leadership check). No cycle runs
    #: for it: a cycle runs when something changed or a decision comes due
    #: (``scheduler.run.wake``).
    cycle_interval_seconds: float = 1.0
    #: Queue status (``kubectl get queues``) is written at most this often per Queue: fresh
    #: enough for a person, without a status write per Queue every cycle on a busy cluster.
    queue_status_interval_seconds: float = 3.0
    pool_label: str = DEFAULT_POOL_LABEL
    topology_labels: tuple[str, ...] = DEFAULT_TOPOLOGY_LABELS
    bind_concurrency: int = 32
    #: A cap, not an override: each preempted pod is evicted with its own
    #: ``terminationGracePeriodSeconds`` (its time to checkpoint on SIGTERM), at most this
    #: (how long a preemptor may wait for its victims):
    #: ``scheduler.kube.write.evictor.victim_grace``.
    eviction_grace_period_seconds: int = 300
    event_min_interval_seconds: float = 60.0
    bind_backoff_initial_seconds: float = 5.0
    bind_backoff_max_seconds: float = 300.0
    #: How long a gang left partly bound whose bound members started is given to be
    #: completed before they are deleted (``scheduler.decide.housekeeping``).
    partial_gang_grace_seconds: float = 60.0
    metrics_bind_address: str = "0.0.0.0:8080"
    #: The read-only dashboard (/dashboard), its data (/api/v1/state) and the chargeback
    #: (/api/v1/chargeback) on the metrics port.
    dashboard: bool = True
    log_level: str = "info"
    log_format: str = "auto"
    #: The global switches of the decision cycle: the ``spec`` of a SchedulerPolicy
    #: (preset, ordering, preemption, reservation, backfill, placement), checked at load.
    #: Empty: the ``gang-scheduler`` preset. Queues stay in Queue objects.
    scheduler_policy: Mapping[str, Any] = field(default_factory=dict, hash=False)
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)
    pricing: PricingConfig = field(default_factory=PricingConfig)
    webhook: WebhookConfig = field(default_factory=WebhookConfig)
    #: The Kueue mode (``scheduler.run.kueue_mode``): Kueue owns quota and admission, this
    #: scheduler's own quota step is off and it places what Kueue admitted.
    kueue: KueueConfig = field(default_factory=KueueConfig)
    #: GPU utilisation joined with gangs (``gpuMetrics``); None: off.
    gpu_metrics: GpuMetricsConfig | None = None

    def __post_init__(self) -> None:
        for name in _POSITIVE:  # also when built in code rather than read from a file
            _check_positive(getattr(self, name), _camel(name))
        self.policy()  # a bad schedulerPolicy stops the scheduler at start, naming the field

    def policy(self) -> SchedulerPolicy:
        """``scheduler_policy`` as the decision cycle takes it."""
        obj = {"apiVersion": API_VERSION, "kind": SCHEDULER_POLICY_KIND,
               "metadata": {"name": "config"}, "spec": dict(self.scheduler_policy)}
        policy, errors = parse_scheduler_policy(obj)
        if policy is None:
            raise ConfigError("; ".join(
                f"schedulerPolicy{e.path.removeprefix('spec')}: {e.reason}" for e in errors))
        return policy

    @property
    def node_labels(self) -> NodeLabelConfig:
        return NodeLabelConfig(pool_label=self.pool_label, topology_labels=self.topology_labels)


#: Fields where 0 makes no sense (an interval of 0 would mean a write on every pass).
_POSITIVE = ("queue_status_interval_seconds",)
#: Read from a file, these must be > 0 too: an idle sleep or lease period of 0 is a busy
#: loop, and 0 bind workers never bind.
_POSITIVE_IN_FILE = {"cycle_interval_seconds", "lease_duration_seconds",
                     "renew_deadline_seconds", "retry_period_seconds"}
_AT_LEAST_ONE = {"bind_concurrency"}
_CHOICES = {"log_level": ("debug", "info", "warning", "error"),
            "log_format": ("auto", "json", "console")}
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _check_address(value: str, path: str) -> str:
    _host, sep, port = value.rpartition(":")
    if not sep or not is_digits(port) or int(port) > 65535:
        raise ConfigError(f"{path}: must be HOST:PORT (port 0-65535), got {value!r}")
    return value


#: The metric names Prometheus accepts (what is put into the query verbatim).
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def _check_gpu_metrics(c: GpuMetricsConfig) -> None:
    """Each field of ``gpuMetrics``, named in the error."""
    scheme, sep, rest = c.prometheus.partition("://")
    if not sep or scheme not in ("http", "https") or not rest.strip("/"):
        raise ConfigError(f"gpuMetrics.prometheus: must be an http:// or https:// URL of "
                          f"Prometheus, got {c.prometheus!r}")
    if not _METRIC_NAME.match(c.metric):
        raise ConfigError(f"gpuMetrics.metric: not a Prometheus metric name: {c.metric!r}")
    for name, value in (("window", c.window), ("interval", c.interval)):
        _check_positive(value, f"gpuMetrics.{name}")
    for name, value in (("idleBelow", c.idle_below), ("stragglerBelow", c.straggler_below)):
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0 <= value <= 1:
            raise ConfigError(f"gpuMetrics.{name}: must be a number from 0 to 1, got {value!r}")


def _check_extra(name: str, value: Any, path: str) -> None:
    """Value checks beyond the type, for fields read from a file."""
    if name in _POSITIVE_IN_FILE and value <= 0:
        raise ConfigError(f"{path}: must be > 0, got {value:g}")
    if name in _AT_LEAST_ONE and value < 1:
        raise ConfigError(f"{path}: must be >= 1, got {value}")
    if name in _CHOICES and value not in _CHOICES[name]:
        raise ConfigError(f"{path}: must be one of {', '.join(_CHOICES[name])}, got {value!r}")
    if name in ("metrics_bind_address", "bind_address"):
        _check_address(value, path)
    if name == "currency" and not _CURRENCY.match(value):
        raise ConfigError(f"{path}: must be a three-letter currency code such as USD or EUR, "
                          f"got {value!r}")
    if name == "pools":
        if not value:
            raise ConfigError(f"{path}: must name at least one pool (nodes without the pool "
                              "label are in pool default)")
        if len(set(value)) != len(value):
            raise ConfigError(f"{path}: duplicate pools in {list(value)}")
    if name == "topology_labels":
        # Any number of levels: the topology and placement code is generic in the depth.
        bad = [k for k in value if not _LABEL_KEY.match(k)]
        if bad:
            raise ConfigError(f"{path}: not a valid label key: {bad[0]!r}")
        if len(set(value)) != len(value):
            raise ConfigError(f"{path}: duplicate keys in {list(value)}")
        if HOSTNAME_LABEL in value:
            raise ConfigError(f"{path}: {HOSTNAME_LABEL} is always the innermost level, "
                              "do not list it")


def _check_positive(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{path}: must be a positive number of seconds, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{path}: must be a positive number of seconds, got {value}")
    return float(value)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _coerce(value: Any, target: Any, path: str) -> Any:
    if target in ("bool", bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: must be true or false, got {value!r}")
        return value
    if target in ("int", int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: must be an integer, got {value!r}")
        if value < 0:
            raise ConfigError(f"{path}: must be >= 0, got {value}")
        return value
    if target in ("float", float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}: must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{path}: must be a finite number, got {value!r}")
        if value < 0:
            raise ConfigError(f"{path}: must be >= 0, got {value}")
        return float(value)
    if target in ("str", str):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{path}: must be a non-empty string, got {value!r}")
        return value
    if target == "Mapping[str, float]":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: must be a mapping of pool name to price, got {value!r}")
        prices = {}
        for pool, price in value.items():
            if not isinstance(pool, str) or not pool:
                raise ConfigError(f"{path}: pool names must be non-empty strings, got {pool!r}")
            prices[pool] = _coerce(price, float, f"{path}.{pool}")
        return prices
    if target == "tuple[str, ...]":
        what = "pool names" if path.endswith("pools") else "label keys"
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"{path}: must be a list of {what}, got {value!r}")
        return tuple(value)
    raise ConfigError(f"{path}: unsupported field type")


def _build(cls: Any, raw: Mapping[str, Any], path: str) -> Any:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path or 'config'}: must be a mapping, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        name = _snake(str(key))
        where = f"{path}.{key}" if path else str(key)
        if name not in fields:
            known = ", ".join(sorted(_camel(n) for n in fields))
            raise ConfigError(f"{where}: unknown field (known: {known})")
        ftype = fields[name].type
        if ftype in _OPTIONAL and value is None:
            kwargs[name] = None  # written out as null by config_to_yaml: the section is off
        elif ftype in _OPTIONAL:
            kwargs[name] = _build(_OPTIONAL[ftype], value, where)
        elif ftype in _NESTED:
            kwargs[name] = _build(_NESTED[ftype], value, where)
        elif name == "scheduler_policy":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: must be a mapping (a SchedulerPolicy's spec), "
                                  f"got {value!r}")
            kwargs[name] = dict(value)
        elif name in _POSITIVE:
            kwargs[name] = _check_positive(value, where)
        else:
            kwargs[name] = _coerce(value, ftype, where)
            _check_extra(name, kwargs[name], where)
    return cls(**kwargs)


_NESTED: dict[Any, type] = {"LeaderElectionConfig": LeaderElectionConfig,
                             "PricingConfig": PricingConfig,
                             "WebhookConfig": WebhookConfig, "KueueConfig": KueueConfig}
#: Sections that are off when absent (None).
_OPTIONAL: dict[Any, type] = {"GpuMetricsConfig | None": GpuMetricsConfig}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def load_config(path: str | Path | None) -> SchedulerConfig:
    """Parse the config file; ``None`` gives the defaults."""
    if path is None:
        return SchedulerConfig()
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {read_problem(exc)}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from None
    try:
        return _build(SchedulerConfig, raw, "")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def config_to_yaml(config: SchedulerConfig) -> str:
    """The config as YAML with camelCase keys: the shape the ConfigMap uses."""

    def convert(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj):
            return {_camel(f.name): convert(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if isinstance(obj, tuple):
            return list(obj)
        return obj

    return yaml.safe_dump(convert(config), sort_keys=False)
