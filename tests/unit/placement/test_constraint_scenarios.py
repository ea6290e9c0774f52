"""Table-driven scenarios for pod-level constraints: nodes, running pods and a gang in; where
it lands (or the exact reason it does not) out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import pytest

from scheduler.model import Gang, Node, PodRequirements, Role, RunningGang, Taint, Toleration
from scheduler.model.constraints import (
    NO_CONSTRAINTS,
    ClaimUse,
    HostPort,
    PodAffinityTerm,
    PodConstraints,
    SpreadConstraint,
    Unsatisfiable,
)
from scheduler.model.labels import Labels, LabelSelector
from scheduler.model.pods import NodeSelectorRequirement, NodeSelectorTerm, PreferredNodeTerm
from scheduler.model.pods import SelectorOperator as Op
from scheduler.model.prebind import PreBind, PreBindKind
from scheduler.model.resources import Resources
from scheduler.model.volumes import (
    Claim,
    StorageClass,
    Volume,
    VolumeCatalog,
)
from scheduler.placement import Placement, Unplaceable, UnplaceableReason, solve
from scheduler.world.occupancy import Occupant
from scheduler.world.snapshot import Snapshot
from tests.unit.placement.builders import HOST, RACK, node

ZONE = "topology.kubernetes.io/zone"
TRAINER = LabelSelector.equals({"app": "trainer"})


def zoned(count: int, zones: str = "abc", gpu: int = 8, **kw: object) -> list[Node]:
    return [node(f"n{i}", gpu=gpu, labels={ZONE: zones[i % len(zones)]}, **kw)  # type: ignore[arg-type]
            for i in range(count)]


def workers(count: int, c: PodConstraints = NO_CONSTRAINTS, gpu: int = 1, name: str = "worker",
            labels: dict[str, str] | None = None, **req: object) -> Role:
    requirements = PodRequirements(Resources({"nvidia.com/gpu": gpu, "cpu": 1000}),
                                   constraints=c, **req)  # type: ignore[arg-type]
    return Role(name, count, requirements, labels=Labels(labels or {"app": "trainer"}))


def gang(*roles: Role) -> Gang:
    return Gang(id="ns/g", uid="g", namespace="ns", name="g", queue="q", roles=roles)


def anti(key: str, selector: LabelSelector = TRAINER) -> PodConstraints:
    return PodConstraints(anti_affinity=(PodAffinityTerm(selector, key, frozenset({"ns"})),))


def affinity(key: str, selector: LabelSelector = TRAINER) -> PodConstraints:
    return PodConstraints(affinity=(PodAffinityTerm(selector, key, frozenset({"ns"})),))


def spread(key: str, skew: int = 1, min_domains: int = 1) -> PodConstraints:
    return PodConstraints(spread=(SpreadConstraint(skew, key, Unsatisfiable.DO_NOT_SCHEDULE,
                                                   TRAINER, min_domains),))


def full(names: Sequence[str], gpus: int = 8) -> RunningGang:
    """A running gang (no labels of interest) filling *names*' GPUs."""
    role = workers(1, labels={"app": "other"})
    g = Gang(id="ns/busy", uid="busy", namespace="ns", name="busy", queue="q", roles=(role,))
    allocs = tuple((n, Resources({"nvidia.com/gpu": gpus, "pods": 1})) for n in names)
    return RunningGang(g, allocs, 0.0, members=tuple((role.name, n, 1) for n in names))


@dataclass
class Case:
    name: str
    nodes: list[Node]
    gang: Gang
    running: Sequence[RunningGang] = ()
    others: Sequence[Occupant] = ()
    volumes: VolumeCatalog = field(default_factory=VolumeCatalog)
    #: Per node: members there; or a check of the placement.
    want: dict[str, int] | Callable[[Placement], bool] | None = None
    reason: UnplaceableReason | None = None
    message: str = ""

    def snapshot(self) -> Snapshot:
        usage: dict[str, Resources] = {}
        for o in self.others:
            usage[o.node] = usage.get(o.node, Resources()) + Resources({"pods": 1})
        return Snapshot(self.nodes, self.running, usage, other_pods=self.others,
                        volumes=self.volumes)


def per_node(p: Placement) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in p.assignments:
        out[a.node] = out.get(a.node, 0) + a.count
    return out


