"""Pre-bind decisions, kind by kind: each is assumed in the catalog, recognised once the
watch shows it, written and undone on the apiserver (the fake the writer's own tests use);
the JSON of ``DEVICES`` writes, case by case, is tests/unit/kube/test_claim_allocation_writes.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.decide.plan import Bind, CyclePlan, Provision
from scheduler.feed.facts import ClusterFacts
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.lead.fence import Fenced
from scheduler.kube.write import prebind as writes
from scheduler.kube.write.actuator import KubeActuator
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.prebind import PreBindWriter
from scheduler.kube.write.status import StatusWriter
from scheduler.model import PodRef, prebind
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import (
    Allocation,
    Ask,
    ClaimSpec,
    Consumer,
    DeviceId,
    DeviceResult,
    Request,
    ResourceClaim,
)
from scheduler.model.prebind import PreBind, PreBindKind, device_names
from scheduler.model.volumes import (
    SELECTED_NODE_ANNOTATION,
    Claim,
    ClaimRef,
    Volume,
    VolumeCatalog,
    VolumePhase,
)
from scheduler.placement.types import Assignment, Placement
from tests.unit.kube.fakes import landed
from tests.unit.kube.test_prebind_writer import FakeApi

CLAIM = Claim("ns", "ckpt", uid="c1", storage_class="s")
PV = Volume("pv-1", 1 << 30, storage_class="s")
CATALOG = VolumeCatalog.of([CLAIM], [PV])
CLAIM_PATH = "/api/v1/namespaces/ns/persistentvolumeclaims/ckpt"
PV_PATH = "/api/v1/persistentvolumes/pv-1"

Json = dict[str, dict[str, Any]]
F = TypeVar("F", bound=FakeApi)


@dataclass(frozen=True)
class Case:
    decision: PreBind
    assumed: Callable[[VolumeCatalog], bool]  # the catalog once assumed
    watched: Claim  # the claim as the watch reports it once carried out
    described: str
    written: Callable[[Json], bool]  # the apiserver's objects once written
    undone: Callable[[Json], bool]  # ... and undone


CASES = {
    PreBindKind.CLAIM_REF: Case(
        PreBind("ns/ckpt", PreBindKind.CLAIM_REF, "pv-1"),
        assumed=lambda c: c.claims["ns/ckpt"].bound and c.claims["ns/ckpt"].volume_name == "pv-1"
        and c.volumes["pv-1"].claim_ref == ClaimRef("ns", "ckpt", "c1")
        and c.volumes["pv-1"].phase is VolumePhase.BOUND,
        watched=replace(CLAIM, volume_name="pv-1"),
        described="ckpt -> PV pv-1",
        written=lambda o: o[PV_PATH]["spec"]["claimRef"] == {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns",
            "name": "ckpt", "uid": "c1", "resourceVersion": "1"},
        undone=lambda o: "claimRef" not in o[PV_PATH]["spec"]),
    PreBindKind.SELECTED_NODE: Case(
        PreBind("ns/ckpt", PreBindKind.SELECTED_NODE, "node-1"),
        assumed=lambda c: c.claims["ns/ckpt"].selected_node == "node-1"
        and not c.claims["ns/ckpt"].bound and c.volumes == CATALOG.volumes,
        watched=replace(CLAIM, selected_node="node-1"),
        described="ckpt provisioned for node node-1",
        written=lambda o: o[CLAIM_PATH]["metadata"]["annotations"] == {
            SELECTED_NODE_ANNOTATION: "node-1"},
        undone=lambda o: not o[CLAIM_PATH]["metadata"].get("annotations")),
}
VOLUME_KINDS = sorted(CASES)
GPUS = Allocation(tuple(DeviceResult("gpu", DeviceId("gpu.example.com", "node-1", f"gpu-{i}"))
                        for i in range(2)))
MEMBERS = (Consumer("pods", "g-0", "u0"), Consumer("pods", "g-1", "u1"))
DEVICES = PreBind("ns/ckpt", PreBindKind.DEVICES, "node-1", device_names(GPUS), GPUS, MEMBERS)
RESOURCE_CLAIM = ResourceClaim(
    "ns", "ckpt", ClaimSpec((Request("gpu", (Ask("gpu", "gpu", count=2),)),)), uid="rc1",
    resource_version="7")
RC_PATH = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/ckpt"


def api() -> FakeApi:
    fake = FakeApi()
    fake.objects[CLAIM_PATH] = {
        "metadata": {"name": "ckpt", "uid": "c1", "resourceVersion": "1"}, "spec": {}}
    return with_resource_claim(fake)


def with_resource_claim(fake: F) -> F:
    """*fake* with the ResourceClaim ``ns/ckpt``, not allocated."""
    fake.objects[RC_PATH] = {
        "metadata": {"name": "ckpt", "namespace": "ns", "uid": "rc1", "resourceVersion": "7"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}}
    return fake


def test_every_kind_has_its_rules_and_its_writes() -> None:
    assert set(prebind.RULES) == set(PreBindKind) == set(writes.WRITES)
    assert set(CASES) | {PreBindKind.DEVICES} == set(PreBindKind)


@pytest.mark.parametrize("kind", VOLUME_KINDS)
def test_the_catalog_assumes_it(kind: PreBindKind) -> None:
    case = CASES[kind]
    assumed = prebind.assume(CATALOG, [case.decision])
    assert case.assumed(assumed) and VolumeCatalog.of([CLAIM], [PV]) == CATALOG  # a new one
    # A decision about a claim the catalog does not contain changes nothing.
    assert prebind.assume(CATALOG, [replace(case.decision, claim="ns/other")]) == CATALOG


@pytest.mark.parametrize("kind", VOLUME_KINDS)
def test_the_facts_assume_it_until_the_watch_shows_it(kind: PreBindKind) -> None:
    case = CASES[kind]
    facts = ClusterFacts(ttl=10.0)
    facts.set_claim(CLAIM.key, CLAIM)
    facts.set_volume(PV.name, PV)
    assert not prebind.shown(CLAIM, case.decision)
    facts.assume([case.decision], now=0.0)
    assert case.assumed(facts.catalog())
    facts.set_claim(CLAIM.key, replace(CLAIM, request=1))  # a change that does not show it
    assert case.assumed(facts.catalog()) and facts.next_expiry() == 10.0
    assert prebind.shown(case.watched, case.decision)
    facts.set_claim(CLAIM.key, case.watched)
    assert facts.next_expiry() is None  # the watch shows it: nothing assumed any more


@pytest.mark.parametrize("kind", VOLUME_KINDS)
def test_it_is_described(kind: PreBindKind) -> None:
    case = CASES[kind]
    assert case.decision.describe() == case.described
    assert prebind.describe([case.decision] * 2) == f"{case.described}, {case.described}"


@pytest.mark.parametrize("kind", VOLUME_KINDS)
def test_the_writer_applies_and_undoes_it(kind: PreBindKind) -> None:
    case = CASES[kind]
    fake = api()
    writer = PreBindWriter(fake)  # type: ignore[arg-type]
    out = writer.apply([case.decision], "ns/g")
    assert out.ok and out.done == (case.decision,) and case.written(fake.objects)
    assert len(fake.patches) == 1
    writer.undo(out.done, "ns/g")
    assert case.undone(fake.objects) and len(fake.patches) == 2


@pytest.mark.parametrize("kind", VOLUME_KINDS)
def test_the_writer_leaves_a_claim_bound_meanwhile(kind: PreBindKind) -> None:
    case = CASES[kind]
    fake = api()
    fake.objects[CLAIM_PATH]["spec"]["volumeName"] = "pv-9"
    out = PreBindWriter(fake).apply([case.decision], "ns/g")  # type: ignore[arg-type]
    assert not out.ok and "bound already (to pv-9)" in out.failure and fake.patches == []


def test_a_device_decision_is_assumed_shown_and_described() -> None:
    """The inventory's claim gets the allocation and the members; the facts assume it until
    the watched claim is allocated and reserved for every member."""
    assert DEVICES.describe() == ("ckpt allocated gpu.example.com/node-1/gpu-0, "
                                  "gpu.example.com/node-1/gpu-1 on node node-1")
    # A ResourceClaim and a PVC of the same name are assumed apart.
    assert {DEVICES.subject} | {c.decision.subject for c in CASES.values()} == {
        ("ResourceClaim", "ns/ckpt"), ("PersistentVolumeClaim", "ns/ckpt")}
    catalog = VolumeCatalog.of([CLAIM], [PV], devices=DeviceInventory.of(
        claims=[RESOURCE_CLAIM]))
    assumed = prebind.assume(catalog, [DEVICES])
    got = assumed.devices.claims["ns/ckpt"]
    assert got.allocation == GPUS and got.reserved_for == MEMBERS
    assert assumed.claims == catalog.claims  # the PVC of the same name is untouched
    assert prebind.assume(assumed, [DEVICES]) == assumed
    assert prebind.assume(VolumeCatalog(), [DEVICES]) == VolumeCatalog()

    facts = ClusterFacts(ttl=10.0)
    facts.set_resource_claim(RESOURCE_CLAIM.key, RESOURCE_CLAIM)
    facts.assume([DEVICES], now=0.0)
    assert facts.catalog().devices.claims["ns/ckpt"].allocation == GPUS
    half = replace(RESOURCE_CLAIM, allocation=GPUS, reserved_for=MEMBERS[:1])
    assert not prebind.shown(half, DEVICES)
    facts.set_resource_claim(RESOURCE_CLAIM.key, half)
    assert facts.next_expiry() == 10.0  # one member not reserved yet: still assumed
    done = replace(RESOURCE_CLAIM, allocation=GPUS, reserved_for=MEMBERS)
    assert prebind.shown(done, DEVICES)
    facts.set_resource_claim(RESOURCE_CLAIM.key, done)
    assert facts.next_expiry() is None
    assert facts.catalog().devices.claims["ns/ckpt"] == done


def test_the_writer_allocates_and_reserves_then_takes_it_back() -> None:
    fake = api()
    writer = PreBindWriter(fake)  # type: ignore[arg-type]
    out = writer.apply([DEVICES], "ns/g")
    assert out.ok and out.done == (DEVICES,)
    status = fake.objects[RC_PATH]["status"]
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == ["gpu-0", "gpu-1"]
    assert [e["uid"] for e in status["reservedFor"]] == ["u0", "u1"]
    assert [p for p, _ in fake.patches] == [RC_PATH, f"{RC_PATH}/status"]
    writer.undo(out.done, "ns/g")
    assert fake.objects[RC_PATH]["status"] == {}


class BindingApi(FakeApi):
    """The writer's fake, answering binds (with *bind_status*) and keeping every call."""

    def __init__(self, bind_status: int) -> None:
        super().__init__()
        self.bind_status = bind_status
        self.calls: list[tuple[str, str]] = []

    def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> Response:
        self.calls.append((method, path))
        if method == "POST" and path.endswith("/binding"):
            return Response(self.bind_status, b'{"message": "refused"}')
        if path.startswith("/api/v1/namespaces/ns/pods/") or "/events" in path:
            return Response(200, b"{}")
        return super().request(method, path, body=body, **kw)


