"""Running gangs joined with GPU samples where the scheduler shows and exports them: the live
view (``GangRow.use``, ``QueueRow.idle_gpus``) and the gauges (``scheduler.run.gpu_use``)."""

from __future__ import annotations

import json
import math

from scheduler.report.utilisation import GpuSample, by_pod
from scheduler.run.config import GpuMetricsConfig
from scheduler.run.gpu_metrics import STALE_WINDOWS
from scheduler.run.gpu_use import GpuUse
from scheduler.run.metrics import SchedulerMetrics
from scheduler.views import live
from scheduler.views.gpu_use import GpuSamples
from scheduler.views.state import ClusterView
from tests.unit.test_views import scene_cycle

# The scene (tests/unit/test_views.py): team-a's gang "train" runs 2 ranks of 2 GPUs on n1
# (pod train-0 is rank 1, train-1 rank 0); team-b's "borrow" (8 GPUs) and "extra" (4) run
# in namespace other.
SAMPLES = [GpuSample("ns", "train-0", "0", 0.0), GpuSample("ns", "train-0", "1", 0.01),
           GpuSample("ns", "train-1", "0", 0.9), GpuSample("ns", "train-1", "1", 0.9),
           GpuSample("other", "borrow-0", "0", 0.5)]


def view(gpu: GpuSamples | None) -> ClusterView:
    sched, plan = scene_cycle()
    last = sched.last_cycle
    assert last is not None
    inp, in_force = last
    return live.build(live.Cycle(inp, plan, in_force, sched.last_queues),
                      sched.cache.gang_pods, gpu=gpu)


def test_the_view_shows_each_running_gangs_use_and_each_queues_idle_gpus() -> None:
    v = view(GpuSamples(by_pod(SAMPLES)))
    uses = {g.id: g.use for g in v.running}
    train = uses["ns/train"]
    assert train is not None
    assert [(r.rank, r.pod, r.gpus, r.flag) for r in train.ranks] == [
        ("0", "train-1", 2, ""), ("1", "train-0", 2, "idle")]
    assert (train.idle_gpus, train.allocated, train.summary) == (2, 4, "2 of 4 GPUs idle (rank 1)")
    borrow = uses["other/borrow"]
    assert borrow is not None and not borrow.flagged
    assert uses["other/extra"] is None  # no series names its pod: nothing known
    assert {q.name: q.idle_gpus for q in v.queues} == {"org": 0, "team-a": 2, "team-b": 0}


def test_without_gpu_metrics_nothing_changes() -> None:
    v = view(None)
    assert all(g.use is None for g in v.running)
    assert all(q.idle_gpus is None for q in v.queues)


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def answer(samples: list[GpuSample]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"namespace": s.namespace, "pod": s.pod, "gpu": s.device},
         "value": [0, str(s.utilisation * 100)]} for s in samples]}}).encode()


def test_the_gauges_follow_the_samples_and_drop_gangs_no_longer_flagged() -> None:
    sched, _ = scene_cycle()
    last = sched.last_cycle
    assert last is not None
    snapshot = last[0].snapshot
    metrics, clock = SchedulerMetrics(), Clock()
    answers = [answer(SAMPLES), answer([*SAMPLES[2:], GpuSample("ns", "train-0", "0", 0.9),
                                        GpuSample("ns", "train-0", "1", 0.9)])]
    config = GpuMetricsConfig(prometheus="http://prom:9090")
    use = GpuUse(config, metrics, clock=clock, fetch=lambda url: answers.pop(0))
    r = metrics.registry
    assert math.isnan(r.get_sample_value("gang_scheduler_gpu_metrics_age_seconds") or 0.0)
    charged: list[dict[tuple[str, str, str], int]] = []
    pools = {n: node.pool for n, node in snapshot.nodes.items()}

    use.reader.refresh()
    clock.now += 4
    use.update(snapshot.running, sched.cache.gang_pods, pools, lambda idle: charged.append(
        dict(idle)))
    gang = {"queue": "team-a", "namespace": "ns", "gang": "train"}
    assert r.get_sample_value("gang_scheduler_gang_idle_gpus", gang) == 2
    assert r.get_sample_value("gang_scheduler_gang_straggler_ranks", gang) == 0
    assert r.get_sample_value("gang_scheduler_gang_missing_ranks", gang) == 0
    assert r.get_sample_value("gang_scheduler_gang_idle_gpus",
                              {"queue": "team-b", "namespace": "other", "gang": "borrow"}) is None
    assert r.get_sample_value("gang_scheduler_idle_allocated_gpus",
                              {"queue": "team-a", "namespace": "ns", "pool": "p"}) == 2
    assert r.get_sample_value("gang_scheduler_gpu_metrics_age_seconds") == 4
    assert charged == [{("team-a", "ns", "p"): 2}]

    use.reader.refresh()  # rank 1 works again: the gang is no longer flagged
    assert use.due
    use.update(snapshot.running, sched.cache.gang_pods, pools, lambda idle: charged.append(
        dict(idle)))
    assert not use.due
    assert r.get_sample_value("gang_scheduler_gang_idle_gpus", gang) is None
    assert r.get_sample_value("gang_scheduler_idle_allocated_gpus",
                              {"queue": "team-a", "namespace": "ns", "pool": "p"}) is None
    assert charged[-1] == {}
    # Neither new samples nor other members running: nothing to set again.
    use.update(snapshot.running, sched.cache.gang_pods, pools, lambda idle: charged.append(
        dict(idle)))
    assert len(charged) == 2
    # The samples go stale: the gauges stop showing them.
    answers.append(answer(SAMPLES))
    use.reader.refresh()
    use.update(snapshot.running, sched.cache.gang_pods, pools, lambda idle: None)
    assert r.get_sample_value("gang_scheduler_gang_idle_gpus", gang) == 2
    clock.now += STALE_WINDOWS * config.window + 1
    assert use.due
    use.update(snapshot.running, sched.cache.gang_pods, pools, lambda idle: None)
    assert r.get_sample_value("gang_scheduler_gang_idle_gpus", gang) is None
    assert not use.due


def test_a_failed_read_is_counted_by_reason() -> None:
    metrics = SchedulerMetrics()
    use = GpuUse(GpuMetricsConfig(prometheus="http://127.0.0.1:1"), metrics)
    assert not use.reader.refresh()  # nothing listens on port 1
    assert metrics.registry.get_sample_value("gang_scheduler_gpu_metrics_read_failures_total",
                                             {"reason": "unreachable"}) == 1
