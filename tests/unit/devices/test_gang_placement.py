"""Whole gangs with device claims (issue 35, item 3): every member of a gang placed gets its
claim's devices on its own node, decided as ``DEVICES`` pre-bind decisions reserved for its
pod, or no member is placed at all; no device is handed out twice, nor one some other claim
(kube-scheduler's, say) holds. The world is made of the dev cluster's real objects
(``world``) fed through the informers' handlers."""

from __future__ import annotations

import copy
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.decide.plan import Bind, CyclePlan, ReasonCategory
from scheduler.kube.read import informer
from scheduler.kube.read.informer import EventType
from scheduler.model import prebind
from scheduler.model.devices import GPUS_PER_DEVICE_ANNOTATION
from scheduler.model.prebind import PreBind, PreBindKind
from scheduler.model.workloads import LAST_CHECKPOINT_ANNOTATION
from tests.unit.devices.world import H100, NS, World, claim_for, job, job_pod, template


def devices_of(plan: CyclePlan) -> list[str]:
    return [d for b in plan.binds for p in b.placement.prebinds for d in p.devices]


def by_pod(bind: Bind) -> dict[str, PreBind]:
    """The gang's DEVICES decisions by the pod each is reserved for."""
    out: dict[str, PreBind] = {}
    for p in bind.placement.prebinds:
        assert p.kind is PreBindKind.DEVICES
        for c in p.consumers:
            out[c.name] = p
    return out


def check_whole(plan: CyclePlan, each: dict[str, int]) -> None:
    """Every bound gang's members have their own claim allocated on the node they bind to,
    with as many devices as asked, reserved for them; no device twice."""
    used = Counter(devices_of(plan))
    assert all(n == 1 for n in used.values()), used
    for bind in plan.binds:
        decisions = by_pod(bind)
        job = bind.gang_id.split("/", 1)[1]
        assert len(decisions) == len(bind.pod_nodes)
        for ref, node in bind.pod_nodes:
            d = decisions[ref.name]
            assert d.claim == f"{NS}/{ref.name}-gpu" and d.target == node
            assert d.allocation is not None
            assert len(d.devices) == each[job]
            assert all(r.device.pool == node for r in d.allocation.results)
            assert [c.uid for c in d.consumers] == [ref.uid]


def test_two_gangs_competing_for_six_devices_one_starts_whole_the_other_waits_whole() -> None:
    """kube-scheduler would give each of two 4-pod Jobs some of the 6 devices: here the
    first gets 4 on the two nodes and the second waits with a reason, no pod of it bound."""
    w = World(nodes=2, devices=3)
    w.job("first", 4)
    w.job("second", 4)
    plan = w.decide()
    assert [b.gang_id for b in plan.binds] == [f"{NS}/first"]
    check_whole(plan, {"first": 1})
    assert sorted((a.node, a.count) for a in plan.binds[0].placement.assignments) == [
        ("h100-0000", 3), ("h100-0001", 1)]
    reason = plan.pending[f"{NS}/second"]
    assert reason.category is ReasonCategory.DEVICES
    assert "4 members need devices for their claims, the free devices of the nodes with " \
           "room serve 2" in reason.message, reason.message


def test_members_asking_two_devices_each_share_nodes_without_sharing_devices() -> None:
    w = World(nodes=2, devices=4)
    w.job("train", 4, devices_each=2)
    plan = w.decide()
    check_whole(plan, {"train": 2})
    assert len(devices_of(plan)) == 8


def test_devices_another_claim_holds_are_never_handed_out() -> None:
    """A claim allocated by someone else (kube-scheduler's pod) holds 6 of node 0's 8
    devices: the gang's 4 members go 2 on node 0 and 2 on node 1, never onto those 6."""
    w = World(nodes=2, devices=8)
    tmpl = template("other", 6)
    other = claim_for(job_pod("other", 0), tmpl)
    other["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "h100-0000",
         "device": f"gpu-{i}"} for i in range(6)]}}}
    w.add(informer.RESOURCE_CLAIMS, other)
    w.job("train", 4, devices_each=1)
    plan = w.decide()
    check_whole(plan, {"train": 1})
    taken = {f"gpu.example.com/h100-0000/gpu-{i}" for i in range(6)}
    assert not taken & set(devices_of(plan))
    assert sorted((a.node, a.count) for a in plan.binds[0].placement.assignments) == [
        ("h100-0000", 2), ("h100-0001", 2)]


