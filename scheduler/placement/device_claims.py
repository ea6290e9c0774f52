"""Which ResourceClaims a gang's members use (``spec.resourceClaims``), resolved against the
snapshot's device inventory, or why the gang waits before any device is looked at.

Each entry resolves to one claim: a named claim (``resourceClaimName``) in the pod's
namespace, which every pod naming it shares, or the claim the resourceclaim controller made
for this pod from a template, named in its ``status.resourceClaimStatuses``
(``PodRef.claim_of``); an entry identical to one of its ``scheduling.k8s.io`` PodGroup's
``resourceClaims`` is the group's claim (named, or made for the group from the template,
named in the group's status), shared by every member and reserved for the PodGroup. The
first entry that does not resolve is the reason (the controller
has not made the claim yet, or the named claim does not exist): the person reading it learns
which pod and which entry.

A claim that exists is checked first for what makes it unallocatable anywhere, so the person
who wrote it can fix it now rather than after a search: the allocator's own ``precheck`` (a
DeviceClass not found, a field not supported, the claim being deleted...) and every CEL
selector of its requests and their classes compiled (``compile_selector``). The reason
names the pod, the entry, the claim, the request and the class.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from scheduler.model import Gang
from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import DeviceClass, ResourceClaim
from scheduler.model.gangs import PodRef, Role
from scheduler.model.native import NativeGroupInfo
from scheduler.placement.device_cel import compile_selector
from scheduler.placement.device_outcome import DeviceMisfit, precheck


@dataclass(frozen=True, slots=True)
class Member:
    """One member's claims in its entries' order: its own (made from a template for it)
    and the ones it shares (``shared``: their keys): named ones, and its PodGroup's
    (``grouped``: reserved for the PodGroup rather than for its pods)."""

    pod: PodRef | None  # None: a simulated member without a pod
    claims: tuple[ResourceClaim, ...]
    shared: frozenset[str] = frozenset()
    grouped: frozenset[str] = frozenset()

    @property
    def own(self) -> tuple[ResourceClaim, ...]:
        return tuple(c for c in self.claims if c.key not in self.shared)


#: role -> its pending members' claims, in the role's pod order.
MemberClaims = Mapping[str, tuple[Member, ...]]


def _members(gang: Gang, role: Role) -> Iterator[tuple[str, PodRef | None]]:
    """(who, pod) for the role's pending pods, or the role itself (once per member) when it
    lists none (a simulated gang): then a template's claim cannot be looked up."""
    if not role.pods:
        for _ in range(max(role.count, 0)):
            yield f"role {role.name}", None
    for pod in role.pods:
        yield f"pod {pod}", pod


def _claim_name(use: DeviceClaimUse, pod: PodRef | None,
                group: NativeGroupInfo | None) -> tuple[str | None, str]:
    """The claim *use* resolves to for *pod* ("" when none is needed), or None and why."""
    if group is not None and use in group.policy.resource_claims:
        made = group.claim_of(use)
        if made is None:
            return None, (f"{use.describe()}: PodGroup {group.name}'s ResourceClaim does not "
                          "exist yet (the resourceclaim controller makes it from the template)")
        return made, ""
    if use.claim:
        return use.claim, ""
    made = pod.claim_of(use.entry) if pod is not None else None
    if made is None:
        return None, (f"{use.describe()}: its ResourceClaim does not exist yet (the "
                      "resourceclaim controller makes it from the template)")
    return made, ""


def _template_problem(use: DeviceClaimUse, namespace: str,
                      devices: DeviceInventory) -> str:
    """Why the template of *use* would make a claim no node can serve, or that it does not
    exist: said while its claim is not made yet, so the person who wrote it need not wait
    for the resourceclaim controller to learn it ("" when none, or *use* names a claim)."""
    if not use.template:
        return ""
    template = devices.templates.get(f"{namespace}/{use.template}")
    if template is None:
        return f"{use.describe()}: resourceclaimtemplate {use.template} not found"
    misfit = claim_problem(ResourceClaim(namespace, use.template, template.spec),
                           devices.classes)
    if misfit is None:
        return ""
    request = f"request {misfit.request}: " if misfit.request else ""
    return f"{use.describe()}: {request}{misfit.reason}"


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


def resolve_claims(gang: Gang, devices: DeviceInventory) -> MemberClaims | str | None:
    """Each pending member's claims, for the roles whose members use any, or why the gang
    waits for them (None: no member uses a claim)."""
    out: dict[str, tuple[Member, ...]] = {}
    checked: dict[str, DeviceMisfit | None] = {}
    group = gang.native
    for role in gang.roles:
        uses = role.requirements.constraints.device_claims
        if role.count <= 0 or not uses:
            continue
        members: list[Member] = []
        for who, pod in _members(gang, role):
            claims: list[ResourceClaim] = []
            shared: set[str] = set()
            grouped: set[str] = set()
            for use in uses:
                name, why = _claim_name(use, pod, group)
                if name is None:
                    return f"{who}: {_template_problem(use, gang.namespace, devices) or why}"
                if not name:
                    continue  # the controller says this entry needs no claim
                key = f"{gang.namespace}/{name}"
                claim = devices.claims.get(key)
                if claim is None:
                    return f"{who}: {use.describe()}: resourceclaim {name} not found"
                if key not in checked:
                    checked[key] = claim_problem(claim, devices.classes)
                misfit = checked[key]
                if misfit is not None:
                    return f"{who}: {use.describe()}: {misfit.describe()}"
                claims.append(claim)
                if group is not None and use in group.policy.resource_claims:
                    shared.add(key)
                    grouped.add(key)
                elif use.claim:
                    shared.add(key)
            members.append(Member(pod, tuple(claims), frozenset(shared), frozenset(grouped)))
        if any(m.claims for m in members):
            out[role.name] = tuple(members)
    return out or None
