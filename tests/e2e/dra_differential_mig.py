"""Partitionable devices in tests/e2e/test_dra_differential.py (issue 36, MIG): which nodes
publish MIG devices, the fillers kube-scheduler allocates on them, selector atoms on a MIG
device's profile and type, and the check that an allocation keeps every GPU within its
counters.

Apart from ``dra_differential`` (the generic cases and checks) so each stays readable; the
fake driver's MIG layout is ``scheduler.tools.devcluster.dra_mig``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.tools.devcluster import dra, dra_mig
from tests.e2e import dra_support as ds

Device = Mapping[str, Any]
ATTR = f'device.attributes["{dra.DRIVER}"]'
#: Share of a batch's nodes that publish MIG devices.
MIG_NODES = 0.3


def partitionable(d: Device) -> bool:
    return bool(d.get("consumesCounters"))


def has_mig(devices: Mapping[str, Device]) -> bool:
    return any(partitionable(d) for d in devices.values())


def gpus(devices: Mapping[str, Device]) -> int:
    """How many physical GPUs a MIG node's *devices* are of (its whole-GPU devices)."""
    return sum((d.get("attributes") or {}).get("type") == {"string": "gpu"}
               for d in devices.values())


def guarded(name: str, value: str) -> str:
    """CEL: the device's attribute *name* is *value*; a device without it is no match (not
    a CEL runtime error, so a whole GPU of another node is simply not selected)."""
    return f'"{name}" in {ATTR} && {ATTR}.{name} == {json.dumps(value)}'


def atom(rng: random.Random) -> tuple[str, Any, str]:
    """(CEL, Python predicate, text) of a selector on what only MIG nodes publish."""
    from tests.e2e.dra_differential import attr  # (the generic module imports this one)

    if rng.random() < 0.3:
        kind = rng.choice(("gpu", "mig"))
        return guarded("type", kind), lambda d: attr(d, "type") == kind, f"type={kind}"
    p = rng.choice(list(dra_mig.PROFILES))
    return guarded("profile", p), lambda d: attr(d, "profile") == p, f"profile={p}"


def filler_specs(rng: random.Random, gpus: int) -> list[dict[str, Any]]:
    """Claim specs kube-scheduler fits on a MIG node of *gpus* GPUs whatever the order it
    takes them in: some whole GPUs, then up to two 3g.40gb per remaining GPU (first fit
    packs them two to a GPU, and a whole GPU takes an untouched one)."""
    wholes = rng.randrange(0, gpus + 1) if rng.random() < 0.5 else 0
    slices = rng.randrange(0, 2 * (gpus - wholes) + 1)
    return ([ds.exactly(dra.DRIVER, 1, guarded("type", "gpu"))] * wholes
            + [ds.exactly(dra.DRIVER, 1, guarded("profile", "3g.40gb"))] * slices)


def counters_over(devices: Mapping[str, Device], names: Iterable[str]) -> list[str]:
    """The counters some GPU would be over if every device of *names* (held or allocated)
    were taken at once: [] when each counter set keeps within its values."""
    used: dict[tuple[str, str], int] = {}
    for name in names:
        for consumption in devices[name].get("consumesCounters") or ():
            for counter, amount in consumption["counters"].items():
                key = (consumption["counterSet"], counter)
                used[key] = used.get(key, 0) + int(amount["value"])
    return [f"{s}: {c} {n} of {dra_mig.WHOLE[c]}" for (s, c), n in sorted(used.items())
            if n > dra_mig.WHOLE[c]]