def test_claims_not_made_yet_keep_the_whole_gang_waiting_by_name() -> None:
    w = World(nodes=2, devices=8)
    w.job("train", 2, made=False)
    plan = w.decide()
    assert not plan.binds
    reason = plan.pending[f"{NS}/train"]
    assert reason.category is ReasonCategory.DEVICES
    assert reason.message.startswith(f"pod {NS}/train-0: spec.resourceClaims entry gpu "
                                     "(template train-gpus): its ResourceClaim does not "
                                     "exist yet"), reason.message


def test_nodes_without_slices_are_named() -> None:
    w = World(nodes=2, devices=0)
    w.job("train", 2)
    reason = w.decide().pending[f"{NS}/train"]
    assert reason.category is ReasonCategory.DEVICES
    assert "2 by devices: no ResourceSlice offers devices on the node" in reason.message


def test_a_shared_claim_is_allocated_once_and_keeps_its_users_on_its_node() -> None:
    """Every pod names one claim (``resourceClaimName``): it gets one device, once, and
    every member goes where that device is (node-local), reserved for all of them."""
    w = World(nodes=2, devices=8)
    tmpl = template("shared", 1)
    shared = claim_for(job_pod("x", 0), tmpl)
    shared["metadata"]["name"] = "shared"
    shared["metadata"].pop("ownerReferences")
    w.add(informer.RESOURCE_CLAIMS, shared)
    w.add(informer.JOBS, job("s", 3))
    for i in range(3):
        pod = job_pod("s", i, made=False)
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
        w.add(informer.PODS, pod)
    plan = w.decide()
    (bind,) = plan.binds
    (decision,) = bind.placement.prebinds
    assert decision.claim == f"{NS}/shared" and len(decision.devices) == 1
    assert sorted(c.name for c in decision.consumers) == ["s-0", "s-1", "s-2"]
    assert {node for _, node in bind.pod_nodes} == {decision.target}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(1, 3), devices=st.integers(0, 6),
       jobs=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1,
                     max_size=3))
def test_never_a_device_twice_never_a_partial_gang(nodes: int, devices: int,
                                                   jobs: list[tuple[int, int]]) -> None:
    w = World(nodes=nodes, devices=devices)
    each = {}
    for i, (pods, per_pod) in enumerate(jobs):
        w.job(f"j{i}", pods, devices_each=per_pod)
        each[f"j{i}"] = per_pod
    plan = w.decide()
    check_whole(plan, each)
    bound = {b.gang_id for b in plan.binds}
    assert len(devices_of(plan)) <= nodes * devices
    for i, (pods, _) in enumerate(jobs):
        gang = f"{NS}/j{i}"
        assert (gang in bound) != (gang in plan.pending)
        if gang in bound:
            assert sum(a.count for b in plan.binds if b.gang_id == gang
                       for a in b.placement.assignments) == pods
        else:
            assert plan.pending[gang].category is ReasonCategory.DEVICES


def _class_annotated(value: str) -> dict[str, object]:
    cls = copy.deepcopy(H100)
    cls["metadata"]["annotations"] = {GPUS_PER_DEVICE_ANNOTATION: value}
    return cls


