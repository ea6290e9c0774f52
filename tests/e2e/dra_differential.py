"""Cases and checks of tests/e2e/test_dra_differential.py: generated single-pod device claims,
what each asks of a device (as CEL for the apiserver and as a Python predicate for the check),
and whether an allocation satisfies its claim.

Why a Python predicate beside each CEL selector: the test checks gang-scheduler's allocations
without trusting gang-scheduler's own CEL evaluation, so every generated selector is made of
a few atoms whose meaning is written twice, once per language, side by side.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scheduler.tools.devcluster import dra
from tests.e2e import dra_differential_mig as dm

Device = Mapping[str, Any]  # a device of a ResourceSlice, as the apiserver returns it
Predicate = Callable[[Device], bool]

#: Products the batches' nodes carry: their memory and compute capability differ, so class,
#: memory and semver selectors discriminate between nodes.
PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB",
            "NVIDIA-L40S")
RACK_LABEL = "topology.gangscheduler.io/rack"
REQUEST = "gpu"
#: kube-scheduler's allocator error for an ``allocationMode: All`` request whose devices on
#: some node break a ``matchAttribute`` constraint: it fails the pod on every node.
CONSTRAINT_ERROR = "because a claim constraint would not be satisfied"
#: Its error for a claim whose requests (an ``All`` one counting every device it selects on
#: the node) ask for more than 32 devices on some node (a MIG node has 14 per GPU): it too
#: fails the pod on every node.
LIMIT_ERROR = "exceeds the claim limit of 32"
ATTR = f'device.attributes["{dra.DRIVER}"]'
MEMORY = f'device.capacity["{dra.DRIVER}"].memory'
#: GiB of memory a generated request may ask per device: a small or large share of the
#: products' 40-80Gi, a whole one, and more than any has.
SHARE_GIB = (1, 5, 8, 20, 40, 48, 80, 100)


def attr(d: Device, name: str) -> Any:
    """The value of attribute *name* of *d* (None when it has none)."""
    value = (d.get("attributes") or {}).get(name)
    return next(iter(value.values())) if value else None


def _gib(quantity: str) -> int:
    assert quantity.endswith("Gi"), quantity
    return int(quantity[:-2])


def _semver(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def memory_gib(d: Device) -> int:
    return _gib(str(d["capacity"]["memory"]["value"]))


@dataclass(frozen=True)
class Selector:
    cel: str
    test: Predicate
    text: str  # for messages
    #: It fails at evaluation on some devices (a CEL runtime error), ``test`` then says no.
    errs: bool = False


def _atom(rng: random.Random, products: Sequence[str]) -> Selector:
    if rng.random() < 0.03:
        # No device has the attribute: a CEL runtime error, not a false (rare: wherever it
        # is an error, kube-scheduler fails the pod on every node).
        return Selector(f'{ATTR}.nvlinkDomain == "x"', lambda d: False, "nvlinkDomain=x",
                        errs=True)
    if rng.random() < 0.15:  # MIG nodes' devices (issue 36)
        return Selector(*dm.atom(rng))
    kind = rng.randrange(9)
    if kind == 7:
        return Selector(f"has({ATTR}.nvlinkDomain)", lambda d: False, "has(nvlinkDomain)")
    if kind == 8:
        gi = rng.choice((40960, 81920))
        return Selector(f'{MEMORY}.isGreaterThan(quantity("{gi}Mi"))',
                        lambda d: memory_gib(d) * 1024 > gi, f"memory>{gi}Mi")
    if kind == 0:
        p = rng.choice([*products, "NVIDIA-T4"])
        return Selector(f"{ATTR}.productName == {json.dumps(p)}",
                        lambda d: attr(d, "productName") == p, f"product={p}")
    if kind == 1:
        gi = rng.choice((40, 48, 64, 80))
        return Selector(f'{MEMORY}.compareTo(quantity("{gi}Gi")) >= 0',
                        lambda d: memory_gib(d) >= gi, f"memory>={gi}Gi")
    if kind == 2:
        k = rng.randrange(1, 6)
        return Selector(f"{ATTR}.index < {k}", lambda d: int(attr(d, "index")) < k,
                        f"index<{k}")
    if kind == 3:
        return Selector(f"{ATTR}.index % 2 == 0", lambda d: int(attr(d, "index")) % 2 == 0,
                        "index even")
    if kind == 4:
        v = rng.choice(("8.5.0", "9.0.0"))
        return Selector(f'{ATTR}.cudaComputeCapability.compareTo(semver("{v}")) >= 0',
                        lambda d: _semver(str(attr(d, "cudaComputeCapability")))
                        >= _semver(v), f"cc>={v}")
    if kind == 5:
        prefix = rng.choice(("NVIDIA-A100", "NVIDIA-H"))
        return Selector(f"{ATTR}.productName.startsWith({json.dumps(prefix)})",
                        lambda d: str(attr(d, "productName")).startswith(prefix),
                        f"product^={prefix}")
    arch = rng.choice(("Hopper", "Ampere"))
    return Selector(f"{ATTR}.architecture == {json.dumps(arch)}",
                    lambda d: attr(d, "architecture") == arch, f"arch={arch}")


def selector(rng: random.Random, products: Sequence[str]) -> Selector | None:
    """None, one atom, or two joined by ``&&`` / ``||``, sometimes negated."""
    shape = rng.randrange(6)
    if shape == 0:
        return None
    a = _atom(rng, products)
    if shape <= 2:
        return a
    b = _atom(rng, products)
    if shape == 3:
        return Selector(f"({a.cel}) && ({b.cel})", lambda d: a.test(d) and b.test(d),
                        f"{a.text}&{b.text}", a.errs or b.errs)
    if shape == 4:
        return Selector(f"({a.cel}) || ({b.cel})", lambda d: a.test(d) or b.test(d),
                        f"{a.text}|{b.text}", a.errs or b.errs)
    return Selector(f"!({a.cel})", lambda d: not a.test(d), f"!{a.text}", a.errs)


@dataclass(frozen=True)
class Request:
    """One (sub)request: its class (the product, or None for every GPU of the driver), a
    selector, and a count (None: ``allocationMode: All``)."""

    name: str
    product: str | None
    sel: Selector | None
    count: int | None
    #: GiB of ``memory`` asked per device (``capacity.requests``): a share of a shareable
    #: device, a lower bound on a device held whole.
    memory_gib: int | None = None

    @property
    def device_class(self) -> str:
        return dra.class_name(self.product) if self.product else dra.DRIVER

    def matches(self, d: Device) -> bool:
        return ((self.product is None or attr(d, "productName") == self.product)
                and (self.sel is None or self.sel.test(d)))

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"deviceClassName": self.device_class}
        if self.count is None:
            out["allocationMode"] = "All"
        else:
            out["count"] = self.count
        if self.sel:
            out["selectors"] = [{"cel": {"expression": self.sel.cel}}]
        if self.memory_gib is not None:
            out["capacity"] = {"requests": {"memory": f"{self.memory_gib}Gi"}}
        return out

    def describe(self) -> str:
        n = "All" if self.count is None else str(self.count)
        mem = f" memory {self.memory_gib}Gi" if self.memory_gib is not None else ""
        return (f"{self.name}:{n}x{self.product or 'any'}[{self.sel.text if self.sel else ''}]"
                f"{mem}")


@dataclass(frozen=True)
class Case:
    """A claim made for the trial (requests, optional ``firstAvailable`` alternatives, a
    ``matchAttribute``) or, with *shares*, the allocated claim of an earlier pod."""

    name: str
    requests: tuple[Request, ...] = ()
    first_available: bool = False  # requests are the alternatives of one request "gpu"
    match: str | None = None  # the unqualified attribute of a matchAttribute constraint
    match_requests: tuple[str, ...] = ()  # the constraint's requests (empty: all)
    shares: str | None = None  # an allocated claim of the batch's filler pods
    pods: int = 1  # trial pods using the claim (2: a claim shared by two pending pods)
    node: str | None = None  # a node the pods are pinned to
    second: Case | None = None  # a second claim of the same pod

    def spec(self) -> dict[str, Any]:
        if self.first_available:
            requests: list[dict[str, Any]] = [{"name": REQUEST, "firstAvailable": [
                {"name": r.name, **r.json()} for r in self.requests]}]
        else:
            requests = [{"name": r.name, "exactly": r.json()} for r in self.requests]
        devices: dict[str, Any] = {"requests": requests}
        if self.match:
            constraint: dict[str, Any] = {"matchAttribute": f"{dra.DRIVER}/{self.match}"}
            if self.match_requests:
                constraint["requests"] = list(self.match_requests)
            devices["constraints"] = [constraint]
        return {"devices": devices}

    @property
    def selector_errs(self) -> bool:
        """A selector of the pod's claims fails at evaluation on some devices: kube-scheduler
        meets the error only if its search reaches such a device, and then fails the pod on
        every node; gang-scheduler evaluates every device of a node and rules the node out.
        Not compared (README, "Known differences from kube-scheduler")."""
        parts = [self] + ([self.second] if self.second else [])
        return any(r.sel is not None and r.sel.errs for p in parts for r in p.requests)

    def may_fail(self, message: str) -> bool:
        """Whether *message*, kube-scheduler's, is an allocator error this case can cause,
        which fails the pod on every node where gang-scheduler rules out only the node
        (README, "Known differences from kube-scheduler"): an ``All`` request whose devices
        break a ``matchAttribute`` constraint, or that selects more than 32 devices."""
        parts = [self] + ([self.second] if self.second else [])
        every = [p for p in parts if any(r.count is None for r in p.requests)]
        return ((CONSTRAINT_ERROR in message and any(p.match for p in every))
                or (LIMIT_ERROR in message and bool(every)))

    def describe(self) -> str:
        if self.shares:
            return f"{self.name}: shares {self.shares}"
        kind = "firstAvailable" if self.first_available else "requests"
        return (f"{self.name}: {kind} " + ", ".join(r.describe() for r in self.requests)
                + (f" matchAttribute={self.match}{list(self.match_requests) or ''}"
                   if self.match else "")
                + (f" and claim {self.second.describe()}" if self.second else "")
                + (f" x{self.pods} pods" if self.pods > 1 else "")
                + (f" on {self.node}" if self.node else ""))


def _request(rng: random.Random, name: str, products: Sequence[str]) -> Request:
    product = rng.choice(products) if rng.random() < 0.35 else None
    count = None if rng.random() < 0.1 else rng.choice((1, 1, 2, 2, 3, 4, 5, 8))
    # A share of memory (not with All, whose meaning with capacity is not compared here).
    memory = (rng.choice(SHARE_GIB) if count is not None and rng.random() < 0.3 else None)
    return Request(name, product, selector(rng, products), count, memory)


def case(rng: random.Random, name: str, products: Sequence[str], nodes: Sequence[str],
         fillers: Sequence[str]) -> Case:
    """One generated trial over a batch of *nodes* carrying *products*; *fillers*: the
    batch's claims already allocated by kube-scheduler."""
    node = rng.choice(nodes) if rng.random() < 0.15 else None
    if fillers and rng.random() < 0.08:
        return Case(name, shares=rng.choice(fillers), node=node)
    second = _claim(rng, f"{name}-b", products) if rng.random() < 0.1 else None
    return replace(_claim(rng, name, products), node=node, second=second,
                   pods=2 if rng.random() < 0.08 else 1)


