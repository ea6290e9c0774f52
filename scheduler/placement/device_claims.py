"""Why a gang whose pods name ResourceClaims (``spec.resourceClaims``) waits: the claims
resolved against the snapshot's device inventory (issue 35, step one: no allocation yet).

Each entry resolves to one claim: a named claim (``resourceClaimName``) in the pod's
namespace, or the claim the resourceclaim controller made for this pod from a template,
named in its ``status.resourceClaimStatuses`` (``PodRef.claim_of``). The first entry that
does not resolve is the reason (the controller has not made the claim yet, or the named
claim does not exist): the person reading it learns which pod and which entry. Once all
resolve, the gang still waits: gang-scheduler does not allocate devices yet, and binding a
pod whose claim nobody allocates would leave it stuck on its node, so the reason names the
first claim that would need it. Both are final (``never_placeable``) until allocation is
wired: no reservation or StrictFIFO head is given to a gang that cannot start.

A claim that exists is checked first for what makes it unallocatable anywhere, so the person
who wrote it can fix it now rather than after allocation lands: the allocator's own
``precheck`` (a DeviceClass not found, a field not supported, the claim being deleted...)
and every CEL selector of its requests and their classes compiled (``compile_selector``).
The reason names the claim, the request and the class.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from scheduler.model import Gang
from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import DeviceClass, ResourceClaim
from scheduler.model.gangs import PodRef, Role
from scheduler.placement.device_cel import compile_selector
from scheduler.placement.devices import DeviceMisfit, precheck

#: The end of every reason: what no claim's existence changes in this version.
NOT_ALLOCATED = ("device allocation by gang-scheduler is not available yet (issue 35); "
                 "leave pods with spec.resourceClaims to kube-scheduler for now")


def _members(gang: Gang, role: Role) -> Iterator[tuple[str, PodRef | None]]:
    """(who, pod) for the role's pending pods, or the role itself when it lists none (a
    simulated gang): then a template's claim cannot be looked up."""
    if not role.pods:
        yield f"role {role.name}", None
    for pod in role.pods:
        yield f"pod {pod}", pod


def _claim_name(use: DeviceClaimUse, pod: PodRef | None) -> tuple[str | None, str]:
    """The claim *use* resolves to for *pod* ("" when none is needed), or None and why."""
    if use.claim:
        return use.claim, ""
    made = pod.claim_of(use.entry) if pod is not None else None
    if made is None:
        return None, (f"{use.describe()}: its ResourceClaim does not exist yet (the "
                      "resourceclaim controller makes it from the template)")
    return made, ""


def claim_problem(claim: ResourceClaim,
                  classes: Mapping[str, DeviceClass]) -> DeviceMisfit | None:
    """What makes *claim* unallocatable on any node: ``precheck``'s answer, else the first
    selector of a request or of its class that does not compile."""
    misfit = precheck(claim, classes)
    if misfit is not None:
        return misfit
    for request in claim.spec.requests:
        for ask in request.asks:
            cls = classes[ask.class_name]  # precheck found every class
            for where, selectors in (("class {cls}: selector #{i}", cls.selectors),
                                     ("selector #{i} (class {cls})", ask.selectors)):
                for i, expression in enumerate(selectors):
                    error = compile_selector(expression).error
                    if error:
                        whose = where.format(cls=cls.name, i=i)
                        return DeviceMisfit(claim.key, ask.name, f"{whose}: {error}")
    return None


def device_claims_reason(gang: Gang, devices: DeviceInventory) -> str | None:
    """Why *gang* waits for its device claims (None: no member names one)."""
    first_claim = ""
    for role in gang.roles:
        uses = role.requirements.constraints.device_claims
        if role.count <= 0 or not uses:
            continue
        for who, pod in _members(gang, role):
            for use in uses:
                name, why = _claim_name(use, pod)
                if name is None:
                    return f"{who}: {why}; {NOT_ALLOCATED}"
                if not name:
                    continue  # the controller says this entry needs no claim
                claim = devices.claims.get(f"{gang.namespace}/{name}")
                if claim is None:
                    return (f"{who}: {use.describe()}: resourceclaim {name} not found; "
                            f"{NOT_ALLOCATED}")
                misfit = claim_problem(claim, devices.classes)
                if misfit is not None:
                    return f"{who}: {use.describe()}: {misfit.describe()}; {NOT_ALLOCATED}"
                first_claim = first_claim or f"{who}: resourceclaim {name} ({use.describe()})"
    if not first_claim:
        return None
    return f"{first_claim}: {NOT_ALLOCATED}"
