"""Pre-bind decisions, kind by kind: each is assumed in the catalog, recognised once the
watch shows it, written and undone on the apiserver (the fake the writer's own tests use);
``DEVICES`` is assumed by the model and refused by the apiserver edge until it writes
ResourceClaim allocations (issue 35)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.decide.plan import Bind, CyclePlan, Provision
from scheduler.feed.facts import ClusterFacts
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.write import prebind as writes
from scheduler.kube.write.actuator import KubeActuator
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.prebind import PreBindWriter
from scheduler.kube.write.status import StatusWriter
from scheduler.model import PodRef, prebind
from scheduler.model.prebind import PreBind, PreBindKind
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
DEVICES = PreBind("ns/ckpt", PreBindKind.DEVICES, "node-1", ("gpu-0", "gpu-1"))


def api() -> FakeApi:
    fake = FakeApi()
    fake.objects[CLAIM_PATH] = {
        "metadata": {"name": "ckpt", "uid": "c1", "resourceVersion": "1"}, "spec": {}}
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


def test_devices_are_assumed_but_refused_by_the_apiserver_edge() -> None:
    """The model assumes a ResourceClaim allocation (placement decides them, the simulator
    carries them out); the apiserver edge writes none yet: carrying one out there must fail
    loudly, never be skipped."""
    assert DEVICES.describe() == "ckpt allocated gpu-0, gpu-1 on node node-1"
    # A ResourceClaim and a PVC of the same name are assumed apart.
    assert {DEVICES.subject} | {c.decision.subject for c in CASES.values()} == {
        ("ResourceClaim", "ns/ckpt"), ("PersistentVolumeClaim", "ns/ckpt")}
    # A claim the inventory does not hold: nothing to change (the PVC of the name is not it).
    assert prebind.assume(CATALOG, [DEVICES]) == CATALOG
    facts = ClusterFacts()
    facts.set_claim(CLAIM.key, CLAIM)
    facts.assume([DEVICES], now=0.0)
    assert facts.catalog().claims == {CLAIM.key: CLAIM}
    fake = api()
    with pytest.raises(NotImplementedError, match="issue 35"):
        PreBindWriter(fake).apply([DEVICES])  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="issue 35"):
        PreBindWriter(fake).undo([DEVICES])  # type: ignore[arg-type]
    assert fake.patches == []


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
    fake = BindingApi(bind_status)
    binder = Binder(fake, concurrency=1)  # type: ignore[arg-type]
    act = KubeActuator(fake, binder, StatusWriter(fake),  # type: ignore[arg-type]
                       EventRecorder(fake))  # type: ignore[arg-type]
    claim_ref = CASES[PreBindKind.CLAIM_REF].decision
    selected = PreBind("ns/data", PreBindKind.SELECTED_NODE, "node-1")
    pod = PodRef("ns", "g-0", "u0")
    placement = Placement("ns/g", (Assignment("worker", "node-1", 1),), prebinds=(claim_ref,))
    plan = CyclePlan(now=0.0, binds=(Bind("ns/g", "q", placement, ((pod, "node-1"),)),),
                     provisions=(Provision("ns/h", (selected,)),))
    try:
        result = landed(act.apply(plan, 0.0))
    finally:
        act.close()
        binder.close()
    patched = [p for m, p in fake.calls if m == "PATCH" and "/pods/" not in p]
    bound = fake.calls.index(("POST", "/api/v1/namespaces/ns/pods/g-0/binding"))
    assert patched[:2] == ["/api/v1/namespaces/ns/persistentvolumeclaims/data", PV_PATH]
    assert fake.calls.index(("PATCH", PV_PATH)) < bound
    anno = fake.objects["/api/v1/namespaces/ns/persistentvolumeclaims/data"]["metadata"]
    assert anno["annotations"] == {SELECTED_NODE_ANNOTATION: "node-1"}
    if bind_status == 201:
        assert result.bound == ("ns/g",) and result.prebinds == (selected, claim_ref)
        assert CASES[PreBindKind.CLAIM_REF].written(fake.objects)
    else:  # the claimRef is taken back; the provision stands (its gang binds later)
        assert "ns/g" in result.failed and result.prebinds == (selected,)
        assert CASES[PreBindKind.CLAIM_REF].undone(fake.objects) and patched[2:] == [PV_PATH]


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
