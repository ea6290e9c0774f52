"""A semi-preemptible queue on the dev cluster, with real Indexed Jobs run by the Job
controller.

Queues a (semi-preemptible, 16 GPUs of quota) and b (16 GPUs) share ``org`` on four 8-GPU
nodes. a's Indexed Job of 4 with ``gangscheduler.io/min-member: 2`` takes all 32 GPUs: its
minimum (indexes 0 and 1) within a's quota, indexes 2 and 3 on what b lends. When b submits
a Job of 2 it reclaims its 16 GPUs: only indexes 2 and 3 are evicted (the event names the
policy and the kept minimum), 0 and 1 never leave their nodes, b's Job starts whole, and the
Job controller's replacements for 2 and 3 wait as growth members.

Without the field this scenario evicts the same two members (the victim search prefers
members above an elastic gang's minimum to whole gangs), with an event that does not name
the policy; the field changes the outcome when those members do not suffice (without it el
goes whole, with it b waits) or when a gang whose minimum fits the quota is the cheapest
victim. tests/unit/semi/test_decide.py pins each contrast, against the same ``decide``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import PodWatch, unschedulable_message
from tests.e2e.ops_support import Ops, ops_for
from tests.e2e.test_elastic import INDEX_LABEL, bound_indexes, indexed_job, live_pods

pytestmark = pytest.mark.e2e

FIELD = "spec.preemption.semiPreemptible"
NO_MIN_RUNTIME = {"minRuntimeSeconds": 0}


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def test_reclaim_takes_only_the_members_above_a_kept_minimum(ops: Ops) -> None:
    tenant = ops.tenant
    tenant.create_nodes(4, gpus=8)
    ops.queue("org")
    a = ops.queue("a", gpus=16, parent="org",
                  preemption={**NO_MIN_RUNTIME, "semiPreemptible": True})
    b = ops.queue("b", gpus=16, parent="org", preemption=NO_MIN_RUNTIME)
    with PodWatch(ops.cp, ops.ns) as watch:
        # All 4 pods exist before the scheduler starts, so el binds in one step and its one
        # Scheduled event names both members above a's quota (the Job controller creates
        # pods a few at a time: a scheduler already running may bind el in two steps).
        indexed_job(tenant, "el", 4, annotations={"gangscheduler.io/min-member": "2"},
                    queue=a)
        wait_for(lambda: len(live_pods(tenant, "el")) == 4, 30, what="el's 4 pods created")
        runner = ops.start_scheduler()
        wait_for(lambda: bound_indexes(tenant, "el") == {"0", "1", "2", "3"}, 60,
                 what="el on all 4 nodes, 2 of them on b's quota")
        first = {name: pod["spec"]["nodeName"] for name, pod in live_pods(tenant, "el").items()
                 if pod["metadata"]["labels"].get(INDEX_LABEL) in ("0", "1")}
        above = sorted(name for name in live_pods(tenant, "el") if name not in first)
        scheduled = wait_for(lambda: sorted({e.get("note") or "" for e in tenant.events(
            "Scheduled") if f"queue {a})" in (e.get("note") or "")}), 30,
            what="el's Scheduled events")  # the same note on several objects
        assert len(scheduled) == 1 and (
            f"started with 2 of 2 optional members (minimum 2); members {', '.join(above)} "
            f"run above {a}'s quota and may be taken back ({FIELD})") in scheduled[0], scheduled

        indexed_job(tenant, "bj", 2, queue=b)
        wait_for(lambda: len(bound_indexes(tenant, "bj")) == 2, 60, what="b's Job bound whole")

        def semi_events(kind: str) -> dict[str, str]:
            """The Preempted events naming the policy on objects of *kind*: note by name."""
            return {e["regarding"]["name"]: e.get("note") or ""
                    for e in tenant.events("Preempted") if e["regarding"]["kind"] == kind
                    and FIELD in (e.get("note") or "")}

        def on_each_above() -> dict[str, str]:
            found = semi_events("Pod")
            return found if set(found) == set(above) else {}
        events = wait_for(on_each_above, 30, what="a Preempted event on each member above")
        (note,) = set(events.values())
        told = wait_for(lambda: semi_events("Job"), 30, what="a Preempted event on el")
        assert set(told) == {"el"} and "(2 pod(s) evicted" in told["el"], told
        assert f"members {', '.join(above)} above the gang's minimum 2" in note, note
        assert (f"queue {a} is semi-preemptible ({FIELD}): these members run above its "
                f"quota in pool {tenant.pool}, which queue {b} reclaims; the gang's minimum "
                f"runs within the quota and is kept") in note, note

        # The Job controller recreates indexes 2 and 3: they wait to grow again, while the
        # minimum stays where it was bound (never rebound) and b keeps its whole Job.
        wait_for(lambda: len(live_pods(tenant, "el")) == 4, 60, what="el's members recreated")
        recreated = {n: p for n, p in live_pods(tenant, "el").items() if n not in first}
        assert {p["metadata"]["labels"].get(INDEX_LABEL) for p in recreated.values()} == {
            "2", "3"}
        waiting = sorted(recreated)
        wait_for(lambda: all(unschedulable_message(live_pods(tenant, "el").get(n, {}))
                             for n in waiting), 30, what="a reason on each new member")
        for name in waiting:
            message = unschedulable_message(live_pods(tenant, "el")[name])
            assert "growing: 0 of 2 optional members placed" in message, message
        runner.run_cycles(3)
        pods = live_pods(tenant, "el")
        assert {n: pods[n]["spec"].get("nodeName") for n in first} == first
        assert bound_indexes(tenant, "el") == {"0", "1"}
        assert len(bound_indexes(tenant, "bj")) == 2
        assert not {e["regarding"]["name"] for e in tenant.events("Preempted")} & set(first)
        watch.seen_bound(first)
        assert not set(watch.rebinds()) & set(first), watch.rebinds()
