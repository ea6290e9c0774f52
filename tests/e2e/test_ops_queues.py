"""Queues live on a real control plane: borrowed quota reclaimed, weighted sharing under
contention, edits applied at once, invalid edits refused with the last good version in force,
and the status ``kubectl get queues`` prints.

Each test builds its own Queue tree (named after its tag) in its own node pool, and starts
its own scheduler once the tree and, where the order matters, the backlog exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import GPU, PodWatch, unschedulable_message
from tests.e2e.ops_support import Ops, ops_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def status_is(ops: Ops, queue: str, **want: Any) -> dict[str, Any]:
    """The queue's status once every field in *want* has that value ({} until then)."""
    status = ops.queue_status(queue)
    return status if all(status.get(k) == v for k, v in want.items()) else {}


def test_a_queue_reclaims_the_quota_it_lent(ops: Ops) -> None:
    ops.tenant.create_nodes(2, gpus=8)
    ops.queue("org")
    lender = ops.queue("a", gpus=8, parent="org",
                       preemption={"reclaimFromOthers": "Any", "minRuntimeSeconds": 0})
    borrower = ops.queue("b", gpus=8, parent="org", preemption={"minRuntimeSeconds": 0})
    with PodWatch(ops.cp, ops.ns) as watch:
        ops.start_scheduler()
        b1, b2 = ops.gang("b1", 2, 4, borrower), ops.gang("b2", 2, 4, borrower)
        wait_for(lambda: ops.tenant.all_bound(b1 + b2), 30, what="team b on all 16 GPUs")
        status = wait_for(lambda: status_is(ops, borrower, allocatedGPUs=16), 30,
                          what="b's status: 16 GPUs")
        assert status["nominalGPUs"] == 8
        assert status["pools"][0]["borrowed"] == {GPU: 8}, status["pools"]
        a1 = ops.gang("a1", 2, 4, lender)
        wait_for(lambda: ops.tenant.all_bound(a1), 30, what="a's gang started on reclaimed quota")
        pods = ops.tenant.pods()

        def running(name: str) -> bool:
            """Still allocated its GPUs: not deleted, not being deleted, not exited (an evicted
            pod can linger as Failed for a moment after its container stopped)."""
            pod = pods.get(name)
            return (pod is not None and not pod["metadata"].get("deletionTimestamp")
                    and pod.get("status", {}).get("phase") not in ("Failed", "Succeeded"))

        left = {g: [n for n in names if running(n)] for g, names in (("b1", b1), ("b2", b2))}
        assert sorted(len(v) for v in left.values()) == [0, 2], left  # one whole gang went
        kept = next(g for g, v in left.items() if v)
        assert ops.tenant.all_bound(left[kept])
        wait_for(lambda: status_is(ops, borrower, allocatedGPUs=8), 30, what="b back to 8")
        wait_for(lambda: status_is(ops, lender, allocatedGPUs=8, admittedGangs=1), 30,
                 what="a is allocated its 8")
        assert watch.rebinds() == {}


