"""The checks of tests/e2e/test_dra_differential.py on gang-scheduler's allocations: each
claim satisfied by its allocation (``dra_differential.check``) and accepted by the
apiserver (a ``dryRun=All`` status write), no device held whole twice, no shared GPU over
its memory and no MIG GPU over its counters (``dra_differential_mig``).

Apart from the test module so that one reads as the run (batches, answers, tallies) and
this as what an answer must be.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubernetes import client

from scheduler import placement
from scheduler.kube.write.claim_allocation import allocation_json, consumer_json
from scheduler.model.prebind import PreBindKind
from scheduler.tools.devcluster import rest
from tests.e2e import dra_differential as dd
from tests.e2e import dra_differential_mig as dm
from tests.e2e import dra_support as ds
from tests.e2e.cluster_api import ControlPlane


class Batch(Protocol):
    """What the checks read of a batch (``test_dra_differential.Batch``)."""

    cp: ControlPlane
    namespace: str
    pods: dict[str, tuple[dd.Case, list[tuple[dd.Case, str]]]]

    @property
    def resource(self) -> client.ResourceV1Api: ...


def taken_devices(cp: ControlPlane, namespace: str, node: str) -> set[str]:
    """The devices of *node* the batch's claims hold whole."""
    return {str(r["device"]) for c in ds.claims(cp, namespace) for r in ds.results(c)
            if r["pool"] == node and not r.get("shareID")}


def consumed_gib(cp: ControlPlane, namespace: str, node: str) -> dict[str, int]:
    """GiB of memory the batch's shares take of each shared device of *node*."""
    out: dict[str, int] = {}
    for c in ds.claims(cp, namespace):
        for r in ds.results(c):
            if r["pool"] == node and r.get("shareID"):
                out[str(r["device"])] = out.get(str(r["device"]), 0) + dd.consumed_gib(r)
    return out


def check_allocation(batch: Batch, uid: str, node: str, answer: placement.Placement,
                     devices: dict[str, dict[str, Any]], taken: set[str],
                     consumed: dict[str, int]) -> list[str]:
    """What is wrong with gang-scheduler's allocations of *uid*'s claims on *node*: one
    unsatisfied by its allocation or refused by the apiserver, a device held whole in two,
    a shared device's memory over its capacity with the shares *consumed* already, or a MIG
    GPU's counters over with the devices *taken* already."""
    bad: list[str] = []
    used: list[str] = []
    shares: list[dict[str, Any]] = []
    for c, claim in batch.pods[uid][1]:
        bad += _check_claim(batch, c, claim, node, answer, devices, taken, consumed, used,
                            shares, len(batch.pods[uid][1]) > 1)
    if len(set(used)) != len(used):
        bad.append(f"a device in two claims: {sorted(used)}")
    bad += [f"counters over: {o}" for o in dm.counters_over(devices, {*taken, *used})]
    total = dict(consumed)
    for r in shares:
        total[str(r["device"])] = total.get(str(r["device"]), 0) + dd.consumed_gib(r)
    for name, gib in total.items():
        if gib > dd.memory_gib(devices[name]):
            bad.append(f"{name}: {gib}Gi of memory shared, over its capacity")
    return bad


def _check_claim(batch: Batch, c: dd.Case, claim: str, node: str,
                 answer: placement.Placement, devices: dict[str, dict[str, Any]],
                 taken: set[str], consumed: dict[str, int], used: list[str],
                 shares: list[dict[str, Any]], two_claims: bool) -> list[str]:
    key = f"{batch.namespace}/{claim}"
    decisions = [p for p in answer.prebinds if p.claim == key and p.kind is PreBindKind.DEVICES]
    if c.shares:
        # Allocated already: only a reservation is added, on the node of its allocation.
        return ([] if decisions and all(d.allocation is None for d in decisions)
                else [f"shared claim: decisions {decisions}"])
    if len(decisions) != 1 or decisions[0].allocation is None:
        return [f"decisions {decisions}"]
    decision = decisions[0]
    assert decision.allocation is not None
    body = ds.read_claim(batch.cp, batch.namespace, claim)
    status: dict[str, Any] = {"allocation": allocation_json(decision.allocation, decision.config),
              "reservedFor": [consumer_json(x) for x in decision.consumers]}
    results = status["allocation"]["devices"]["results"]
    used += [str(r["device"]) for r in results if not r.get("shareID")]
    shares += [r for r in results if r.get("shareID")]
    bad = dd.check(c, results, node, devices, taken, two_claims, consumed)
    if decision.target != node:
        bad.append(f"decided on {decision.target}")
    body["status"] = status
    try:
        rest.call(batch.resource.replace_namespaced_resource_claim_status, claim,
                  batch.namespace, body, dry_run="All")
    except client.ApiException as exc:
        bad.append(f"refused by the apiserver: {exc.status} {exc.body}")
    return bad
