"""A pod's ``spec.resourceClaims`` and ``status.resourceClaimStatuses`` as read from the real
pod of tests/data/dra (a Job's pod with a template claim), and malformed entries refused by
the field that is wrong."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.kube.read import convert
from scheduler.kube.read.fields import ConversionError
from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.gangs import PodRef

POD = json.loads((Path(__file__).parents[2] / "data" / "dra" / "pod-with-claim.json")
                 .read_text())


def with_claims(entries: Any, statuses: Any = None) -> dict[str, Any]:
    pod = copy.deepcopy(POD)
    pod["spec"]["resourceClaims"] = entries
    if statuses is None:
        pod["status"].pop("resourceClaimStatuses", None)
    else:
        pod["status"]["resourceClaimStatuses"] = statuses
    return pod


def test_the_real_pod_names_its_template_and_the_claim_made_from_it() -> None:
    pod = convert.pod_from_json(POD)
    assert pod.requirements.constraints.device_claims == (
        DeviceClaimUse("gpu", template="one-h100"),)
    assert pod.claim_statuses == (("gpu", "train-0-h9dhz-gpu-wzbz8"),)
    ref = PodRef(pod.namespace, pod.name, pod.uid, pod.claim_statuses)
    assert ref.claim_of("gpu") == "train-0-h9dhz-gpu-wzbz8" and ref.claim_of("ib") is None
    assert ref == PodRef(pod.namespace, pod.name, pod.uid)  # a reference names the pod


@pytest.mark.parametrize("entries,statuses,uses,made", [
    ([{"name": "gpu", "resourceClaimName": "shared"}], None,
     (DeviceClaimUse("gpu", claim="shared"),), ()),
    ([{"name": "gpu", "resourceClaimTemplateName": "one-h100"}], None,
     (DeviceClaimUse("gpu", template="one-h100"),), ()),
    ([{"name": "b", "resourceClaimTemplateName": "t"}, {"name": "a", "resourceClaimName": "c"}],
     [{"name": "b"}], (DeviceClaimUse("b", template="t"), DeviceClaimUse("a", claim="c")),
     (("b", ""),)),  # a status entry without a claim: none was needed
    ([], [], (), ()),
], ids=["claim by name", "template, claim not made yet", "both kinds, none needed", "none"])
def test_entries_and_statuses(entries: Any, statuses: Any, uses: tuple[DeviceClaimUse, ...],
                              made: tuple[tuple[str, str], ...]) -> None:
    pod = convert.pod_from_json(with_claims(entries, statuses))
    assert pod.requirements.constraints.device_claims == uses
    assert pod.claim_statuses == made
    assert pod.requirements.constraints.unsupported == ()


@pytest.mark.parametrize("entries,statuses,field", [
    ("gpu", None, "spec.resourceClaims"),
    ([{"resourceClaimName": "x"}], None, "spec.resourceClaims[0].name"),
    ([{"name": "gpu"}], None, "spec.resourceClaims[0]"),
    ([{"name": "gpu", "resourceClaimName": "x", "resourceClaimTemplateName": "t"}], None,
     "spec.resourceClaims[0]"),
    ([{"name": "gpu", "resourceClaimName": 3}], None, "spec.resourceClaims[0].resourceClaimName"),
    ([{"name": "g", "resourceClaimName": "x"}, {"name": "g", "resourceClaimName": "y"}], None,
     "spec.resourceClaims[1].name"),
    ([], [{"resourceClaimName": "x"}], "status.resourceClaimStatuses[0].name"),
    ([], [{"name": "gpu", "resourceClaimName": 1}],
     "status.resourceClaimStatuses[0].resourceClaimName"),
], ids=["not a list", "no name", "no source", "two sources", "not a name", "name twice",
        "status without name", "status claim not a name"])
def test_a_malformed_entry_is_refused_naming_its_field(entries: Any, statuses: Any,
                                                       field: str) -> None:
    with pytest.raises(ConversionError) as exc:
        convert.pod_from_json(with_claims(entries, statuses))
    assert exc.value.path == field
