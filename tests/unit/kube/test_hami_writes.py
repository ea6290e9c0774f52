"""A pod's HAMi share claim is written as the pod's annotations before the gang binds (the
``DEVICES`` pre-bind decision for a ``~hami.io`` claim): conditional on the pod read, never on
a pod bound or recreated, and taken back from a pod not bound when the gang's bind fails."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest

from scheduler.kube.write.prebind import PreBindWriter
from scheduler.model import hami
from scheduler.model.devices import Allocation, Consumer, DeviceId, DeviceResult
from scheduler.model.prebind import PreBind, PreBindKind, device_names
from tests.unit.kube.test_prebind_writer import FakeApi

POD = "/api/v1/namespaces/ns/pods/g-0"
HALF = Allocation((DeviceResult("main", DeviceId(hami.DRIVER, "n1", "GPU-1"), False, "s1",
                                ((hami.CORES, Fraction(0)), (hami.MEMORY, Fraction(8192 * 2**20)),
                                 (hami.SLOTS, Fraction(1)))),))
WRITTEN = (hami.HAMI_TO_ALLOCATE_ANNOTATION, hami.HAMI_ALLOCATED_ANNOTATION,
           hami.HAMI_NODE_ANNOTATION, hami.HAMI_TIME_ANNOTATION,
           hami.HAMI_BIND_PHASE_ANNOTATION, hami.HAMI_BIND_TIME_ANNOTATION)


def decision(allocation: Allocation | None = HALF, uid: str = "u0") -> PreBind:
    names = device_names(allocation) if allocation is not None else ()
    return PreBind("ns/g-0~hami.io", PreBindKind.DEVICES, "n1", names, allocation,
                   (Consumer("pods", "g-0", uid),))


def pod(node: str = "", **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "g-0", "namespace": "ns", "uid": "u0", "resourceVersion": "3",
                         "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "side"}, {"name": "main"}]}}


def fake(obj: dict[str, Any] | None) -> FakeApi:
    api = FakeApi()
    if obj is not None:
        api.objects[POD] = copy.deepcopy(obj)
    return api


@dataclass(frozen=True)
class Case:
    decision: PreBind
    before: dict[str, Any] | None
    failure: str = ""  # "" when the annotations are written


CASES = {
    "a pending pod gets its GPU, per container": Case(decision(), pod()),
    "allocated already: nothing to write": Case(decision(None), pod()),
    "a pod bound meanwhile is not written": Case(decision(), pod("n2"), "bound already"),
    "a recreated namesake is not written": Case(decision(uid="old"), pod(), "recreated"),
    "a pod gone": Case(decision(), None, "HTTP 404"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_pod_gets_hamis_annotations_before_binding(name: str) -> None:
    case = CASES[name]
    api = fake(case.before)
    out = PreBindWriter(api).apply([case.decision], "ns/g")  # type: ignore[arg-type]
    if case.failure:
        assert not out.ok and case.failure in out.failure and api.patches == []
        return
    assert out.ok
    if case.decision.allocation is None:
        assert api.patches == []
        return
    (path, body), = api.patches
    assert path == POD and body["metadata"]["resourceVersion"] == "3"  # conditional
    notes = body["metadata"]["annotations"]
    assert set(notes) == set(WRITTEN)
    assert notes[hami.HAMI_TO_ALLOCATE_ANNOTATION] == ";GPU-1,NVIDIA,8192,0:;"
    assert notes[hami.HAMI_NODE_ANNOTATION] == "n1"
    assert notes[hami.HAMI_BIND_PHASE_ANNOTATION] == "allocating"


def test_undo_takes_the_annotations_back_from_a_pod_not_bound_only() -> None:
    api = fake(pod(other="kept"))
    writer = PreBindWriter(api)  # type: ignore[arg-type]
    assert writer.apply([decision()]).ok
    writer.undo([decision()])
    assert api.objects[POD]["metadata"]["annotations"] == {"other": "kept"}
    bound = fake(pod("n1", **{hami.HAMI_NODE_ANNOTATION: "n1"}))
    PreBindWriter(bound).undo([decision()])  # type: ignore[arg-type]
    assert bound.patches == []