@pytest.mark.parametrize("bind_status", [201, 403])
def test_the_actuator_writes_them_before_the_bind_and_takes_them_back_if_it_fails(
        bind_status: int) -> None:
    """The plan's pre-bind decisions reach the writer: a provision's at once, a bind's
    before any member binds (undone when the bind fails and nothing of it is kept)."""
    fake = with_resource_claim(BindingApi(bind_status))
    binder = Binder(fake, concurrency=1)  # type: ignore[arg-type]
    act = KubeActuator(fake, binder, StatusWriter(fake),  # type: ignore[arg-type]
                       EventRecorder(fake))  # type: ignore[arg-type]
    claim_ref = CASES[PreBindKind.CLAIM_REF].decision
    selected = PreBind("ns/data", PreBindKind.SELECTED_NODE, "node-1")
    pod = PodRef("ns", "g-0", "u0")
    placement = Placement("ns/g", (Assignment("worker", "node-1", 1),),
                          prebinds=(claim_ref, DEVICES))
    plan = CyclePlan(now=0.0, binds=(Bind("ns/g", "q", placement, ((pod, "node-1"),)),),
                     provisions=(Provision("ns/h", (selected,)),))
    try:
        result = landed(act.apply(plan, 0.0))
    finally:
        act.close()
        binder.close()
    patched = [p for m, p in fake.calls if m == "PATCH" and "/pods/" not in p]
    bound = fake.calls.index(("POST", "/api/v1/namespaces/ns/pods/g-0/binding"))
    assert patched[:4] == ["/api/v1/namespaces/ns/persistentvolumeclaims/data", PV_PATH,
                           RC_PATH, f"{RC_PATH}/status"]
    assert fake.calls.index(("PATCH", f"{RC_PATH}/status")) < bound
    anno = fake.objects["/api/v1/namespaces/ns/persistentvolumeclaims/data"]["metadata"]
    assert anno["annotations"] == {SELECTED_NODE_ANNOTATION: "node-1"}
    if bind_status == 201:
        assert result.bound == ("ns/g",) and result.prebinds == (selected, claim_ref, DEVICES)
        assert CASES[PreBindKind.CLAIM_REF].written(fake.objects)
        assert fake.objects[RC_PATH]["status"]["allocation"]["devices"]["results"]
    else:  # the claimRef and the allocation are taken back; the provision stands
        assert "ns/g" in result.failed and result.prebinds == (selected,)
        assert CASES[PreBindKind.CLAIM_REF].undone(fake.objects)
        assert fake.objects[RC_PATH]["status"] == {}
        assert patched[4:] == [PV_PATH, f"{RC_PATH}/status"]


