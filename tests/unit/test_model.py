"""Pod requests and requirements as Kubernetes computes them; nodes, tolerations, gangs."""

from __future__ import annotations

import re
from typing import Any

import pytest

from scheduler.model import (
    Gang,
    Node,
    NodeLabelConfig,
    NodeSelectorRequirement,
    PodRequirements,
    Role,
    SelectorOperator,
    Taint,
    TaintEffect,
    Toleration,
    requests_from_pod_spec,
    requirements_from_pod_spec,
)
from scheduler.model.resources import QuantityError, Resources

GI = 1 << 30
MI = 1 << 20


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
              **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


@pytest.mark.parametrize(("spec", "want"), [
    pytest.param({"containers": [container({"cpu": "1", "memory": "1Gi"}),
                                 container({"cpu": "500m", "nvidia.com/gpu": "2"})]},
                 Resources.of(cpu=1500, memory=GI, gpu=2), id="containers-summed"),
    pytest.param({"containers": [container({"cpu": "1"})],
                  "initContainers": [container({"cpu": "4", "memory": "64Mi"}),
                                     container({"cpu": "2", "memory": "1Gi"})]},
                 Resources.of(cpu=4000, memory=GI), id="init-maxed-per-resource"),
    pytest.param({"containers": [container({"cpu": "1", "memory": "1Gi"}),
                                 container({"cpu": "500m"})],
                  "initContainers": [
                      container({"cpu": "2"}),
                      container({"cpu": "200m", "memory": "100Mi"}, restartPolicy="Always"),
                      container({"cpu": "3", "memory": "2Gi"})]},
                 Resources.of(cpu=3200, memory=2 * GI + 100 * MI), id="sidecar-runs-alongside"),
    pytest.param({"containers": [container({"cpu": "1"})],
                  "initContainers": [container({"cpu": "500m"}, restartPolicy="Always")]},
                 Resources.of(cpu=1500), id="sidecar-added-to-app"),
    pytest.param({"containers": [container({"cpu": "1"})],
                  "overhead": {"cpu": "100m", "memory": "10Mi"}},
                 Resources.of(cpu=1100, memory=10 * MI), id="overhead-added"),
    pytest.param({"containers": [container(limits={"nvidia.com/gpu": "8", "cpu": "4"})]},
                 Resources.of(gpu=8, cpu=4000), id="limits-only-become-requests"),
    pytest.param({"containers": [container({"cpu": "2"}, limits={"cpu": "4", "memory": "1Gi"})]},
                 Resources.of(cpu=2000, memory=GI), id="requests-win-over-limits"),
    pytest.param({"containers": [{"name": "bare"}]}, Resources(), id="nothing-requested"),
])
def test_requests_from_pod_spec(spec: dict[str, Any], want: Resources) -> None:
    assert requests_from_pod_spec(spec) == want


def test_malformed_quantity_names_the_resource() -> None:
    with pytest.raises(QuantityError, match=r"^memory: malformed quantity '12 GB'"):
        requests_from_pod_spec({"containers": [container({"memory": "12 GB"})]})


def _affinity(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}


def test_requirements_from_pod_spec() -> None:
    spec = {
        "containers": [container({"nvidia.com/gpu": "8"})],
        "nodeSelector": {"gangscheduler.io/pool": "h100"},
        "affinity": _affinity({"key": "gen", "operator": "Gt", "values": ["3"]},
                              {"key": "zone", "operator": "In", "values": ["a", "b"]}),
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "train",
                         "effect": "NoSchedule"}, {"operator": "Exists"}],
    }
    req = requirements_from_pod_spec(spec)
    assert req.requests == Resources.of(gpu=8)
    assert req.effective_requests == Resources.of(gpu=8, pods=1)
    assert req.node_selector == {"gangscheduler.io/pool": "h100"}
    (term,) = req.affinity_terms
    assert term.match_expressions == (
        NodeSelectorRequirement("gen", SelectorOperator.GT, ("3",)),
        NodeSelectorRequirement("zone", SelectorOperator.IN, ("a", "b")))
    assert req.tolerations == (Toleration("dedicated", "Equal", "train", TaintEffect.NO_SCHEDULE),
                               Toleration("", "Exists", "", None))
    ok = Node.build("n", Resources.of(gpu=8), {"gangscheduler.io/pool": "h100", "gen": "4",
                                               "zone": "b"}, taints=(Taint("any", "thing"),))
    assert req.allows(ok)
    assert not req.allows(Node.build("m", Resources.of(gpu=8), {**ok.labels, "gen": "3"}))


