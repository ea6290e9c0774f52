"""The backtracking search for one node's devices, as kube-scheduler's DRA allocator walks.

The search is the upstream one: claims in order, each claim's requests in order, each
request's devices one at a time from the node's pools in (driver, pool, slice, device) order;
a device is a candidate when no one holds it (``taken``: allocated by anyone, or chosen for an
earlier claim of this search), the class's selectors and then the request's select it, and
every ``matchAttribute`` constraint of the claim still holds with it. A dead end undoes the
last choice and tries the next device (backtracking), so a constraint that the first devices
break is satisfied by later ones. ``firstAvailable`` tries its sub-requests in order and keeps
the first that leads to a whole solution; ``All`` takes every device the request selects
(and, upstream's rule for consumable capacity, that has room for its capacity request beside
the cluster's shares), which must all be free. The first solution wins (no scoring, as upstream).

One difference in the walk, not in the answer: within one request, devices are tried in
increasing order only. Constraints depend on the set of devices, not on the order they were
picked in, so the first solution is the one upstream finds; the same set is just never tried
twice in another order.

Refused with a reason rather than guessed (``DeviceMisfit``): a claim field we do not
implement (named), a missing DeviceClass, admin access unless ``admin_access`` allows it,
more than ``MAX_DEVICES_PER_CLAIM`` devices for one claim, a selector that does not compile
or fails at evaluation (kube-scheduler stops there too), an ``All`` request over a pool that
is being updated, and a search longer than ``budget`` steps.

A device that allows multiple allocations (``Device.shareable``) is not held whole: each
request takes a share of its capacities (``scheduler.model.device_capacity``), and it stays a
candidate while the shares of the cluster's claims (``consumed``) and of this search fit in
its capacity. Each share gets a ``shareID`` derived from the claim, request and device, so the
same search writes the same allocation.

A device that consumes counters (a MIG device, or a whole GPU published as partitionable)
is a candidate only while its counters fit in its pool's counter sets beside what the
cluster's allocated devices and this search's choices take (``device_counting``); a
shareable one takes them with its first share only, as upstream.

Separate from ``devices`` (which runs it, short-circuits and explains a failure) so the walk
and its bookkeeping of held devices, shares and constraints read as one piece.
"""

from __future__ import annotations

import uuid
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from scheduler.model.device_capacity import consumption, overflow
from scheduler.model.devices import (
    MAX_DEVICES_PER_CLAIM,
    Allocation,
    AllocationMode,
    Ask,
    AttributeValue,
    Constraint,
    DeviceClass,
    DeviceId,
    DeviceResult,
    ResourceClaim,
    same_value,
)
from scheduler.placement.device_cel import matches
from scheduler.placement.device_counting import CounterBook
from scheduler.placement.device_outcome import DeviceMisfit, NodeAllocation
from scheduler.placement.device_pools import NodeDevices, Offered, reach_of

#: (class, selectors, device) -> whether the device is selected: kept by a caller that
#: searches the same devices many times (a gang's placement), passed to ``allocate``.
Selections = dict[tuple[str, tuple[str, ...], DeviceId], bool]
#: Per shareable device, the capacity its shares consume (``consumed_capacity``).
Consumed = Mapping[DeviceId, Mapping[str, Fraction]]
#: Namespace of the share IDs the allocator derives (``share_id``).
_SHARES = uuid.UUID("5b0e3a4c-6f1d-4d0e-9a57-2f6b8c1d7e31")


def share_id(claim: ResourceClaim, request: str, device: DeviceId) -> str:
    """The ``shareID`` of *claim*'s share of *device* for *request*: a UUID (the API's
    format) that is a function of the three, so a search repeated gives the same answer."""
    return str(uuid.uuid5(_SHARES, f"{claim.uid}/{claim.key}/{request}/{device}"))


