"""A second, independent reading of kube-scheduler's per-pod filters, for property tests.

Written from the plugins' code (InterPodAffinity, PodTopologySpread, NodePorts,
NodeUnschedulable/TaintToleration through ``PodRequirements.allows``), one pod against the
pods already on the nodes, with none of the placement core's machinery. ``sequence`` then
asks whether a gang's placement could be reached by binding its members one at a time with
every bind passing these filters: what "never violates a required constraint" means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.model import Node, PodRequirements
from scheduler.model.constraints import PodAffinityTerm


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str]
    requirements: PodRequirements
    node: str = ""
    terminating: bool = False


def _key_value(nodes: Mapping[str, Node], node: str, key: str) -> str | None:
    return nodes[node].labels.get(key)


def _term_selects(term: PodAffinityTerm, pod: Pod, ns_labels: Mapping[str, Mapping[str, str]]
                  ) -> bool:
    return term.matches(pod.namespace, pod.labels, ns_labels.get(pod.namespace, {}))


def interpod_ok(pod: Pod, node: str, nodes: Mapping[str, Node], placed: Sequence[Pod],
                ns_labels: Mapping[str, Mapping[str, str]]) -> bool:
    c = pod.requirements.constraints
    here = nodes[node].labels
    # Existing pods' required anti-affinity, matched against the incoming pod.
    for p in placed:
        for t in p.requirements.constraints.anti_affinity:
            v = _key_value(nodes, p.node, t.topology_key)
            if v is not None and here.get(t.topology_key) == v and _term_selects(t, pod, ns_labels):
                return False
    # The incoming pod's anti-affinity.
    for t in c.anti_affinity:
        if t.topology_key not in here:
            continue
        for p in placed:
            if (_key_value(nodes, p.node, t.topology_key) == here[t.topology_key]
                    and _term_selects(t, p, ns_labels)):
                return False
    # The incoming pod's affinity: pods matching all terms, counted per (key, value).
    if c.affinity:
        counts: dict[tuple[str, str], int] = {}
        for p in placed:
            if all(_term_selects(t, p, ns_labels) for t in c.affinity):
                for t in c.affinity:
                    v = _key_value(nodes, p.node, t.topology_key)
                    if v is not None:
                        counts[(t.topology_key, v)] = counts.get((t.topology_key, v), 0) + 1
        exist = True
        for t in c.affinity:
            if t.topology_key not in here:
                return False
            if counts.get((t.topology_key, here[t.topology_key]), 0) <= 0:
                exist = False
        if not exist and not (not counts and all(_term_selects(t, pod, ns_labels)
                                                 for t in c.affinity)):
            return False
    return True


def spread_ok(pod: Pod, node: str, nodes: Mapping[str, Node], placed: Sequence[Pod]) -> bool:
    required = pod.requirements.constraints.required_spread
    if not required:
        return True
    keys = {c.topology_key for c in required}
    if not keys <= nodes[node].labels.keys():
        return False
    req = pod.requirements
    for c in required:
        counting = [n for n, nd in nodes.items() if keys <= nd.labels.keys()
                    and (c.node_affinity_policy == "Ignore" or req.selects(nd))
                    and (c.node_taints_policy == "Ignore" or req.untolerated_taint(nd) is None)]
        counts = {nodes[n].labels[c.topology_key]: 0 for n in counting}
        for p in placed:
            if (p.node in counting and p.namespace == pod.namespace and not p.terminating
                    and not c.selector.empty and c.selector.matches(p.labels)):
                counts[nodes[p.node].labels[c.topology_key]] += 1
        low = 0 if len(counts) < c.min_domains else min(counts.values(), default=0)
        mine = 1 if c.selector.matches(pod.labels) else 0
        if counts.get(nodes[node].labels[c.topology_key], 0) + mine - low > c.max_skew:
            return False
    return True


def ports_ok(pod: Pod, node: str, placed: Sequence[Pod]) -> bool:
    want = pod.requirements.constraints.host_ports
    return not any(p.node == node and any(a.conflicts(b) for a in want
                                           for b in p.requirements.constraints.host_ports)
                   for p in placed)


def passes(pod: Pod, node: str, nodes: Mapping[str, Node], placed: Sequence[Pod],
           ns_labels: Mapping[str, Mapping[str, str]]) -> bool:
    """Would kube-scheduler's filters admit *pod* on *node* beside *placed* (capacity aside)?"""
    return (pod.requirements.allows(nodes[node]) and ports_ok(pod, node, placed)
            and interpod_ok(pod, node, nodes, placed, ns_labels)
            and spread_ok(pod, node, nodes, placed))


def sequence(members: Sequence[tuple[Pod, str]], nodes: Mapping[str, Node],
             running: Sequence[Pod], ns_labels: Mapping[str, Mapping[str, str]],
             ) -> list[int] | None:
    """An order in which every member passes when bound after the earlier ones, or None
    (depth-first over the distinct (pod, node) choices; members are few in tests)."""
    failed: set[tuple[int, ...]] = set()

    def go(left: tuple[int, ...], placed: list[Pod], order: list[int]) -> list[int] | None:
        if not left:
            return order
        if left in failed:
            return None
        tried: set[tuple[int, str]] = set()
        for i in left:
            pod, node = members[i]
            shape = (id(pod.requirements) ^ hash(tuple(sorted(pod.labels.items()))), node)
            if shape in tried:
                continue
            tried.add(shape)
            if passes(pod, node, nodes, [*running, *placed], ns_labels):
                bound = Pod(pod.namespace, pod.labels, pod.requirements, node)
                found = go(tuple(j for j in left if j != i), [*placed, bound], [*order, i])
                if found is not None:
                    return found
        failed.add(left)
        return None

    return go(tuple(range(len(members))), [], [])