@pytest.mark.parametrize(("expr", "field"), [
    ({"key": "a", "operator": "Matches", "values": ["x"]}, "matchExpressions[1].operator"),
    ({"key": "a", "operator": "Gt", "values": ["1", "2"]}, "matchExpressions[1].values"),
    ({"key": "a", "operator": "Lt"}, "matchExpressions[1].values"),
])
def test_bad_affinity_names_the_field(expr: dict[str, Any], field: str) -> None:
    spec = {"containers": [], "affinity": _affinity({"key": "ok", "operator": "Exists"}, expr)}
    where = re.escape(f"spec.affinity.nodeAffinity.required.nodeSelectorTerms[0].{field}:")
    with pytest.raises(ValueError, match=f"^{where}"):
        requirements_from_pod_spec(spec)


LABELS = {"gpu": "h100", "gen": "4", "bad": "x"}


@pytest.mark.parametrize(("op", "key", "values", "want"), [
    (SelectorOperator.IN, "gpu", ("h100", "a100"), True),
    (SelectorOperator.IN, "gpu", ("a100",), False),
    (SelectorOperator.IN, "absent", ("a",), False),
    (SelectorOperator.NOT_IN, "gpu", ("a100",), True),
    (SelectorOperator.NOT_IN, "gpu", ("h100",), False),
    (SelectorOperator.NOT_IN, "absent", ("a",), True),
    (SelectorOperator.EXISTS, "gpu", (), True),
    (SelectorOperator.EXISTS, "absent", (), False),
    (SelectorOperator.DOES_NOT_EXIST, "absent", (), True),
    (SelectorOperator.DOES_NOT_EXIST, "gpu", (), False),
    (SelectorOperator.GT, "gen", ("3",), True),
    (SelectorOperator.GT, "gen", ("4",), False),
    (SelectorOperator.GT, "bad", ("1",), False),  # non-integer label never matches
    (SelectorOperator.LT, "gen", ("5",), True),
    (SelectorOperator.LT, "gen", ("4",), False),
    (SelectorOperator.LT, "absent", ("9",), False),
])
def test_selector_operators(op: SelectorOperator, key: str, values: tuple[str, ...],
                            want: bool) -> None:
    assert NodeSelectorRequirement(key, op, values).matches(LABELS) is want


@pytest.mark.parametrize(("toleration", "taint", "want"), [
    (Toleration("k", "Equal", "v"), Taint("k", "v"), True),
    (Toleration("k", "Equal", "w"), Taint("k", "v"), False),
    (Toleration("k", "Exists"), Taint("k", "v", TaintEffect.NO_EXECUTE), True),
    (Toleration("k", "Exists", effect=TaintEffect.NO_SCHEDULE),
     Taint("k", "v", TaintEffect.NO_EXECUTE), False),
    (Toleration("", "Exists"), Taint("anything", "v"), True),
    (Toleration("", "Equal", ""), Taint("k", ""), False),
])
def test_tolerations(toleration: Toleration, taint: Taint, want: bool) -> None:
    assert toleration.tolerates(taint) is want


def test_prefer_no_schedule_and_node_state() -> None:
    req = PodRequirements(Resources())
    soft = Node.build("s", Resources(), taints=(Taint("k", "v", TaintEffect.PREFER_NO_SCHEDULE),))
    assert req.allows(soft)
    assert req.untolerated_taint(Node.build("h", Resources(), taints=(Taint("k", "v"),))) \
        == Taint("k", "v")
    assert not req.allows(Node.build("c", Resources(), unschedulable=True))
    assert not req.allows(Node.build("r", Resources(), ready=False))


def test_node_pool_and_topology_from_labels() -> None:
    n = Node.build("n1", Resources(), {"nvidia.com/gpu.product": "H100",
                                       "topology.gangscheduler.io/block": "b1",
                                       "topology.gangscheduler.io/rack": "r7"})
    assert n.pool == "H100"
    assert n.topology == ("b1", "b1/r7")
    assert n.labels["kubernetes.io/hostname"] == "n1"
    lone = Node.build("n2", Resources(), {"gangscheduler.io/pool": "a100"})
    assert lone.pool == "a100"
    assert lone.topology == ("<none:n2>", "<none:n2>/<none:n2>")
    cfg = NodeLabelConfig(pool_label="pool", topology_labels=("zone",), default_pool="misc")
    assert Node.build("n3", Resources(), {"zone": "z"}, config=cfg).topology == ("z",)
    assert Node.build("n3", Resources(), config=cfg).pool == "misc"


def test_gang_counts_and_requests() -> None:
    worker = Role("worker", 4, PodRequirements(Resources.of(gpu=8)), min_count=2)
    launcher = Role("launcher", 1, PodRequirements(Resources.of(cpu=1000)))
    g = Gang(id="ns/g", uid="u", namespace="ns", name="g", queue="q", roles=(worker, launcher))
    assert (g.min_member, g.size) == (3, 5)
    assert g.min_requests == Resources.of(gpu=16, cpu=1000, pods=3)
    assert g.gpus == 16
    assert g.role("launcher") is launcher
    with pytest.raises(KeyError):
        g.role("nope")
    assert not Gang(id="x", uid="x", namespace="ns", name="x", queue="q", roles=(worker,),
                    present_members=1).is_complete
