"""The ``gang-scheduler`` run honours the policy file's SchedulerPolicy; baselines do not."""

from __future__ import annotations

from pathlib import Path

from policies.queues import SchedulerPolicy
from simulator.policies import make_preset
from simulator.session import SessionSpec, load_inputs

CLUSTER = str(Path(__file__).resolve().parents[3] / "scheduler/examples/clusters/sim-small.yaml")
POLICY = """\
apiVersion: gangscheduler.io/v1alpha1
kind: SchedulerPolicy
metadata: {name: p}
spec:
  reservation: {afterSeconds: 900}
"""


def test_a_file_with_only_a_scheduler_policy_keeps_the_default_queues(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    plain = load_inputs(SessionSpec(cluster=CLUSTER, trace="philly-sample"))
    inputs = load_inputs(SessionSpec(cluster=CLUSTER, trace="philly-sample", queues=str(path)))
    assert inputs.queues == plain.queues
    assert plain.scheduler is None
    assert inputs.scheduler == SchedulerPolicy(reserve_after_seconds=900.0)
    full = make_preset("gang-scheduler", inputs.queues, inputs.scheduler)
    assert full.policies.scheduler.reserve_after_seconds == 900.0
    baseline = make_preset("fifo-gang", inputs.queues, inputs.scheduler)
    assert baseline.policies.scheduler == SchedulerPolicy.preset("fifo-gang")