class FencedBindingApi(BindingApi):
    """The apiserver behind a replica that lost the leader Lease: writes are refused."""

    def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> Response:
        if method != "GET":
            self.calls.append((method, path))
            raise Fenced(f"{method} {path}: not sent, fenced")
        return super().request(method, path, body=body, **kw)


def test_a_fenced_device_write_fails_the_gang_without_binding_it() -> None:
    """The claim writes go through the actuator's fenced client: refused, the gang does not
    bind, is reported fenced (no backoff), and nothing is taken back by this replica."""
    fake = with_resource_claim(FencedBindingApi(201))
    binder = Binder(fake, concurrency=1)  # type: ignore[arg-type]
    act = KubeActuator(fake, binder, StatusWriter(fake),  # type: ignore[arg-type]
                       EventRecorder(fake))  # type: ignore[arg-type]
    assert act.prebinds.api.client is binder.client
    pod = PodRef("ns", "g-0", "u0")
    placement = Placement("ns/g", (Assignment("worker", "node-1", 1),), prebinds=(DEVICES,))
    plan = CyclePlan(now=0.0, binds=(Bind("ns/g", "q", placement, ((pod, "node-1"),)),))
    try:
        result = landed(act.apply(plan, 0.0))
    finally:
        act.close()
        binder.close()
    assert result.failed["ns/g"].startswith("claims not bound: fenced: ")
    assert result.fenced == ("ns/g",) and result.bound == () and result.prebinds == ()
    assert not any(p.endswith("/binding") for _, p in fake.calls)
    assert [c for c in fake.calls if c[1].startswith(RC_PATH)] == [
        ("GET", RC_PATH), ("PATCH", RC_PATH)]  # refused, and no undo tried
    assert "status" not in fake.objects[RC_PATH]


