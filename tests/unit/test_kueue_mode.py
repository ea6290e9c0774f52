"""The Kueue mode: Kueue owns quota, so the scheduler's own quota step must find nothing to
limit, while placement (capacity, the node selectors Kueue injects) still decides."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from policies.queues import QueueSet
from scheduler.decide.cycle import decide
from scheduler.decide.plan import ReasonCategory
from scheduler.kube.read.policy_feed import LivePolicies
from scheduler.run import kueue_mode
from scheduler.run.config import ConfigError, KueueConfig, load_config
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

R = ReasonCategory
KUEUE = kueue_mode.admission_queue("default", ("a100",))


def test_the_admission_queue_limits_nothing_and_capacity_still_does() -> None:
    # 16 GPUs of nodes; two 8-GPU gangs and one 16-GPU gang in the built-in queue, far past
    # any quota a Queue object could have given: the first two start whole, the third waits
    # for capacity (not quota).
    pending = [gang("a", "default", gpus=8, created=1.0), gang("b", "default", gpus=8, created=2.0),
               gang("c", "default", gpus=8, pods=2, created=3.0)]
    plan = decide(Snapshot(nodes("a100", 2), ()), pending, policies(KUEUE), 100.0, solver=SOLVE)
    assert sorted({b.gang_id for b in plan.binds}) == ["ns/a", "ns/b"]
    assert plan.pending["ns/c"].category is R.PLACEMENT


def test_preemption_is_left_to_kueue() -> None:
    # A running low-priority gang fills the nodes; a high-priority one Kueue admitted waits
    # for room: evicting the running one is Kueue's call (its ClusterQueue's preemption).
    low = running(gang("low", "default", gpus=8, priority=0), {"a100-0000": 1}, start=0.0)
    high = gang("high", "default", gpus=8, priority=1000, created=5.0)
    plan = decide(Snapshot(nodes("a100", 1), (low,)), [high], policies(KUEUE), 100.0,
                  solver=SOLVE)
    assert not plan.evictions and not plan.binds
    assert plan.pending["ns/high"].category is R.PLACEMENT
    # The same with an ordinary queue: gang-scheduler would preempt.
    ample = policies(queue("default", quota={"a100": 64}))
    plan = decide(Snapshot(nodes("a100", 1), (low,)), [high], ample, 100.0, solver=SOLVE)
    assert plan.evictions


def test_a_queue_object_of_the_same_name_does_not_bring_quota_back() -> None:
    tight = queue("default", quota={"a100": 0}, namespaces=("other",))
    merged = kueue_mode.with_admission_queue(policies(tight, queue("x")), KUEUE)
    assert merged.queues.get("default") == KUEUE
    assert merged.queues.get("x") is not None  # other queues stay as they were
    plan = decide(Snapshot(nodes("a100", 1), ()), [gang("a", "default", gpus=8)], merged,
                  100.0, solver=SOLVE)
    assert [b.gang_id for b in plan.binds] == ["ns/a"]


def test_the_policy_feed_applies_the_overlay_once_per_version() -> None:
    overlay = kueue_mode.overlay(KueueConfig(enabled=True, pools=("a100",)), "default")
    assert overlay is not None
    feed = LivePolicies(overlay=overlay, write_status=lambda _n, _s: None)
    first = feed.current()
    assert first.queues.get("default") == KUEUE
    assert feed.current() is first  # unchanged policies: the same object (no spurious cycle)
    assert kueue_mode.overlay(KueueConfig(), "default") is None  # off by default
    assert LivePolicies(write_status=lambda _n, _s: None).current().queues == QueueSet()


@pytest.mark.parametrize(("text", "error"), [
    ("kueue: {pools: []}", "kueue.pools: must name at least one pool"),
    ("kueue: {pools: [a, a]}", "kueue.pools: duplicate pools"),
    ("kueue: {pools: a}", "kueue.pools: must be a list of pool names"),
    ("kueue: {enabled: yes please}", "kueue.enabled: must be true or false"),
    ("kueue: {enable: true}", r"kueue.enable: unknown field \(known: enabled, pools\)"),
])
def test_bad_kueue_settings_name_the_field(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=error):
        load_config(path)


def test_kueue_settings_read() -> None:
    assert KueueConfig() == KueueConfig(enabled=False, pools=("default",))


def test_the_readme_recipe_files_agree() -> None:
    # README "Under Kueue": the config turns the mode on for the dev cluster's pools, the Job
    # is suspended for Kueue, names the LocalQueue the queues file creates, and asks for
    # gang-scheduler; the flavor's nodeLabels name a pool the config places in.
    root = Path(__file__).resolve().parents[2] / "examples" / "kueue"
    config = load_config(root.parents[1] / "scheduler" / "examples" / "kueue-mode.yaml")
    assert config.kueue.enabled
    docs = {d["kind"]: d for d in yaml.safe_load_all((root / "queues.yaml").read_text())}
    [job] = yaml.safe_load_all((root / "job.yaml").read_text())
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"][kueue_mode.QUEUE_NAME_LABEL] == docs["LocalQueue"][
        "metadata"]["name"]
    assert job["spec"]["template"]["spec"]["schedulerName"] == config.scheduler_name
    assert docs["LocalQueue"]["spec"]["clusterQueue"] == docs["ClusterQueue"]["metadata"]["name"]
    labels = docs["ResourceFlavor"]["spec"]["nodeLabels"]
    assert labels[config.pool_label] in config.kueue.pools