def zones_of(p: Placement, nodes: Sequence[Node]) -> dict[str, int]:
    zone = {n.name: n.labels.get(ZONE, "-") for n in nodes}
    out: dict[str, int] = {}
    for a in p.assignments:
        out[zone[a.node]] = out.get(zone[a.node], 0) + a.count
    return out


CLAIMS = VolumeCatalog.of(
    claims=[Claim("ns", "data", volume_name="pv-data", bind_completed=True),
            Claim("ns", "ckpt", storage_class="wait", request=1 << 30,
                  access_modes=frozenset({"ReadWriteOnce"})),
            Claim("ns", "scratch", storage_class="dynamic", request=1 << 30)],
    volumes=[Volume("pv-data", 1 << 40, storage_class="ro", node_affinity=(NodeSelectorTerm(
        (NodeSelectorRequirement(ZONE, Op.IN, ("b",)),)),)),
        Volume("pv-small", 1 << 30, frozenset({"ReadWriteOnce"}), "wait", node_affinity=(
            NodeSelectorTerm((NodeSelectorRequirement(HOST, Op.IN, ("n2",)),)),)),
        Volume("pv-big", 10 << 30, frozenset({"ReadWriteOnce"}), "wait", node_affinity=(
            NodeSelectorTerm((NodeSelectorRequirement(HOST, Op.IN, ("n2", "n3")),)),))],
    classes=[StorageClass("wait", "kubernetes.io/no-provisioner", True),
             StorageClass("dynamic", "csi.example.com", True)])