def _claim(rng: random.Random, name: str, products: Sequence[str]) -> Case:
    match = (rng.choice(("cliqueID", "productName", "index", "driverVersion", "nvlinkDomain"))
             if rng.random() < 0.3 else None)
    shape = rng.random()
    if shape < 0.12:
        alternatives = (_request(rng, "a", products), _request(rng, "b", products))
        return Case(name, alternatives, first_available=True, match=match)
    n = 2 if shape < 0.3 else 1
    reqs = tuple(_request(rng, f"r{i}", products) for i in range(n))
    subset = ("r0",) if n == 2 and match and rng.random() < 0.5 else ()
    return Case(name, reqs, match=match, match_requests=subset)


def shared(d: Device) -> bool:
    return bool(d.get("allowMultipleAllocations"))


def consumed_gib(result: Mapping[str, Any]) -> int:
    """The GiB of memory a result's share takes (0: a device held whole)."""
    return _quantity_gib(str((result.get("consumedCapacity") or {}).get("memory", "0")))


def _quantity_gib(text: str) -> int:
    if text.endswith("Gi"):
        return int(text[:-2])
    assert int(text) % 2**30 == 0, text
    return int(text) // 2**30


def check(c: Case, results: Sequence[Mapping[str, Any]], node: str,
          devices: Mapping[str, Device], taken: set[str],
          has_second: bool = False, consumed: Mapping[str, int] | None = None) -> list[str]:
    """What is wrong with *results* (``status.allocation.devices.results``) as an allocation
    of *c* on *node*, whose devices are *devices* and of which *taken* are held whole by
    other claims; [] when it satisfies the claim. *has_second*: the pod has another claim,
    which may hold devices this one would have preferred. *consumed*: GiB the others' shares
    take of each shared device. (Whether shares fit their devices beside the others' is
    checked per pod: ``test_dra_differential.check_allocation``.)"""
    bad: list[str] = []
    names = [str(r["device"]) for r in results]
    whole = [n for n in names if n not in devices or not shared(devices[n])]
    if len(set(whole)) != len(whole):
        bad.append(f"a device twice: {names}")
    for r in results:
        if r["driver"] != dra.DRIVER or r["pool"] != node or r["device"] not in devices:
            bad.append(f"not a device of {node}: {r}")
    if bad:
        return bad
    if set(names) & taken:
        bad.append(f"allocated elsewhere already: {sorted(set(names) & taken)}")
    for r in results:
        d = devices[str(r["device"])]
        if shared(d) != bool(r.get("shareID")):
            bad.append(f"{r['device']}: shareID {r.get('shareID')!r} on a device "
                       f"{'shared' if shared(d) else 'held whole'}")
    by_request: dict[str, list[str]] = {}
    for r in results:
        by_request.setdefault(str(r["request"]), []).append(str(r["device"]))
    if c.first_available:
        chosen = [r for r in c.requests if f"{REQUEST}/{r.name}" in by_request]
        if len(chosen) != 1 or len(by_request) != 1:
            return [*bad, f"not one alternative: {sorted(by_request)}"]
        wanted = {f"{REQUEST}/{chosen[0].name}": chosen[0]}
        # An earlier alternative that fits must have been preferred. Checked where fitting
        # is a plain count (an exact count, no constraint, no second claim competing).
        first = c.requests[0]
        if (chosen[0] is not first and first.count is not None and not c.match
                and not has_second and first.memory_gib is None
                and not any(shared(d) or dm.partitionable(d) for d in devices.values())):
            free = [n for n, d in devices.items() if n not in taken and first.matches(d)]
            if len(free) >= first.count:
                bad.append(f"{first.describe()} fits ({free}) but was passed over")
    else:
        wanted = {r.name: r for r in c.requests}
        if set(by_request) != set(wanted):
            bad.append(f"requests {sorted(by_request)}, wanted {sorted(wanted)}")
    for key, req in wanted.items():
        got = by_request.get(key, [])
        for n in got:
            if not req.matches(devices[n]):
                bad.append(f"{n} does not match {req.describe()}")
            if req.memory_gib is not None and req.memory_gib > memory_gib(devices[n]):
                bad.append(f"{n} has less memory than {req.describe()} asks")
        for r in results:
            if str(r["request"]) != key or not shared(devices[str(r["device"])]):
                continue
            whole_gib = memory_gib(devices[str(r["device"])])
            want = whole_gib if req.memory_gib is None else req.memory_gib
            if consumed_gib(r) != want:  # the fake driver's policy: whole GiB, all by default
                bad.append(f"{r['device']}: consumed {consumed_gib(r)}Gi, asked {want}Gi")
        if req.count is None:  # every matching device with room for a whole share
            matching = sorted(n for n, d in devices.items() if req.matches(d)
                              and not (shared(d) and (consumed or {}).get(n)))
            if sorted(got) != matching:
                bad.append(f"All of {req.describe()}: {sorted(got)}, matching {matching}")
        elif len(got) != req.count:
            bad.append(f"{len(got)} devices for {req.describe()}")
    if c.match:
        bound = [str(r["device"]) for r in results
                 if not c.match_requests or str(r["request"]) in c.match_requests]
        values = {json.dumps(attr(devices[n], c.match)) for n in bound}
        if len(values) > 1 or "null" in values:
            bad.append(f"matchAttribute {c.match}: values {sorted(values)}")
    return bad