def test_only_a_device_decision_carries_devices() -> None:
    with pytest.raises(ValueError, match="carries devices"):
        PreBind("ns/ckpt", PreBindKind.SELECTED_NODE, "node-1", ("gpu-0",))


_names = st.sampled_from(["a", "b", "c"])
_decisions = st.lists(st.builds(
    PreBind, st.builds(lambda n: f"ns/{n}", _names), st.sampled_from(VOLUME_KINDS),
    st.sampled_from(["pv-a", "pv-b", "node-1", "node-2"])), max_size=6)


@given(_decisions)
def test_an_assumption_is_what_the_watch_shows_and_assuming_twice_is_once(
        decisions: list[PreBind]) -> None:
    claims = [Claim("ns", n, uid=n) for n in ("a", "b")]  # "c": a claim the catalog lacks
    catalog = VolumeCatalog.of(claims, [Volume("pv-a"), Volume("pv-b")])
    assumed = prebind.assume(catalog, decisions)
    assert prebind.assume(assumed, decisions) == assumed
    last = {d.claim: d for d in decisions}
    for d in last.values():
        if d.claim in catalog.claims:  # the claim as assumed is the claim as it will show
            assert prebind.shown(assumed.claims[d.claim], d)
    assert set(assumed.claims) == set(catalog.claims)


def test_a_decision_held_by_a_flight_lasts_until_it_lands() -> None:
    """Held (a bind in flight writes it): it never lapses; once the flight lands, what it
    carried out lapses after the ttl from then, and what it did not is forgotten at once."""
    facts = ClusterFacts(ttl=10.0)
    facts.set_resource_claim(RESOURCE_CLAIM.key, RESOURCE_CLAIM)
    facts.assume([DEVICES], now=0.0, held=True)
    assert facts.next_expiry() is None and not facts.expire(now=1000.0)
    assert facts.catalog().devices.claims["ns/ckpt"].allocation == GPUS
    assert not facts.land([DEVICES], [DEVICES], now=1000.0)  # carried out: same catalog
    assert facts.next_expiry() == 1010.0
    assert facts.catalog().devices.claims["ns/ckpt"].allocation == GPUS

    facts.assume([DEVICES], now=0.0, held=True)
    other = replace(DEVICES, target="node-2")
    assert not facts.land([other], [], now=5.0)  # not the decision assumed: kept
    assert facts.land([DEVICES], [], now=5.0)  # its gang failed: forgotten
    assert facts.next_expiry() is None
    assert facts.catalog().devices.claims["ns/ckpt"].allocation is None