CASES = [
    Case("anti-affinity per host: one member per node", zoned(8), gang(workers(8, anti(HOST))),
         want=lambda p: set(per_node(p).values()) == {1} and len(p.assignments) == 8),
    Case("anti-affinity per host: 8 members, 5 nodes with room (the issue's reason)",
         zoned(8), gang(workers(8, anti(HOST))), running=[full(["n5", "n6", "n7"])],
         reason=UnplaceableReason.INSUFFICIENT_CAPACITY,
         message="role worker: anti-affinity app=trainer per kubernetes.io/hostname: 8 members "
                 "need 8 nodes, 5 match"),
    Case("anti-affinity per host: never, with 5 nodes in all", zoned(5),
         gang(workers(8, anti(HOST))), reason=UnplaceableReason.NEVER_FITS,
         message="role worker: anti-affinity app=trainer per kubernetes.io/hostname: 8 members "
                 "need 8 nodes, 5 eligible (never fits)"),
    Case("anti-affinity per zone: 3 members in 3 zones", zoned(6),
         gang(workers(3, anti(ZONE))), want=lambda p: len(zones_of(p, zoned(6))) == 3),
    Case("a running pod's anti-affinity keeps members off its node", zoned(2),
         gang(workers(2, gpu=4)), others=[Occupant("n0", "ns", {"app": "db"}, 1, anti(HOST))],
         want={"n1": 2}),
    Case("members stay out of the zone of a running pod their anti-affinity selects",
         zoned(3), gang(workers(2, anti(ZONE), gpu=1)),
         others=[Occupant("n0", "ns", {"app": "trainer"})],
         want=lambda p: "n0" not in per_node(p)),
    Case("spread per zone, maxSkew 1: 6 members 2/2/2", zoned(6),
         gang(workers(6, spread(ZONE))),
         want=lambda p: sorted(zones_of(p, zoned(6)).values()) == [2, 2, 2]),
    Case("spread counts running pods: the empty zone takes the extra member", zoned(3),
         gang(workers(2, spread(ZONE))), others=[Occupant("n0", "ns", {"app": "trainer"}),
                                                 Occupant("n1", "ns", {"app": "trainer"})],
         want={"n2": 1, "n0": 1}),
    Case("affinity to one another: all members in one zone", zoned(6, gpu=4),
         gang(workers(4, affinity(ZONE), gpu=2)),
         want=lambda p: len(zones_of(p, zoned(6))) == 1),
    Case("affinity satisfied by a running pod: its zone", zoned(6),
         gang(workers(2, affinity(ZONE, LabelSelector.equals({"app": "cache"})))),
         others=[Occupant("n4", "ns", {"app": "cache"})],
         want=lambda p: set(zones_of(p, zoned(6))) == {"b"}),
    Case("affinity nothing can satisfy", zoned(3),
         gang(workers(2, affinity(ZONE, LabelSelector.equals({"app": "cache"})))),
         reason=UnplaceableReason.NO_ELIGIBLE_NODES,
         message="role worker: pod affinity app=cache per topology.kubernetes.io/zone: no "
                 "running pod matches it and the gang's members do not match it themselves"),
    Case("two affinity terms are met only by one running pod matching both, not by two pods "
         "on one node each matching one (found by the differential test)", zoned(3),
         gang(workers(1, PodConstraints(affinity=(
             PodAffinityTerm(LabelSelector.equals({"app": "cache"}), ZONE, frozenset({"ns"})),
             PodAffinityTerm(LabelSelector.equals({"app": "web"}), ZONE, frozenset({"ns"})))))),
         others=[Occupant("n1", "ns", {"app": "cache"}), Occupant("n1", "ns", {"app": "web"})],
         reason=UnplaceableReason.NO_ELIGIBLE_NODES,
         message="role worker: pod affinity app=cache per topology.kubernetes.io/zone and "
                 "app=web per topology.kubernetes.io/zone: no running pod matches it and the "
                 "gang's members do not match it themselves"),
    Case("a running pod matching both affinity terms on a node without the zone key still "
         "counts (for its host): no first-pod exception, no node (found by the differential "
         "test)", [*zoned(3), node("bare")],
         gang(workers(1, PodConstraints(affinity=(
             PodAffinityTerm(TRAINER, HOST, frozenset({"ns"})),
             PodAffinityTerm(TRAINER, ZONE, frozenset({"ns"})))))),
         others=[Occupant("bare", "ns", {"app": "trainer"})],
         reason=UnplaceableReason.NO_ELIGIBLE_NODES,
         message="role worker: all 4 eligible nodes are ruled out: 3 by affinity app=trainer "
                 "per kubernetes.io/hostname and app=trainer per topology.kubernetes.io/zone: "
                 "no running pod it selects is in the node's domain; 1 by"),
    Case("the pods it must run beside are on a node whose taint it does not tolerate: the "
         "taint is named, not only the eligible nodes ruled out (issue 33)",
         [*zoned(3), node("t", labels={ZONE: "a"}, taints=(Taint("dedicated", "infer"),))],
         gang(workers(1, affinity(HOST))), others=[Occupant("t", "ns", {"app": "trainer"})],
         reason=UnplaceableReason.NO_ELIGIBLE_NODES,
         message="role worker: all 3 eligible nodes are ruled out: 3 by affinity app=trainer "
                 "per kubernetes.io/hostname: no running pod it selects is in the node's "
                 "domain; besides, of the nodes it selects, 1 with untolerated taints: "
                 "dedicated=infer:NoSchedule (pool default, 1 node)"),
    Case("a running pod matching the only (zone) term on a node without the zone key counts "
         "nowhere: the first-pod exception applies, the members share a zone",
         [*zoned(6, gpu=4), node("bare")], gang(workers(4, affinity(ZONE), gpu=2)),
         others=[Occupant("bare", "ns", {"app": "trainer"})],
         want=lambda p: len(zones_of(p, zoned(6))) == 1 and "bare" not in per_node(p)),
    Case("affinity terms on two unnested keys are met per key, by different running pods",
         [node("h1", gpu=0, labels={ZONE: "a", RACK: "r1"}),
          node("h2", gpu=0, labels={ZONE: "b", RACK: "r2"}),
          node("x", labels={ZONE: "a", RACK: "r2"}), node("y", labels={ZONE: "c", RACK: "r1"})],
         gang(workers(1, PodConstraints(affinity=(
             PodAffinityTerm(LabelSelector.equals({"app": "cache"}), ZONE, frozenset({"ns"})),
             PodAffinityTerm(LabelSelector.equals({"app": "cache"}), RACK,
                             frozenset({"ns"})))))),
         others=[Occupant("h1", "ns", {"app": "cache"}), Occupant("h2", "ns", {"app": "cache"})],
         want={"x": 1}),
    Case("members with affinity to an anchor role spread over its domains (a host port "
         "keeps one per node; found by the placement properties)", zoned(2, zones="ab", gpu=2),
         gang(workers(2, labels={"app": "y"}, name="anchor", gpu=0),
              workers(2, PodConstraints(
                  affinity=(PodAffinityTerm(LabelSelector.equals({"app": "y"}), ZONE,
                                            frozenset({"ns"})),),
                  host_ports=(HostPort(80),)), gpu=0)),
         want=lambda p: {a.node for a in p.assignments if a.role == "worker"} == {"n0", "n1"}),
    Case("workers join the launcher's zone (an anchor role)", zoned(6),
         gang(workers(1, labels={"app": "launcher"}, name="launcher", gpu=0),
              workers(3, affinity(ZONE, LabelSelector.equals({"app": "launcher"})))),
         want=lambda p: len(zones_of(p, zoned(6))) == 1),
    Case("a host port: one member per node, never beside a running holder", zoned(3),
         gang(workers(2, PodConstraints(host_ports=(HostPort(29500),)))),
         others=[Occupant("n0", "ns", {}, 1, PodConstraints(host_ports=(HostPort(29500),)))],
         want={"n1": 1, "n2": 1}),
    Case("two roles wanting one port share no node", zoned(2),
         gang(workers(1, PodConstraints(host_ports=(HostPort(80),)), name="a"),
              workers(1, PodConstraints(host_ports=(HostPort(80),)), name="b")),
         want={"n0": 1, "n1": 1}),
    Case("a cordoned node takes pods tolerating its taint",
         [node("c", unschedulable=True)],
         gang(workers(1, tolerations=(Toleration("node.kubernetes.io/unschedulable",
                                                  "Exists"),))), want={"c": 1}),
    Case("preferred node affinity picks the preferred zone", zoned(6),
         gang(workers(2, preferred_terms=(PreferredNodeTerm(50, NodeSelectorTerm(
             (NodeSelectorRequirement(ZONE, Op.IN, ("c",)),))),))),
         want=lambda p: set(zones_of(p, zoned(6))) == {"c"}),
    Case("a bound claim's PV reaches zone b only", zoned(6),
         gang(workers(2, PodConstraints(claims=(ClaimUse("data", True),)))), volumes=CLAIMS,
         want=lambda p: set(zones_of(p, zoned(6))) == {"b"} and p.prebinds == ()),
    Case("a WaitForFirstConsumer claim gets the smallest PV that reaches its node", zoned(6),
         gang(workers(1, PodConstraints(claims=(ClaimUse("ckpt"),)))), volumes=CLAIMS,
         want=lambda p: per_node(p) == {"n2": 1} and p.prebinds == (
             PreBind("ns/ckpt", PreBindKind.CLAIM_REF, "pv-small"),)),
    Case("a claim to provision, its member on one node: selected-node, then bind", zoned(3),
         gang(workers(1, PodConstraints(claims=(ClaimUse("scratch"),)))), volumes=CLAIMS,
         want=lambda p: not p.volumes_first and p.prebinds[0].kind is PreBindKind.SELECTED_NODE),
    Case("a claim to provision shared by members on several nodes: provisioned first",
         zoned(3), gang(workers(3, replace(anti(HOST), claims=(ClaimUse("scratch"),)))),
         volumes=CLAIMS, want=lambda p: p.volumes_first),
    Case("a missing claim: the gang waits for it", zoned(2),
         gang(workers(1, PodConstraints(claims=(ClaimUse("nope"),)))), volumes=CLAIMS,
         reason=UnplaceableReason.VOLUMES, message="persistentvolumeclaim nope not found"),
    Case("Dynamic Resource Allocation is refused, naming the field", zoned(2),
         gang(workers(1, PodConstraints(unsupported=(
             "spec.resourceClaims: Dynamic Resource Allocation is not supported",)))),
         reason=UnplaceableReason.UNSUPPORTED,
         message="role worker: spec.resourceClaims: Dynamic Resource Allocation is not "
                 "supported; gang-scheduler refuses the gang rather than bind it as if the "
                 "field were absent"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_constraint_scenario(case: Case) -> None:
    result = solve(case.gang, case.snapshot())
    if case.reason is not None:
        assert isinstance(result, Unplaceable), result
        assert result.reason is case.reason, result
        assert result.message.startswith(case.message), result.message
        return
    assert isinstance(result, Placement), result
    if callable(case.want):
        assert case.want(result), result
    else:
        assert per_node(result) == case.want, result