class SearchStop(Exception):
    """A refusal that ends the whole search: its ``misfit`` says which claim and why."""

    def __init__(self, misfit: DeviceMisfit) -> None:
        super().__init__(misfit.reason)
        self.misfit = misfit


@dataclass(slots=True)
class _Tally:
    """One ``matchAttribute`` constraint's state: the value shared and how many hold it."""

    constraint: Constraint
    value: AttributeValue | None = None
    count: int = 0


@dataclass(slots=True)
class NodeSearch:
    """One walk over one node's devices for a list of claims (the state it backtracks)."""

    node: NodeDevices
    claims: Sequence[ResourceClaim]
    classes: Mapping[str, DeviceClass]
    taken: Container[DeviceId]
    budget: int
    consumed: Consumed = field(default_factory=dict)
    offered: tuple[Offered, ...] = ()
    steps: int = 0
    holding: dict[DeviceId, set[int]] = field(default_factory=dict)
    results: list[list[tuple[DeviceResult, Offered]]] = field(default_factory=list)
    tallies: list[list[_Tally]] = field(default_factory=list)
    #: (class, request's selectors, device) -> selected: what a selection depends on, so
    #: alike claims (a role's members) and later searches (``Selections``) share answers.
    selectable: Selections = field(default_factory=dict)
    everything: dict[tuple[int, str], tuple[Offered, ...]] = field(default_factory=dict)
    #: Shares this search has handed out, per shareable device.
    sharing: dict[DeviceId, dict[str, Fraction]] = field(default_factory=dict)
    #: The last reason a share or a device's counters did not fit (for ``_explain``).
    last_misfit: str = ""
    counters: CounterBook = field(init=False)
    #: Per device taken, in taking order: whether it took counters (given back in reverse).
    counted: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.counters = CounterBook(self.node, self.taken, self.consumed)
        self.offered = tuple(self.node.offered())
        self.results = [[] for _ in self.claims]
        self.tallies = [[_Tally(c) for c in claim.spec.constraints] for claim in self.claims]

    # Selection ----------------------------------------------------------------------------
    def _selects(self, ci: int, ask: Ask, o: Offered) -> bool:
        """Class selectors, then the request's (memoised per class, selectors and device)."""
        key = (ask.class_name, ask.selectors, o.id)
        known = self.selectable.get(key)
        if known is not None:
            return known
        cls = self.classes[ask.class_name]
        ok = True
        for whose, selectors in ((f"class {cls.name}", cls.selectors),
                                 (f"request {ask.name}", ask.selectors)):
            for i, expression in enumerate(selectors):
                answer = matches(expression, o.id.driver, o.device)
                if isinstance(answer, str):
                    raise SearchStop(DeviceMisfit(self.claims[ci].key, ask.name,
                                             f"{whose}: selector #{i}: {answer}",
                                             self.node.node))
                if not answer:
                    ok = False
                    break
            if not ok:
                break
        self.selectable[key] = ok
        return ok

    def _all(self, ci: int, ask: Ask) -> tuple[Offered, ...]:
        """An ``All`` request's devices: every one it selects on the node."""
        key = (ci, ask.name)
        if key not in self.everything:
            for pool in self.node.pools:
                if not pool.usable:
                    state = "being updated" if pool.incomplete else f"invalid ({pool.invalid})"
                    raise SearchStop(DeviceMisfit(self.claims[ci].key, ask.name,
                                             f"asks for all devices, but pool {pool.name} is "
                                             f"{state}", self.node.node))
            self.everything[key] = tuple(o for o in self.offered if self._selects(ci, ask, o)
                                         and self._has_room(ask, o))
        return self.everything[key]

    def _has_room(self, ask: Ask, o: Offered) -> bool:
        """Whether *o* could take *ask*'s capacity request beside the cluster's shares: as
        upstream, ``All`` means every selected device that can, not every one selected."""
        wanted = consumption(dict(ask.capacity), o.device, o.id.driver)
        if isinstance(wanted, str):
            return False
        return not o.device.shareable or overflow(o.device, self.consumed.get(o.id, {}),
                                                  wanted) is None

    # Holding devices ----------------------------------------------------------------------
    def _free_for(self, ci: int, ask: Ask, did: DeviceId) -> bool:
        if ask.admin_access:
            return ci not in self.holding.get(did, ())
        return did not in self.taken and not self.holding.get(did)

    def _used(self, did: DeviceId) -> dict[str, Fraction]:
        """What the cluster's shares and this search's take of a shareable device."""
        used = dict(self.consumed.get(did, {}))
        for name, amount in self.sharing.get(did, {}).items():
            used[name] = used.get(name, Fraction(0)) + amount
        return used

    def _share(self, ci: int, ask: Ask, o: Offered) -> dict[str, Fraction] | None:
        """The share of *o* that *ask* would take if it fits: ``{}`` for a device held
        whole (free and big enough), None if it cannot be had."""
        if not o.device.shareable or ask.admin_access:
            if not self._free_for(ci, ask, o.id):
                return None
            if not ask.capacity:
                return {}
        elif o.id in self.taken:
            return None
        wanted = consumption(dict(ask.capacity), o.device, o.id.driver)
        if isinstance(wanted, str):
            self.last_misfit = wanted
            return None
        if not o.device.shareable or ask.admin_access:
            return {}
        why = overflow(o.device, self._used(o.id), wanted)
        if why is not None:
            self.last_misfit = why
            return None
        return wanted

    def _counts(self, o: Offered) -> bool:
        """Does taking *o* take its counters? Not for a shareable device already shared by
        some claim (upstream skips the check then: its first share took them)."""
        if not o.device.consumes:
            return False
        return not (o.device.shareable and (o.id in self.consumed
                                            or any(self.sharing.get(o.id, {}).values())))

    def _take(self, ci: int, ask: Ask, o: Offered, must: bool,
              share: Mapping[str, Fraction] | None = None) -> bool:
        added: list[_Tally] = []
        for tally in self.tallies[ci]:
            if not tally.constraint.covers(ask.name):
                continue
            value = o.device.attribute(tally.constraint.attribute)
            if value is None or (tally.value is not None and tally.count
                                 and not same_value(value, tally.value)):
                for t in added:
                    t.count -= 1
                if must:
                    raise SearchStop(DeviceMisfit(
                        self.claims[ci].key, ask.name,
                        f"cannot add device {o.id}: matchAttribute "
                        f"{tally.constraint.attribute} would not hold", self.node.node))
                return False
            if not tally.count:
                tally.value = value
            tally.count += 1
            added.append(tally)
        counts = self._counts(o)
        if counts:
            why = self.counters.shortfall(o)
            if why is not None:  # (after the constraints: they are cheaper to check)
                self.last_misfit = why
                for t in added:
                    t.count -= 1
                return False
            self.counters.reserve(o)
        self.counted.append(counts)
        if share:
            used = self.sharing.setdefault(o.id, {})
            for name, amount in share.items():
                used[name] = used.get(name, Fraction(0)) + amount
            result = DeviceResult(ask.name, o.id, False,
                                  share_id(self.claims[ci], ask.name, o.id),
                                  tuple(sorted(share.items())))
        else:
            self.holding.setdefault(o.id, set()).add(ci)
            result = DeviceResult(ask.name, o.id, ask.admin_access)
        self.results[ci].append((result, o))
        return True

    def _give_back(self, ci: int, ask: Ask, o: Offered) -> None:
        result, _ = self.results[ci].pop()
        if self.counted.pop():
            self.counters.reserve(o, -1)
        if result.share_id:
            used = self.sharing[o.id]
            for name, amount in result.consumed:
                used[name] -= amount
        else:
            self.holding[o.id].discard(ci)
        for tally in self.tallies[ci]:
            if tally.constraint.covers(ask.name):
                tally.count -= 1

    # The walk -----------------------------------------------------------------------------
    def request(self, ci: int, ri: int) -> bool:
        if ci == len(self.claims):
            return True
        claim = self.claims[ci]
        if ri == len(claim.spec.requests):
            return self.request(ci + 1, 0)
        return any(self.device(ci, ri, ask, 0, 0) for ask in claim.spec.requests[ri].asks)

    def device(self, ci: int, ri: int, ask: Ask, k: int, start: int) -> bool:
        """Choose the *k*-th device of *ask*, from ``offered[start:]`` on."""
        self.steps += 1
        if self.steps > self.budget:
            raise SearchStop(DeviceMisfit(self.claims[ci].key, ask.name,
                                     f"device search gave up after {self.budget} steps",
                                     self.node.node))
        if ask.mode is AllocationMode.ALL:
            return self._device_all(ci, ri, ask, k)
        if k == ask.count:
            return self.request(ci, ri + 1)
        if len(self.results[ci]) + ask.count - k > MAX_DEVICES_PER_CLAIM:
            return False
        for index in range(start, len(self.offered)):
            o = self.offered[index]
            whole = not o.device.shareable or ask.admin_access
            if (whole and not self._free_for(ci, ask, o.id)) or not self._selects(ci, ask, o):
                continue
            share = self._share(ci, ask, o)
            if share is None or not self._take(ci, ask, o, must=False, share=share):
                continue
            if self.device(ci, ri, ask, k + 1, index + 1):
                return True
            self._give_back(ci, ask, o)
        return False

    def _device_all(self, ci: int, ri: int, ask: Ask, k: int) -> bool:
        chosen = self._all(ci, ask)
        if not chosen:
            return False
        if k == len(chosen):
            return self.request(ci, ri + 1)
        if len(self.results[ci]) + len(chosen) - k > MAX_DEVICES_PER_CLAIM:
            return False
        o = chosen[k]
        share = self._share(ci, ask, o)
        if share is None or not self._take(ci, ask, o, must=True, share=share):
            return False
        if self.device(ci, ri, ask, k + 1, 0):
            return True
        self._give_back(ci, ask, o)
        return False

    def answer(self) -> NodeAllocation:
        out = []
        for claim, got in zip(self.claims, self.results, strict=True):
            reach = reach_of((o for _, o in got), self.node.node)
            out.append((claim.key, Allocation(tuple(r for r, _ in got), reach)))
        return NodeAllocation(self.node.node, tuple(out))

    def counts_fall_short(self) -> bool:
        """Do the plain requests (one ask, a count) of one kind ask for more devices than
        the node has free of that kind? Then no search can succeed, and one would try every
        way of giving alike claims the devices there are before saying so (a role's
        members, a device short: factorially many)."""
        need: dict[tuple[str, tuple[str, ...]], int] = {}
        asks: dict[tuple[str, tuple[str, ...]], tuple[int, Ask]] = {}
        for ci, claim in enumerate(self.claims):
            for request in claim.spec.requests:
                if len(request.asks) != 1:
                    continue
                ask = request.asks[0]
                if ask.mode is not AllocationMode.EXACT_COUNT or ask.admin_access:
                    continue
                key = (ask.class_name, ask.selectors)
                need[key] = need.get(key, 0) + ask.count
                asks.setdefault(key, (ci, ask))
        for key, wanted in need.items():
            ci, ask = asks[key]
            selected = [o for o in self.offered if self._selects(ci, ask, o)]
            if any(o.device.shareable for o in selected):
                continue  # one device may serve many requests: only the search can tell
            free = sum(1 for o in selected if o.id not in self.taken)
            if free < wanted:
                return True
        return False

    def count(self, ci: int, ask: Ask) -> tuple[int, int]:
        """(devices *ask* selects that are free, that are held by others)."""
        free = held = 0
        for o in self.offered:
            if self._selects(ci, ask, o):
                if o.id in self.taken and not ask.admin_access:
                    held += 1
                else:
                    free += 1
        return free, held
