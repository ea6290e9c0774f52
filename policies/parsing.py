"""Turn decoded YAML/JSON objects into ``Queue`` and ``SchedulerPolicy`` values.

Pure and total: any input, however malformed, yields a value or a list of ``FieldError``s
naming each field path and the reason, never an exception. Objects are checked one at a time
here, each field through ``parsing_checks``; checks across objects (parents, cycles,
duplicates) live in ``validation``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from policies.errors import FieldError
from policies.parsing_checks import DNS_SUBDOMAIN, ObjectErrors, check_header, object_name
from policies.parsing_guards import BUDGET_FIELDS, GUARDS_FIELDS, parse_guards
from policies.parsing_interactive import INTERACTIVE_FIELDS, parse_interactive
from policies.queues import (
    PRESETS,
    Limits,
    OrderingMode,
    Packing,
    PoolQuota,
    PreemptionPolicy,
    Queue,
    QueueingPolicy,
    QueueingStrategy,
    ReclaimPolicy,
    SchedulerPolicy,
    WithinQueuePreemption,
)
from scheduler.model.resources import QuantityError, Resources, parse_quantity

QUEUE_KIND = "Queue"
#: The largest amount a quota may give (int64, like a Kubernetes quantity's fast path).
MAX_AMOUNT = 2**63 - 1
SCHEDULER_POLICY_KIND = "SchedulerPolicy"

_RESOURCE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_QUEUE_FIELDS = {"parent", "weight", "namespaces", "quotas", "preemption", "queueing",
                 "guards", "interactive"}
_QUOTA_FIELDS = {"pool", "nominal", "borrowingLimit", "lendingLimit"}
_PREEMPTION_FIELDS = {"withinQueue", "reclaimFromOthers", "minRuntimeSeconds",
                      "semiPreemptible"}
_QUEUEING_FIELDS = {"strategy", "backfill", "defaultRuntimeSeconds", "reserveAfterSeconds",
                    "ownerFairness"}
_POLICY_FIELDS = {"preset", "ordering", "preemption", "reservation", "backfill", "placement",
                  "fairShare", "scaleUp"}
_SCALE_UP_FIELDS = {"pools"}
_PLACEMENT_FIELDS = {"cpsat", "cpsatTimeLimitSeconds", "packing"}
_RESERVATION_FIELDS = {"afterSeconds", "maxGangs"}
_FAIR_SHARE_FIELDS = {"usageHalfLifeSeconds"}
_AMOUNT_FIELDS = {"nominal", "borrowingLimit", "lendingLimit"}  # resource -> quantity


def _paths(prefix: str, fields: set[str], nested: frozenset[str] = frozenset()
           ) -> tuple[str, ...]:
    """``prefix.field`` for each of *fields* but those in *nested* (read as a mapping of
    their own); ``{}`` after a resource mapping: each of its values."""
    return tuple(f"{prefix}.{f}" + ("{}" if f in _AMOUNT_FIELDS else "")
                 for f in sorted(fields - nested))


#: Every field of a Queue this module reads (``[]``: each item of a list; ``{}``: each value of
#: a resource mapping), from the same sets the parser checks against: what the fuzzing tests
#: try with extreme and adversarial values, so a new field is fuzzed as soon as it is read.
QUEUE_FIELDS: tuple[str, ...] = (
    *_paths("spec", _QUEUE_FIELDS, frozenset({"quotas", "preemption", "queueing", "guards",
                                               "interactive"})),
    *_paths("spec.quotas[]", _QUOTA_FIELDS),
    *_paths("spec.preemption", _PREEMPTION_FIELDS),
    *_paths("spec.queueing", _QUEUEING_FIELDS),
    *_paths("spec.guards", GUARDS_FIELDS, frozenset({"budget"})),
    *_paths("spec.guards.budget", BUDGET_FIELDS),
    *_paths("spec.interactive", INTERACTIVE_FIELDS),
)
#: The same for a SchedulerPolicy.
POLICY_FIELDS: tuple[str, ...] = (
    *_paths("spec", _POLICY_FIELDS, frozenset({"placement", "fairShare", "scaleUp"})),
    *_paths("spec.placement", _PLACEMENT_FIELDS),
    *_paths("spec.reservation", _RESERVATION_FIELDS),
    *_paths("spec.fairShare", _FAIR_SHARE_FIELDS),
    *_paths("spec.scaleUp", _SCALE_UP_FIELDS),
)


def _amounts(raw: Any, path: str, err: ObjectErrors) -> dict[str, int]:
    """A resource -> quantity mapping with zeros kept (they matter for limits and coverage)."""
    out: dict[str, int] = {}
    for key, value in err.mapping(raw, path).items():
        here = f"{path}.{key}"
        if not isinstance(key, str) or not _RESOURCE_NAME.match(key):
            err.add(here, "not a valid resource name")
            continue
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            err.add(here, f"must be >= 0, got {value!r}")
            continue
        if isinstance(value, str) and value.strip().startswith("-"):
            err.add(here, f"must be >= 0, got {value!r}")
            continue
        try:
            amount = parse_quantity(value, key)
        except QuantityError:
            err.add(here, f"must be a Kubernetes quantity like 8, '256' or '2Ti', got {value!r}")
            continue
        if amount > MAX_AMOUNT:  # 1e999 parses exactly; no cluster has it, floats overflow
            err.add(here, f"too large: at most {MAX_AMOUNT} in base units, got {value!r}")
            continue
        out[key] = amount
    return out


def _quota(raw: Any, path: str, err: ObjectErrors, has_parent: bool) -> PoolQuota | None:
    m = err.mapping(raw, path)
    err.unknown(m, path, _QUOTA_FIELDS)
    pool = m.get("pool")
    if not isinstance(pool, str) or not pool:
        err.add(f"{path}.pool", f"required: the node pool name, got {pool!r}")
    if "nominal" not in m:
        err.add(f"{path}.nominal", "required (use {} for a queue that only borrows)")
    nominal = _amounts(m.get("nominal"), f"{path}.nominal", err)
    borrowing = _amounts(m.get("borrowingLimit"), f"{path}.borrowingLimit", err)
    lending = _amounts(m.get("lendingLimit"), f"{path}.lendingLimit", err)
    for field_name, limits in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
        if limits and not has_parent:
            err.add(f"{path}.{field_name}", "only meaningful for a queue with spec.parent")
    for resource, value in sorted(lending.items()):
        if resource in nominal and value > nominal[resource]:
            err.add(f"{path}.lendingLimit.{resource}",
                    f"must be <= nominal ({nominal[resource]}), got {value}")
    if not isinstance(pool, str) or not pool:
        return None
    return PoolQuota(pool=pool, nominal=Resources(nominal), covered=frozenset(nominal),
                     borrowing_limit=Limits.of(borrowing), lending_limit=Limits.of(lending))


def _namespaces(raw: Any, err: ObjectErrors) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(n, str) and n for n in raw):
        err.add("spec.namespaces", f"must be a list of namespace names or globs, got {raw!r}")
        return ()
    return tuple(raw)


def parse_queue(obj: Any, index: int = 0) -> tuple[Queue | None, list[FieldError]]:
    """One ``kind: Queue`` object; the queue is None when any error was found."""
    err = ObjectErrors(object_name(obj, index))
    name = check_header(obj, QUEUE_KIND, err)
    spec = err.mapping(obj.get("spec") if isinstance(obj, Mapping) else None, "spec")
    err.unknown(spec, "spec", _QUEUE_FIELDS)
    parent = spec.get("parent")
    if parent is not None and (not isinstance(parent, str) or not DNS_SUBDOMAIN.match(parent)):
        err.add("spec.parent", f"must be a queue name, got {parent!r}")
        parent = None
    if parent is not None and parent == name:
        err.add("spec.parent", "a queue cannot be its own parent")
    weight = err.number(spec.get("weight"), "spec.weight", 1.0, positive=True)
    quotas_raw = spec.get("quotas") or []
    quotas: list[PoolQuota] = []
    if not isinstance(quotas_raw, list):
        err.add("spec.quotas", f"must be a list of per-pool quotas, got {quotas_raw!r}")
        quotas_raw = []
    seen: set[str] = set()
    for i, raw in enumerate(quotas_raw):
        quota = _quota(raw, f"spec.quotas[{i}]", err, has_parent=parent is not None)
        if quota is None:
            continue
        if quota.pool in seen:
            err.add(f"spec.quotas[{i}].pool", f"duplicate pool {quota.pool!r}")
        seen.add(quota.pool)
        quotas.append(quota)
    pre = err.mapping(spec.get("preemption"), "spec.preemption")
    err.unknown(pre, "spec.preemption", _PREEMPTION_FIELDS)
    preemption = PreemptionPolicy(
        within_queue=err.enum(pre.get("withinQueue"), "spec.preemption.withinQueue",
                              WithinQueuePreemption, WithinQueuePreemption.LOWER_PRIORITY),
        reclaim_from_others=err.enum(pre.get("reclaimFromOthers"),
                                     "spec.preemption.reclaimFromOthers",
                                     ReclaimPolicy, ReclaimPolicy.ANY),
        min_runtime_seconds=err.seconds(pre.get("minRuntimeSeconds"),
                                       "spec.preemption.minRuntimeSeconds", 0.0),
        semi_preemptible=err.boolean(pre.get("semiPreemptible"),
                                     "spec.preemption.semiPreemptible", False),
    )
    if preemption.semi_preemptible and parent is None:
        err.add("spec.preemption.semiPreemptible",
                "only meaningful for a queue with spec.parent: a top-level queue borrows "
                "from nobody, so no other queue ever reclaims from it")
    if preemption.semi_preemptible and not quotas_raw:
        err.add("spec.preemption.semiPreemptible",
                "needs spec.quotas: it keeps what runs within the queue's quota, and a "
                "queue without quota has none")
    qing = err.mapping(spec.get("queueing"), "spec.queueing")
    err.unknown(qing, "spec.queueing", _QUEUEING_FIELDS)
    queueing = QueueingPolicy(
        strategy=err.enum(qing.get("strategy"), "spec.queueing.strategy", QueueingStrategy,
                          QueueingStrategy.BEST_EFFORT),
        backfill=err.boolean(qing.get("backfill"), "spec.queueing.backfill", True),
        default_runtime_seconds=err.seconds(qing.get("defaultRuntimeSeconds"),
                                           "spec.queueing.defaultRuntimeSeconds", None,
                                           positive=True),
        reserve_after_seconds=err.seconds(qing.get("reserveAfterSeconds"),
                                         "spec.queueing.reserveAfterSeconds", None),
        owner_fairness=err.boolean(qing.get("ownerFairness"), "spec.queueing.ownerFairness",
                                   False),
    )
    namespaces = _namespaces(spec.get("namespaces"), err)
    guards = parse_guards(spec.get("guards"), err)
    interactive = parse_interactive(spec.get("interactive"), err)
    if err.errors or name is None:
        return None, err.errors
    return Queue(name=name, parent=parent, weight=weight, namespaces=namespaces,
                 quotas=tuple(sorted(quotas, key=lambda q: q.pool)),
                 preemption=preemption, queueing=queueing, guards=guards,
                 interactive=interactive), []


def parse_scheduler_policy(obj: Any, index: int = 0,
                           ) -> tuple[SchedulerPolicy | None, list[FieldError]]:
    """One ``kind: SchedulerPolicy``: a preset (default ``gang-scheduler``) plus overrides."""
    err = ObjectErrors(object_name(obj, index))
    check_header(obj, SCHEDULER_POLICY_KIND, err)
    spec = err.mapping(obj.get("spec") if isinstance(obj, Mapping) else None, "spec")
    err.unknown(spec, "spec", _POLICY_FIELDS)
    preset = spec.get("preset", "gang-scheduler")
    if not isinstance(preset, str) or preset not in PRESETS:
        err.add("spec.preset", f"must be one of {' | '.join(sorted(PRESETS))}, got {preset!r}")
        preset = "gang-scheduler"
    base = PRESETS[preset]
    placement = err.mapping(spec.get("placement"), "spec.placement")
    err.unknown(placement, "spec.placement", _PLACEMENT_FIELDS)
    params = replace(
        base.placement,
        use_cpsat=err.boolean(placement.get("cpsat"), "spec.placement.cpsat",
                              base.placement.use_cpsat),
        cpsat_time_limit=err.seconds(placement.get("cpsatTimeLimitSeconds"),
                                    "spec.placement.cpsatTimeLimitSeconds",
                                    base.placement.cpsat_time_limit, positive=True),
    )
    reservation, reserve_after, max_reservations = _reservation(spec.get("reservation"), base,
                                                                 err)
    fair = err.mapping(spec.get("fairShare"), "spec.fairShare")
    err.unknown(fair, "spec.fairShare", _FAIR_SHARE_FIELDS)
    policy = SchedulerPolicy(
        ordering=err.enum(spec.get("ordering"), "spec.ordering", OrderingMode, base.ordering),
        preemption=err.boolean(spec.get("preemption"), "spec.preemption", base.preemption),
        reservation=reservation,
        reserve_after_seconds=reserve_after,
        max_reservations=max_reservations,
        backfill=err.boolean(spec.get("backfill"), "spec.backfill", base.backfill),
        placement=params,
        packing=err.enum(placement.get("packing"), "spec.placement.packing", Packing,
                         base.packing),
        usage_half_life_seconds=err.seconds(fair.get("usageHalfLifeSeconds"),
                                            "spec.fairShare.usageHalfLifeSeconds",
                                            base.usage_half_life_seconds),
        scale_up_pools=_scale_up_pools(spec.get("scaleUp"), base, err),
    )
    return (None, err.errors) if err.errors else (policy, [])


def _scale_up_pools(raw: Any, base: SchedulerPolicy, err: ObjectErrors) -> frozenset[str]:
    """``scaleUp: {pools: [names]}``: the pools whose gangs may ask the autoscaler for nodes."""
    scale_up = err.mapping(raw, "spec.scaleUp")
    err.unknown(scale_up, "spec.scaleUp", _SCALE_UP_FIELDS)
    pools = scale_up.get("pools")
    if pools is None:
        return base.scale_up_pools
    if not isinstance(pools, list) or not all(isinstance(p, str) and p for p in pools):
        err.add("spec.scaleUp.pools", f"must be a list of pool names, got {pools!r}")
        return base.scale_up_pools
    return frozenset(pools)


def _reservation(raw: Any, base: SchedulerPolicy,
                 err: ObjectErrors) -> tuple[bool, float, int]:
    """``reservation: true | false``, or ``reservation: {afterSeconds: N, maxGangs: K}``: on,
    for gangs pending at least N seconds, at most K reserved gangs at once. Returns
    (reservation, reserve_after_seconds, max_reservations)."""
    if isinstance(raw, Mapping):
        err.unknown(raw, "spec.reservation", _RESERVATION_FIELDS)
        after = err.seconds(raw.get("afterSeconds"), "spec.reservation.afterSeconds",
                           base.reserve_after_seconds)
        most = raw.get("maxGangs")
        if most is None:
            most = base.max_reservations
        elif isinstance(most, bool) or not isinstance(most, int) or most < 1:
            err.add("spec.reservation.maxGangs", f"must be a whole number >= 1, got {most!r}")
            most = base.max_reservations
        return True, after, most
    if raw is not None and not isinstance(raw, bool):
        err.add("spec.reservation",
                f"must be true, false or {{afterSeconds: N, maxGangs: K}}, got {raw!r}")
        raw = None
    return ((base.reservation if raw is None else raw), base.reserve_after_seconds,
            base.max_reservations)


def flatten(doc: Any) -> list[Any]:
    """The objects of one YAML document: itself, or the ``items`` of a ``kind: List``."""
    kind = doc.get("kind") if isinstance(doc, Mapping) else None
    if isinstance(kind, str) and kind.endswith("List"):
        items = doc.get("items") or []
        return list(items) if isinstance(items, list) else [items]
    return [] if doc is None else [doc]