def test_quota_charges_claimed_devices_in_the_units_of_their_class() -> None:
    """A DRA gang requests no nvidia.com/gpu, yet never passes quota for free: each device
    counts one GPU of the pool it lands in, or what its DeviceClass's annotation says."""
    w = World(nodes=2, devices=8)
    w.job("a", 4)
    reason = w.decide(quota=3).pending[f"{NS}/a"]
    assert reason.category is ReasonCategory.QUOTA
    assert "4 nvidia.com/gpu needed, at most 3" in reason.message, reason.message
    w.handlers[informer.DEVICE_CLASSES](EventType.MODIFIED, _class_annotated("2"))
    reason = w.decide(quota=7).pending[f"{NS}/a"]
    assert "8 nvidia.com/gpu needed, at most 7" in reason.message, reason.message
    plan = w.decide(quota=8)
    (bind,) = plan.binds
    (gang,) = w.cache.cycle_input(0).gangs.pending
    assert [r.get("nvidia.com/gpu") for _, r in bind.placement.charges(gang)] == [8]


def test_a_claim_its_members_share_is_charged_once_split_among_them() -> None:
    """Four pods of a Job naming one 4-device claim use 4 GPUs, not 16: quota charges the
    shared claim once, a quarter per member (it once charged it whole to each)."""
    w = World(nodes=1, devices=8)
    shared = claim_for(job_pod("x", 0), template("quad", 4))
    shared["metadata"] = {"name": "quad", "namespace": NS, "uid": "claim-quad",
                          "resourceVersion": "1"}
    w.add(informer.RESOURCE_CLAIMS, shared)
    w.add(informer.JOBS, job("team", 4))
    for i in range(4):
        pod = job_pod("team", i)
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "quad"}]
        pod["status"].pop("resourceClaimStatuses", None)
        w.add(informer.PODS, pod)
    reason = w.decide(quota=3).pending[f"{NS}/team"]
    assert "4 nvidia.com/gpu needed, at most 3" in reason.message, reason.message
    (bind,) = w.decide(quota=4).binds
    (decision,) = bind.placement.prebinds
    assert decision.claim == f"{NS}/quad" and len(decision.devices) == 4


def test_a_malformed_units_annotation_keeps_the_claims_waiting_by_name() -> None:
    w = World(nodes=1, devices=8)
    w.handlers[informer.DEVICE_CLASSES](EventType.MODIFIED, _class_annotated("half"))
    w.job("a", 1)
    reason = w.decide().pending[f"{NS}/a"]
    assert reason.category is ReasonCategory.DEVICES
    assert (f"metadata.annotations[{GPUS_PER_DEVICE_ANNOTATION}]: 'half' is not a whole "
            "number of GPUs") in reason.message, reason.message


def test_a_gang_gone_from_a_snapshot_takes_its_claims_devices_with_it() -> None:
    """What a preemption or an estimate supposes (``Snapshot.without``): the gang's pods
    leave their claims' ``reservedFor``, and a claim no pod uses holds no device; a claim
    another pod still uses keeps its devices."""
    w = World(nodes=1, devices=4)
    w.job("first", 2)
    plan = w.decide()
    (bind,) = plan.binds
    inp = w.cache.cycle_input(0)
    (gang,) = inp.gangs.pending
    running = bind.placement.as_running(gang, 0.0)
    snap = inp.snapshot.with_volumes(prebind.assume(inp.snapshot.volumes,
                                                    bind.placement.prebinds))
    snap = snap.with_running(running)
    assert len(snap.volumes.devices.taken()) == 2
    assert snap.without_gangs([gang.id]).volumes.devices.taken() == frozenset()
    one = snap.volumes.devices.released([gang.roles[0].pods[0].uid])
    assert len(one.taken()) == 1
    assert snap.volumes.devices.released(["no-such-pod"]) is snap.volumes.devices


