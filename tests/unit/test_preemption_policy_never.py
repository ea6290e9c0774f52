"""``spec.preemptionPolicy: Never``: ordered by priority as usual, but never evicts anyone.

From the pod JSON (``convert``) through the gang (``grouping``: any member with Never makes
the gang Never) to the decision (no evictions, and a reason that says preemption would have
helped but is disabled).
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from policies.fit import Applicant
from policies.preemption import candidates
from policies.quota import QuotaLedger, QuotaTree
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.kube.read import convert
from scheduler.model import Gang, PodRequirements, Resources
from scheduler.model.pods import PreemptionPolicy
from scheduler.model.workloads import PodInfo
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NEVER, LOWER = PreemptionPolicy.NEVER, PreemptionPolicy.PREEMPT_LOWER_PRIORITY
POD_JSON = Path(__file__).parent / "kube" / "fixtures" / "pod.json"


def never(g: Gang) -> Gang:
    return replace(g, preemption_policy=NEVER)


def pod_json(policy: Any) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(json.loads(POD_JSON.read_text()))
    if policy is None:
        obj["spec"].pop("preemptionPolicy", None)
    else:
        obj["spec"]["preemptionPolicy"] = policy
    return obj


@pytest.mark.parametrize(("policy", "want"), [
    (None, LOWER), ("PreemptLowerPriority", LOWER), ("Never", NEVER)])
def test_convert_reads_spec_preemption_policy(policy: str | None,
                                              want: PreemptionPolicy) -> None:
    assert convert.pod_from_json(pod_json(policy)).preemption_policy is want


def test_convert_rejects_an_unknown_policy_naming_the_field() -> None:
    with pytest.raises(convert.ConversionError) as err:
        convert.pod_from_json(pod_json("Sometimes"))
    assert err.value.path == "spec.preemptionPolicy" and "Sometimes" in str(err.value)


def test_model_defaults_to_preempt_lower_priority() -> None:
    g = gang("x")
    assert g.preemption_policy is LOWER and g.may_preempt
    assert not replace(g, preemption_policy=NEVER).may_preempt


def _pod(name: str, policy: PreemptionPolicy) -> PodInfo:
    req = PodRequirements(Resources({"nvidia.com/gpu": 8}))
    return PodInfo(uid=f"uid-{name}", namespace="ns", name=name, requirements=req,
                   scheduler_name="gang-scheduler",
                   annotations={"scheduling.k8s.io/group-name": "g",
                                "gangscheduler.io/min-member": "2"},
                   preemption_policy=policy)


@pytest.mark.parametrize(("policies_of_members", "want"), [
    ((LOWER, LOWER), LOWER), ((NEVER, NEVER), NEVER), ((LOWER, NEVER), NEVER)])
def test_a_gang_is_never_if_any_member_is(policies_of_members: tuple[PreemptionPolicy, ...],
                                          want: PreemptionPolicy) -> None:
    pods = [_pod(f"w{i}", p) for i, p in enumerate(policies_of_members)]
    gangs = build_gangs(pods, {}, {}, GroupingConfig()).pending
    assert [(g.id, g.preemption_policy) for g in gangs] == [("ns/g", want)]


# The decision ------------------------------------------------------------------------------
TEAMS = (queue("research"), queue("a", "research", quota={"a100": 16}, reclaim="Never"),
         queue("b", "research", quota={"a100": 16}))
#: a's two low-priority gangs and b's borrowed two: the cluster (4 nodes) is full.
RUNNING = ([running(gang(f"a{i}", "a", priority=0), {f"a100-{i:04d}": 1}) for i in range(2)]
           + [running(gang(f"b{i}", "b"), {f"a100-{i:04d}": 1}) for i in range(2, 4)])
RECLAIM = (queue("research"), queue("a", "research", quota={"a100": 16}),
           queue("b", "research", quota={"a100": 16}))
B_BORROWS = [running(gang(f"b{i}", "b"), {f"a100-{i:04d}": 1}) for i in range(4)]


def run(pending: list[Gang], queues: tuple[Any, ...] = TEAMS,
        busy: list[Any] = RUNNING, **policy: Any) -> CyclePlan:
    return decide(Snapshot(nodes("a100", 4), busy), pending,
                  policies(*queues, reservation=False, **policy), 10_000.0, solver=SOLVE)


@pytest.mark.parametrize(("name", "preemptor", "queues", "busy", "victims"), [
    ("within queue, lower priority", gang("a9", "a", priority=5), TEAMS, RUNNING, ["ns/a0"]),
    ("reclaim from a borrowing queue", gang("a9", "a", pods=2), RECLAIM, B_BORROWS,
     ["ns/b0", "ns/b1"]),
])
def test_never_does_not_evict_where_preempt_lower_priority_does(
        name: str, preemptor: Gang, queues: tuple[Any, ...], busy: list[Any],
        victims: list[str]) -> None:
    preempting = run([preemptor], queues, busy)
    assert sorted(e.victim for e in preempting.evictions) == victims, name
    assert preempting.pending[preemptor.id].category is ReasonCategory.PREEMPTION_PENDING

    plan = run([never(preemptor)], queues, busy)
    assert not plan.evictions and not plan.nominations, name
    reason = plan.pending[preemptor.id]
    assert reason.category is not ReasonCategory.PREEMPTION_PENDING
    assert ("preemption is disabled by its preemptionPolicy (Never): evicting "
            f"{len(victims)} gang(s) would let it start now") in reason.message, reason


def test_never_says_nothing_about_preemption_when_it_would_not_help() -> None:
    # Equal priority within the queue and reclaim off: no victims either way.
    plan = run([never(gang("a9", "a", priority=0))])
    assert not plan.evictions
    assert "preemptionPolicy" not in plan.pending["ns/a9"].message


def test_never_still_orders_by_priority() -> None:
    """Room for one gang: the Never gang with the higher priority goes first."""
    busy = RUNNING[1:]  # a100-0000 is free
    low = gang("a-low", "a", priority=0, created=0.0)
    high = never(gang("a-high", "a", priority=9, created=5.0))
    plan = run([low, high], busy=busy)
    assert [b.gang_id for b in plan.binds] == ["ns/a-high"]
    assert not plan.evictions


def test_same_shape_gangs_do_not_share_a_verdict_across_policies() -> None:
    """The failure memo must not hand a Never gang's reason to a preempting twin."""
    plan = run([never(gang("a8", "a", priority=5, created=1.0)),
                gang("a9", "a", priority=5, created=2.0)])
    assert [e.victim for e in plan.evictions] == ["ns/a0"]
    assert plan.pending["ns/a9"].category is ReasonCategory.PREEMPTION_PENDING


def test_candidates_skip_a_never_preemptor() -> None:
    pol = policies(*TEAMS)
    snap = Snapshot(nodes("a100", 4), RUNNING)
    ledger = QuotaLedger.empty(QuotaTree.build(pol.queues))
    for rg in RUNNING:
        ledger = ledger.charge(rg.gang.queue, "a100", rg.usage)
    q = pol.queues.queues["a"]
    g = gang("a9", "a", priority=5)
    bounds = {"a100": Resources({"nvidia.com/gpu": 8})}
    args: tuple[Any, ...] = (snap, ledger, pol.queues, 10_000.0, frozenset())
    assert [c.id for c in candidates(Applicant(g, q, bounds), *args)] == ["ns/a0", "ns/a1"]
    assert candidates(Applicant(never(g), q, bounds), *args) == []
