"""The config an allocation carries for its drivers, chosen as kube-scheduler chooses it.

A DRA driver prepares a device from the claim's ``status.allocation`` alone: the opaque
config entries of the DeviceClasses the requests used and of the claim's own
``spec.devices.config`` are copied into ``allocation.devices.config`` when the claim is
allocated, and a class edited afterwards does not change a claim allocated before. So the
copy belongs to the allocation decision, made from the classes placement allocated with
(``PreBind.config`` carries it to the writer), not to the write, which would read classes
that may have changed since. The order and grouping are kube-scheduler's (the structured
allocator, as of Kubernetes 1.34), so a driver sees what it would have seen under
kube-scheduler:

- the classes first, in the order of the claim's requests: each class's entries once (source
  ``FromClass``), naming every request (``req``, or ``req/sub`` for the sub-request a
  ``firstAvailable`` request got) that used the class;
- then the claim's entries in order (source ``FromClaim``, their own ``requests``): one that
  names no request once; one that names requests once per request of the claim it names
  (by name, or by its chosen sub-request's ``req/sub``), as kube-scheduler repeats it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from scheduler.model.devices import (
    AllocatedConfig,
    Allocation,
    Ask,
    ClaimSpec,
    ConfigSource,
    DeviceClass,
    DeviceConfig,
    Request,
)


def _chosen(request: Request, allocated: Collection[str]) -> Ask | None:
    """The ask of *request* its devices were allocated for (None: a ``firstAvailable``
    request none of whose sub-requests got a device)."""
    if not request.first_available:
        return request.asks[0] if request.asks else None
    return next((a for a in request.asks if a.name in allocated), None)


def allocation_config(spec: ClaimSpec, classes: Mapping[str, DeviceClass],
                      allocation: Allocation) -> tuple[AllocatedConfig, ...]:
    """The ``allocation.devices.config`` of a claim with *spec* allocated *allocation*,
    *classes* by name (every class a chosen request names; a missing one is a ValueError:
    nothing can have been allocated from a class the allocator did not have)."""
    allocated = {r.request for r in allocation.results}
    entries: list[tuple[ConfigSource, DeviceConfig, list[str]]] = []
    by_class: dict[str, range] = {}
    for request in spec.requests:
        ask = _chosen(request, allocated)
        if ask is None:
            continue
        if ask.class_name in by_class:
            for i in by_class[ask.class_name]:
                entries[i][2].append(ask.name)
            continue
        cls = classes.get(ask.class_name)
        if cls is None:
            raise ValueError(f"request {ask.name}: no DeviceClass {ask.class_name!r}")
        start = len(entries)
        entries += [(ConfigSource.FROM_CLASS, c, [ask.name]) for c in cls.config]
        by_class[ask.class_name] = range(start, len(entries))
    for c in spec.config:
        if not c.requests:
            entries.append((ConfigSource.FROM_CLAIM, c, []))
            continue
        for request in spec.requests:
            ask = _chosen(request, allocated) if request.first_available else None
            if request.name in c.requests or (ask is not None and ask.name in c.requests):
                entries.append((ConfigSource.FROM_CLAIM, c, list(c.requests)))
    return tuple(AllocatedConfig(source, DeviceConfig(c.driver, c.parameters, tuple(reqs)))
                 for source, c, reqs in entries)