def test_a_podgroup_claim_is_allocated_once_for_the_group_and_reserved_for_it() -> None:
    """Kubernetes' own PodGroup (``scheduling.k8s.io``) may hold claims its pods share
    (``spec.resourceClaims``, DRAWorkloadResourceClaims): a pod entry identical to the
    group's uses the group's claim. Here each of 3 pods also has its own claim from a
    template: 3 own claims and the group's 2 devices, all on one node (the group claim's
    devices are node-local), the group claim reserved for the PodGroup."""
    w = World(nodes=2, devices=8)
    group_claim = claim_for(job_pod("x", 0), template("pair", 2))
    group_claim["metadata"] = {"name": "grp", "namespace": NS, "uid": "claim-grp",
                               "resourceVersion": "1"}
    w.add(informer.RESOURCE_CLAIMS, group_claim)
    own = template("own", 1)
    w.add(informer.CLAIM_TEMPLATES, own)
    w.add(informer.NATIVE_PODGROUPS[0], {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": NS, "uid": "pg-uid", "resourceVersion": "1",
                     "creationTimestamp": "2033-05-18T03:00:00Z"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                 "resourceClaims": [{"name": "shared", "resourceClaimName": "grp"}]}})
    for i in range(3):
        pod = job_pod("pg", i, tmpl="own")
        pod["metadata"].pop("ownerReferences")
        pod["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
        pod["spec"]["resourceClaims"].append({"name": "shared", "resourceClaimName": "grp"})
        w.add(informer.RESOURCE_CLAIMS, claim_for(pod, own))
        w.add(informer.PODS, pod)
    plan = w.decide()
    (bind,) = plan.binds
    decisions = {d.claim: d for d in bind.placement.prebinds}
    shared = decisions.pop(f"{NS}/grp")
    assert len(shared.devices) == 2
    assert [(c.api_group, c.resource, c.name, c.uid) for c in shared.consumers] == [
        ("scheduling.k8s.io", "podgroups", "pg", "pg-uid")]
    assert sorted(decisions) == [f"{NS}/pg-{i}-gpu" for i in range(3)]
    assert {node for _, node in bind.pod_nodes} == {shared.target}
    devices = [d for p in bind.placement.prebinds for d in p.devices]
    assert len(devices) == len(set(devices)) == 5


def test_a_podgroup_claim_from_a_template_waits_for_the_group_s_claim() -> None:
    w = World(nodes=1, devices=8)
    w.add(informer.CLAIM_TEMPLATES, template("pair", 2))
    w.add(informer.NATIVE_PODGROUPS[0], {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": NS, "uid": "pg-uid", "resourceVersion": "1"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}},
                 "resourceClaims": [{"name": "shared", "resourceClaimTemplateName": "pair"}]}})
    pod = job_pod("pg", 0, made=False)
    pod["metadata"].pop("ownerReferences")
    pod["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
    pod["spec"]["resourceClaims"] = [{"name": "shared", "resourceClaimTemplateName": "pair"}]
    w.add(informer.PODS, pod)
    reason = w.decide().pending[f"{NS}/pg"]
    assert reason.category is ReasonCategory.DEVICES
    assert "PodGroup pg's ResourceClaim does not exist yet" in reason.message, reason.message


def run_first(w: World, pods: int, priority: int = 0) -> Bind:
    """Job ``first`` decided, bound and its claims allocated, as the watches then show it."""
    w.job("first", pods)
    (bind,) = w.decide().binds
    allocations = {d.claim: d for d in bind.placement.prebinds}
    for ref, node in bind.pod_nodes:
        pod = job_pod("first", int(ref.name.rsplit("-", 1)[1]), "first-gpus")
        pod["spec"]["nodeName"] = node
        pod["spec"]["priority"] = priority
        pod["status"]["phase"] = "Running"
        claim = claim_for(pod, template("first-gpus", 1))
        allocation = allocations[f"{NS}/{claim['metadata']['name']}"].allocation
        assert allocation is not None
        claim["status"] = {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": r.device.pool,
                 "device": r.device.device} for r in allocation.results]}},
            "reservedFor": [{"resource": "pods", "name": ref.name, "uid": ref.uid}]}
        w.handlers[informer.RESOURCE_CLAIMS](EventType.MODIFIED, claim)
        w.handlers[informer.PODS](EventType.MODIFIED, pod)
    return bind


