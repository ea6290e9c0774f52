"""The scheduler config file: round trip, and errors that name the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from policies.queues import Packing
from scheduler.run.config import (
    ConfigError,
    GpuMetricsConfig,
    SchedulerConfig,
    config_to_yaml,
    load_config,
)


def test_defaults_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(config_to_yaml(SchedulerConfig()))
    assert load_config(path) == SchedulerConfig()


def test_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("schedulerName: batch\ncycleIntervalSeconds: 0.5\n"
                    "topologyLabels: [zone, rack]\nleaderElection: {enabled: false}\n")
    cfg = load_config(path)
    assert cfg.scheduler_name == "batch"
    assert cfg.cycle_interval_seconds == 0.5
    assert cfg.topology_labels == ("zone", "rack")
    assert cfg.leader_election.enabled is False
    assert cfg.webhook.enabled is False  # off unless asked for


@pytest.mark.parametrize("text,message", [
    ("schedulerNme: x\n", "schedulerNme: unknown field"),
    ("bindConcurrency: many\n", "bindConcurrency: must be an integer"),
    ("cycleIntervalSeconds: -1\n", "cycleIntervalSeconds: must be >= 0"),
    ("leaderElection: {enabled: 1}\n", "leaderElection.enabled: must be true or false"),
    ("queueStatusIntervalSeconds: 0\n", "queueStatusIntervalSeconds: must be a positive number"),
    ("queueStatusIntervalSeconds: -2\n",
     "queueStatusIntervalSeconds: must be a positive number"),
    ("queueStatusIntervalSeconds: .nan\n",
     "queueStatusIntervalSeconds: must be a positive number"),
    ("queueStatusIntervalSeconds: soon\n",
     "queueStatusIntervalSeconds: must be a positive number of seconds, got 'soon'"),
    ("queueStatusIntervalSeconds: true\n",
     "queueStatusIntervalSeconds: must be a positive number"),
    ("topologyLabels: rack\n", "topologyLabels: must be a list"),
    ("topologyLabels: [zone, rack, zone]\n", "topologyLabels: duplicate keys"),
    ("topologyLabels: [kubernetes.io/hostname]\n",
     "topologyLabels: kubernetes.io/hostname is always the innermost level"),
    ("webhook: {bindAddress: '9443'}\n", "webhook.bindAddress: must be HOST:PORT"),
    ("webhook: {enabled: yes please}\n", "webhook.enabled: must be true or false"),
    ("webhook: {certDir: /x}\n", "webhook.certDir: unknown field"),
    ("[1, 2]\n", "must be a mapping"),
    ("a: [\n", "not valid YAML"),
])
def test_errors_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_config(path)


def test_queue_status_interval(tmp_path: Path) -> None:
    assert SchedulerConfig().queue_status_interval_seconds == 3.0
    path = tmp_path / "c.yaml"
    path.write_text("queueStatusIntervalSeconds: 10\n")
    assert load_config(path).queue_status_interval_seconds == 10.0
    with pytest.raises(ConfigError, match="queueStatusIntervalSeconds: must be a positive"):
        SchedulerConfig(queue_status_interval_seconds=0)  # built in code: checked too


def test_the_scheduler_policy_comes_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("schedulerPolicy:\n  preemption: false\n"
                    "  reservation: {afterSeconds: 600, maxGangs: 2}\n"
                    "  placement: {cpsatTimeLimitSeconds: 0.5}\n")
    policy = load_config(path).policy()
    assert (policy.preemption, policy.reserve_after_seconds, policy.max_reservations,
            policy.placement.cpsat_time_limit) == (False, 600.0, 2, 0.5)
    assert SchedulerConfig().policy() == load_config(None).policy()  # the preset's defaults


@pytest.mark.parametrize(("text", "message"), [
    ("schedulerPolicy: 5\n", "schedulerPolicy: must be a mapping (a SchedulerPolicy's spec)"),
    ("schedulerPolicy: {reservation: {maxGangs: 0}}\n",
     "schedulerPolicy.reservation.maxGangs: must be a whole number >= 1, got 0"),
    ("schedulerPolicy: {preemptoin: false}\n", "schedulerPolicy.preemptoin: unknown field"),
    ("schedulerPolicy: {preset: fastest}\n", "schedulerPolicy.preset: must be one of"),
    ("schedulerPolicy: {placement: {packing: tightest}}\n",
     "schedulerPolicy.placement.packing: must be one of best-fit | fragmentation, "
     "got 'tightest'"),
    ("schedulerPolicy: {placement: {packing: true}}\n",
     "schedulerPolicy.placement.packing: must be one of best-fit | fragmentation, got True"),
    ("schedulerPolicy: {placement: {packnig: fragmentation}}\n",
     "schedulerPolicy.placement.packnig: unknown field"),
])
def test_a_bad_scheduler_policy_is_refused_naming_the_field(tmp_path: Path, text: str,
                                                            message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)


def test_packing_is_best_fit_unless_configured(tmp_path: Path) -> None:
    assert SchedulerConfig().policy().packing is Packing.BEST_FIT  # recorded decisions kept
    path = tmp_path / "c.yaml"
    path.write_text("schedulerPolicy:\n  placement: {packing: fragmentation}\n")
    policy = load_config(path).policy()
    assert policy.packing is Packing.FRAGMENTATION
    assert policy.placement.fragmentation_mix is None  # the cycle sets it from what it sees


def test_gpu_metrics_is_off_unless_configured(tmp_path: Path) -> None:
    assert SchedulerConfig().gpu_metrics is None
    path = tmp_path / "c.yaml"
    path.write_text("gpuMetrics:\n  prometheus: http://prometheus.monitoring:9090\n"
                    "  window: 60\n  idleBelow: 0.1\n")
    cfg = load_config(path)
    assert cfg.gpu_metrics == GpuMetricsConfig(prometheus="http://prometheus.monitoring:9090",
                                               window=60.0, idle_below=0.1)
    path.write_text(config_to_yaml(cfg))  # and back, as the ConfigMap shape
    assert load_config(path) == cfg


@pytest.mark.parametrize("text,message", [
    ("gpuMetrics: {window: 60}\n", "gpuMetrics.prometheus: must be an http:// or https:// URL"),
    ("gpuMetrics: {prometheus: 'ftp://prom:9090'}\n",
     "gpuMetrics.prometheus: must be an http:// or https:// URL of Prometheus, got 'ftp://prom"),
    ("gpuMetrics: {prometheus: 'prom:9090'}\n", "gpuMetrics.prometheus: must be an http://"),
    ("gpuMetrics: {prometheus: 'http://p', window: -5}\n", "gpuMetrics.window: must be >= 0"),
    ("gpuMetrics: {prometheus: 'http://p', interval: 0}\n",
     "gpuMetrics.interval: must be a positive number"),
    ("gpuMetrics: {prometheus: 'http://p', idleBelow: 1.5}\n",
     "gpuMetrics.idleBelow: must be a number from 0 to 1, got 1.5"),
    ("gpuMetrics: {prometheus: 'http://p', stragglerBelow: 2}\n",
     "gpuMetrics.stragglerBelow: must be a number from 0 to 1"),
    ("gpuMetrics: {prometheus: 'http://p', metric: 'up{job=\"x\"}'}\n",
     "gpuMetrics.metric: not a Prometheus metric name"),
    ("gpuMetrics: {prometheus: 'http://p', windowSeconds: 60}\n",
     "gpuMetrics.windowSeconds: unknown field"),
    ("gpuMetrics: [http://p]\n", "gpuMetrics: must be a mapping"),
])
def test_gpu_metrics_errors_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)