def test_two_queues_under_contention_share_by_weight(ops: Ops) -> None:
    ops.tenant.create_nodes(2, gpus=8)
    org = ops.queue("org", gpus=16)
    light = ops.queue("light", gpus=0, parent="org", weight=1)
    heavy = ops.queue("heavy", gpus=0, parent="org", weight=3)
    for i in range(16):  # both backlogs exist before the scheduler looks
        ops.pod(f"light-{i:02d}", 1, light)
        ops.pod(f"heavy-{i:02d}", 1, heavy)
    runner = ops.start_scheduler()
    names = [f"{q}-{i:02d}" for q in ("light", "heavy") for i in range(16)]
    wait_for(lambda: len(ops.tenant.bound(names)) == 16, 30, what="16 GPUs allocated")
    runner.run_cycles()  # nothing more may start
    bound = ops.tenant.bound(names)
    got = {q: sum(n.startswith(q) for n in bound) for q in ("light", "heavy")}
    print(f"weights 1:3 on 16 GPUs -> {got}")
    assert len(bound) == 16 and 3 <= got["light"] <= 5, got  # 1:3 of 16 is 4:12
    st = wait_for(lambda: status_is(ops, light, allocatedGPUs=got["light"]), 30,
                  what="light's status")
    assert (st["fairShare"], st["usageShare"]) == (0.25, got["light"] / 16)
    assert st["pendingGangs"] == 16 - got["light"] and st["admittedGangs"] == got["light"]
    st = wait_for(lambda: status_is(ops, heavy, allocatedGPUs=got["heavy"]), 30,
                  what="heavy's status")
    assert (st["fairShare"], st["usageShare"]) == (0.75, got["heavy"] / 16)
    # kubectl get queues: the CRD's printer columns, filled from that status.
    def filled() -> dict[str, dict[str, Any]]:
        table = ops.queue_table()
        return table if table[org]["GPUs"] == 16 and table[org]["Pending"] == 16 else {}

    table = wait_for(filled, 30, what="org's row")
    assert {k: table[org][k] for k in ("GPUs", "Nominal", "Pending", "Admitted", "Valid")} == {
        "GPUs": 16, "Nominal": 16, "Pending": 16, "Admitted": 16, "Valid": "True"}
    row = table[light]
    assert (row["Weight"], row["GPUs"], row["Nominal"], row["Valid"]) == (
        1, got["light"], 0, "True")
    assert (row["Fair-Share"], row["Usage"], row["Parent"]) == (0.25, got["light"] / 16, org)


def test_a_queue_update_applies_live_and_an_invalid_one_is_refused(ops: Ops) -> None:
    ops.tenant.create_nodes(2, gpus=8)
    queue = ops.queue("q", gpus=4)
    runner = ops.start_scheduler()
    g1 = ops.gang("g1", 1, 8, queue)
    wait_for(lambda: "Quota" in unschedulable_message(ops.tenant.pods()[g1[0]]), 30,
             what="g1 waiting for quota")
    wait_for(lambda: status_is(ops, queue, pendingGangs=1, nominalGPUs=4), 30,
             what="pending in status")
    # Raising the quota lets the waiting gang start.
    ops.patch_queue(queue, {"quotas": [{"pool": ops.tenant.pool, "nominal": {GPU: 8}}]})
    wait_for(lambda: ops.tenant.all_bound(g1), 30, what="g1 bound after the quota rose")
    st = wait_for(lambda: status_is(ops, queue, nominalGPUs=8, allocatedGPUs=8,
                                    pendingGangs=0, observedGeneration=2), 30,
                  what="status after the update")
    assert ops.valid_condition(queue)["status"] == "True", st
    # An edit the scheduler refuses: an unknown parent (with more quota, which must not apply).
    ops.patch_queue(queue, {"parent": ops.name("missing"),
                            "quotas": [{"pool": ops.tenant.pool, "nominal": {GPU: 16}}]})
    cond = wait_for(lambda: c if (c := ops.valid_condition(queue)).get("status") == "False"
                    else {}, 30, what="Valid=False")
    assert cond["reason"] == "InvalidSpec"
    assert "spec.parent" in cond["message"] and ops.name("missing") in cond["message"], cond
    assert "last valid version stays in force" in cond["message"]
    assert ops.queue_status(queue)["observedGeneration"] == 3
    assert ops.queue_table()[queue]["Valid"] == "False"
    assert (runner.live.metrics.registry.get_sample_value("gang_scheduler_invalid_queues")
            or 0) >= 1
    g2 = ops.gang("g2", 1, 8, queue)
    wait_for(lambda: "Quota" in unschedulable_message(ops.tenant.pods()[g2[0]]), 30,
             what="g2 kept out by the last good quota (8)")
    runner.run_cycles()  # several chances to bind it on the edited quota
    assert ops.tenant.bound(g2) == []
    # Fixing the edit applies it.
    ops.patch_queue(queue, {"parent": None})
    wait_for(lambda: ops.valid_condition(queue).get("status") == "True", 30, what="valid again")
    wait_for(lambda: ops.tenant.all_bound(g2), 30, what="g2 bound under the fixed quota (16)")