def test_a_running_gang_updated_in_the_cache_keeps_its_devices() -> None:
    """Regression (seen on the dev cluster: two gangs on the same devices): the cache
    replaces a running gang whose pods changed by taking it out of its snapshot and putting
    it back; that is not the gang ending, and its claims' devices must stay taken."""
    w = World(nodes=1, devices=4)
    bind = run_first(w, 4)
    assert len(w.cache.cycle_input(1.0).snapshot.volumes.devices.taken()) == 4
    pod = job_pod("first", 0, "first-gpus")
    pod["spec"]["nodeName"] = bind.pod_nodes[0][1]
    pod["status"]["phase"] = "Running"
    pod["metadata"]["annotations"][LAST_CHECKPOINT_ANNOTATION] = "2033-05-18T03:30:00Z"
    w.handlers[informer.PODS](EventType.MODIFIED, pod)  # the running gang changes
    assert len(w.cache.cycle_input(2.0).snapshot.volumes.devices.taken()) == 4
    w.job("second", 1)
    reason = w.decide().pending[f"{NS}/second"]
    assert reason.category is ReasonCategory.DEVICES


def urgent_job(w: World, pods: int) -> None:
    """Job ``urgent`` of *pods* pods, one device each, whose pods outrank the running ones."""
    w.job("urgent", pods)
    for i in range(pods):
        pod = job_pod("urgent", i, "urgent-gpus")
        pod["spec"]["priority"] = 1000
        w.handlers[informer.PODS](EventType.MODIFIED, pod)


def test_a_gang_short_of_devices_preempts_a_lower_priority_gang_holding_them() -> None:
    """Devices held by a running gang of lower priority: the victim search proves that
    with its claims released the pending gang gets every member's devices, and evicts it
    whole (a nomination for the preemptor); without the priority it waits for devices."""
    w = World(nodes=1, devices=4)
    run_first(w, 4, priority=0)
    urgent_job(w, 2)
    plan = w.decide()
    assert [e.victim for e in plan.evictions] == [f"{NS}/first"]
    assert [n.gang_id for n in plan.nominations] == [f"{NS}/urgent"]
    reason = plan.pending[f"{NS}/urgent"]
    assert reason.category is ReasonCategory.PREEMPTION_PENDING, reason


def test_a_victim_search_counts_the_devices_already_free_with_those_it_frees() -> None:
    """6 devices wanted on a node of 8: 4 are free, a lower-priority gang holds the other 4.
    Neither alone is enough, together they are: the search must count both (it once
    counted only the devices a victim frees, found 4 < 6, and never tried). The node has
    no ``nvidia.com/gpu``: its GPUs are only devices."""
    w = World(nodes=1, devices=8, gpus=0)
    run_first(w, 4, priority=0)
    urgent_job(w, 6)
    plan = w.decide()
    assert [e.victim for e in plan.evictions] == [f"{NS}/first"]
    assert [n.gang_id for n in plan.nominations] == [f"{NS}/urgent"]


def test_a_request_no_node_can_meet_is_told_as_devices_not_as_cpu() -> None:
    """Regression: with the free-device order in the candidate search, nodes short of
    devices were dropped before the device rule could say so, and the gang read "free
    capacity holds only 0 (64 cpu free, in pieces too small)"."""
    w = World(nodes=1, devices=2, gpus=0)
    w.job("short", 2, devices_each=3)
    reason = w.decide().pending[f"{NS}/short"]
    assert reason.category is ReasonCategory.DEVICES, reason
    assert "needs 3 device(s)" in reason.message and "2 free match" in reason.message


def test_a_gang_short_of_devices_waits_as_for_capacity() -> None:
    w = World(nodes=1, devices=4)
    run_first(w, 4, priority=1000)
    w.job("later", 2)
    plan = w.decide()
    assert not plan.evictions
    reason = plan.pending[f"{NS}/later"]
    assert reason.category is ReasonCategory.DEVICES, reason
    assert "0 free match, 4 more held by other claims" in reason.message, reason.message
