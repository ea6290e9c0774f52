"""Checks across policy objects, loading policy files, and the last-good-version store.

Objects are parsed one by one (``parsing``); what only a set can tell (duplicate names,
unknown parents, cycles in the hierarchy) is checked here. ``PolicyStore`` is the rule that an
invalid update never replaces a good policy: the live scheduler feeds it watch events and
puts the errors in a status condition; the simulator and ``policy validate`` load whole files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from policies.errors import FieldError, PolicyError
from policies.parsing import (
    QUEUE_KIND,
    SCHEDULER_POLICY_KIND,
    flatten,
    object_name,
    parse_queue,
    parse_scheduler_policy,
)
from policies.queues import API_GROUP, PolicySet, Queue, QueueSet, SchedulerPolicy
from scheduler.world.clusterspec import read_problem, yaml_problem


def check_hierarchy(queues: Iterable[Queue],
                    known: Mapping[str, str | None] | Iterable[str] = ()) -> list[FieldError]:
    """Unknown parents and cycles.

    ``known`` names queues that exist but failed to parse: they count as existing (no cascade
    of "unknown parent" errors below them), and when given as a mapping to the parent each of
    them names, those parents are checked too, so one run reports a bad weight and a
    misspelt parent of the same queue together.
    """
    parents: dict[str, str | None] = {q.name: q.parent for q in queues}
    failed = dict(known) if isinstance(known, Mapping) else dict.fromkeys(known)
    names = set(parents) | set(failed)
    errors: list[FieldError] = []
    for name, parent in sorted(failed.items()):
        if parent is not None and parent not in names:
            errors.append(FieldError(name, "spec.parent", f"unknown queue {parent!r}"))
    for name, first in sorted(parents.items()):
        if first is not None and first not in names:
            errors.append(FieldError(name, "spec.parent", f"unknown queue {first!r}"))
            continue
        chain = [name]
        parent = first
        while parent in parents and parent not in chain:
            chain.append(parent)
            parent = parents[parent]
        if parent == name:
            errors.append(FieldError(name, "spec.parent", "cycle in the queue hierarchy: "
                                     + " -> ".join([*chain, name])))
    return errors


@dataclass(frozen=True, slots=True)
class LoadResult:
    """The valid part of what was read, and every error found (empty when all is well)."""

    policies: PolicySet
    errors: tuple[FieldError, ...]
    #: Documents that are not policy objects (a Kustomization beside the queues, say):
    #: "FILE#N: Kind name" each, so a caller can say what it passed over.
    skipped: tuple[str, ...] = ()
    #: How many Queue and SchedulerPolicy objects were read, valid or not.
    objects: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors


def parse_documents(documents: Iterable[tuple[str, Any]]) -> LoadResult:
    """Validate decoded documents, each with a source label (``file.yaml#2``) for errors."""
    documents = list(documents)
    errors: list[FieldError] = []
    queues: dict[str, Queue] = {}
    sources: dict[str, str] = {}
    skipped: list[str] = []
    failed: dict[str, str | None] = {}  # queues that did not parse -> the parent they name
    scheduler: SchedulerPolicy | None = None
    index = 0
    for source, doc in documents:
        for obj in flatten(doc):
            index += 1
            kind = obj.get("kind") if isinstance(obj, Mapping) else None
            name = object_name(obj, index)
            if kind == QUEUE_KIND:
                queue, errs = parse_queue(obj, index)
                if name in queues or name in failed:
                    first = sources.get(name, "an earlier document")
                    errs = [*errs, FieldError(name, "metadata.name",
                                              f"duplicate Queue name (first in {first})")]
                    queue = None
                if queue is None:
                    failed.setdefault(name, _raw_parent(obj))
                else:
                    queues[name] = queue
                sources.setdefault(name, source)
            elif kind == SCHEDULER_POLICY_KIND:
                policy, errs = parse_scheduler_policy(obj, index)
                if scheduler is not None and policy is not None:
                    errs = [FieldError(name, "", "only one SchedulerPolicy may be given")]
                elif policy is not None:
                    scheduler = policy
            elif _foreign(obj):
                skipped.append(f"{source}: {kind}" + ("" if name.startswith("<") else f" {name}"))
                continue
            elif not isinstance(obj, Mapping):
                errs = [FieldError(name, "", f"must be a {QUEUE_KIND} or {SCHEDULER_POLICY_KIND} "
                                   f"object (a mapping), got {type(obj).__name__}")]
            else:
                errs = [FieldError(name, "kind", f"must be {QUEUE_KIND} or "
                                   f"{SCHEDULER_POLICY_KIND} (or a List of them), got {kind!r}")]
            errors.extend(replace(e, source=source) for e in errs)
    hierarchy = check_hierarchy(queues.values(), known=failed)
    errors.extend(replace(e, source=sources.get(e.obj, "")) for e in hierarchy)
    bad = {e.obj for e in hierarchy}
    good = QueueSet.of(q for n, q in queues.items() if n not in bad)
    # Errors in the order of the documents they are about (hierarchy errors come last above).
    order = {src: i for i, (src, _) in enumerate(documents)}
    errors.sort(key=lambda e: order.get(e.source, len(order)))
    return LoadResult(PolicySet(good, scheduler or SchedulerPolicy()), tuple(errors),
                      tuple(skipped), index - len(skipped))


def _foreign(obj: Any) -> bool:
    """Another API's object (a Kustomization, a ConfigMap): not a policy, not a mistake.

    An object of our own API group with an unknown kind is a mistake (``kind: Queu``), and so is
    an object without a kind; only a kind of another group is passed over.
    """
    if not isinstance(obj, Mapping):
        return False
    kind, api = obj.get("kind"), obj.get("apiVersion")
    return (isinstance(kind, str) and bool(kind)
            and kind not in (QUEUE_KIND, SCHEDULER_POLICY_KIND)
            and isinstance(api, str) and api.split("/")[0] != API_GROUP)


def _raw_parent(obj: Mapping[str, Any]) -> str | None:
    """The parent a Queue that failed to parse names, if it names one as a string."""
    spec = obj.get("spec")
    parent = spec.get("parent") if isinstance(spec, Mapping) else None
    return parent if isinstance(parent, str) and parent else None


def read_files(paths: Iterable[str | Path]) -> LoadResult:
    """Read YAML files (multi-document, ``kind: List`` accepted) and validate them together."""
    documents: list[tuple[str, Any]] = []
    read_errors: list[FieldError] = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
            docs = list(yaml.safe_load_all(text))
        except (OSError, UnicodeDecodeError) as exc:
            read_errors.append(FieldError(str(path), "", read_problem(exc)))
            continue
        except yaml.YAMLError as exc:
            read_errors.append(FieldError(str(path), "", yaml_problem(exc)))
            continue
        found = [(f"{path}#{i + 1}", d) for i, d in enumerate(docs) if d is not None]
        if not found:  # an empty file is a mistake (wrong file, truncated), not "no queues"
            read_errors.append(FieldError(str(path), "", "empty file, expected Queue or "
                                          "SchedulerPolicy objects"))
        documents.extend(found)
    result = parse_documents(documents)
    return replace(result, errors=(*read_errors, *result.errors))


def load_policies(paths: Iterable[str | Path]) -> PolicySet:
    """Read policy files for the simulator; raises ``PolicyError`` listing every problem."""
    result = read_files(paths)
    if result.errors:
        raise PolicyError(result.errors)
    return result.policies


@dataclass(frozen=True, slots=True)
class StoreUpdate:
    store: PolicyStore
    errors: tuple[FieldError, ...]
    #: Other queues whose verdict this update changed, with their errors now: the members of
    #: a cycle it closed among queues waiting for their parent.
    others: Mapping[str, tuple[FieldError, ...]] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return not self.errors


@dataclass(frozen=True, slots=True)
class PolicyStore:
    """The policies in force: an update that fails validation leaves the last good one.

    ``waiting`` keeps queues that are valid on their own but reference a parent not (yet)
    known: watch events arrive in any order, so each accepted change retries them.

    A queue whose deletion was asked for stays in force, *terminating* (``terminate``): the
    scheduler's finalizer keeps the object while gangs it admitted run or queues name it as
    their parent. A parent is never dropped under its children: had its object gone anyway
    (its finalizer removed by hand), it stays in force, terminating, until its last child
    goes (``gone``), just as an edit naming an unknown parent is refused; children never
    silently become roots.
    """

    policies: PolicySet = field(default_factory=PolicySet)
    waiting: Mapping[str, Queue] = field(default_factory=dict)
    #: Queues whose object is deleted, kept in force (terminating) for their children.
    gone: frozenset[str] = frozenset()

    def apply(self, obj: Any) -> StoreUpdate:
        """Offer one decoded object (a Queue or the SchedulerPolicy)."""
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
        if kind == SCHEDULER_POLICY_KIND:
            policy, errs = parse_scheduler_policy(obj)
            if policy is None:
                return StoreUpdate(self, tuple(errs))
            return StoreUpdate(replace(self, policies=replace(self.policies, scheduler=policy)), ())
        if kind != QUEUE_KIND:
            name = object_name(obj, 0)
            return StoreUpdate(self, (FieldError(name, "kind", f"unsupported kind {kind!r}"),))
        queue, errs = parse_queue(obj)
        if queue is None:
            return StoreUpdate(self, tuple(errs))
        return self._offer(queue)

    def terminate(self, name: str) -> PolicyStore:
        """The deletion of Queue *name* was asked for: in force, it admits nothing new from
        now on; not in force (waiting for its parent), it is simply gone."""
        queues = self.policies.queues
        if name in self.waiting:
            return replace(self, waiting={n: q for n, q in self.waiting.items() if n != name})
        if name not in queues.queues or name in queues.terminating:
            return self
        return self._with(QueueSet.of(queues, queues.terminating | {name}), self.waiting)

    def delete(self, name: str) -> PolicyStore:
        """Queue *name*'s object is gone: out of force, unless queues in force name it as
        their parent (then kept, terminating, until the last of them goes)."""
        waiting = {n: q for n, q in self.waiting.items() if n != name}
        queues = self.policies.queues
        if name in queues.queues and queues.children_of(name):
            kept = replace(self, gone=self.gone | {name}, waiting=waiting)
            return kept.terminate(name)
        return self._with(QueueSet.of((q for n, q in queues.queues.items() if n != name),
                                      queues.terminating), waiting)

    def _with(self, queues: QueueSet, waiting: Mapping[str, Queue]) -> PolicyStore:
        """The store with *queues* in force, less the gone queues left without children."""
        gone = set(self.gone) & set(queues.queues)
        while childless := {g for g in gone if not queues.children_of(g)}:
            gone -= childless
            queues = QueueSet.of((q for n, q in queues.queues.items() if n not in childless),
                                 queues.terminating)
        return PolicyStore(replace(self.policies, queues=queues), waiting, frozenset(gone))

    def _offer(self, queue: Queue) -> StoreUpdate:
        current = dict(self.policies.queues.queues)
        candidate = {**current, queue.name: queue}
        errors = [e for e in check_hierarchy(candidate.values()) if e.obj == queue.name]
        if errors:
            if queue.parent is not None and queue.parent not in candidate:
                waiting = {**self.waiting, queue.name: queue}
                cycle = _waiting_cycle(queue, waiting)
                if cycle:
                    return StoreUpdate(replace(self, waiting=waiting), cycle[queue.name],
                                       {n: e for n, e in cycle.items() if n != queue.name})
                return StoreUpdate(replace(self, waiting=waiting),
                                   _not_in_force(queue, self.waiting) or tuple(errors))
            return StoreUpdate(self, tuple(errors))
        waiting = {n: q for n, q in self.waiting.items() if n != queue.name}
        # Retry the waiting queues until nothing more is accepted.
        progress = True
        while progress:
            progress = False
            for name, q in sorted(waiting.items()):
                trial = {**candidate, name: q}
                if not [e for e in check_hierarchy(trial.values()) if e.obj == name]:
                    candidate = trial
                    del waiting[name]
                    progress = True
        return StoreUpdate(self._with(QueueSet.of(candidate.values(),
                                                  self.policies.queues.terminating), waiting), ())


def _waiting_cycle(queue: Queue, waiting: Mapping[str, Queue]) -> dict[str, tuple[FieldError, ...]]:
    """When *queue*'s parent chain runs through waiting queues back to it: each member of
    that cycle -> its error, naming the cycle from that member (none is in force, so each
    alone would only read "unknown parent", though all of them exist)."""
    chain = [queue.name]
    parent = queue.parent
    while parent is not None and parent in waiting and parent not in chain:
        chain.append(parent)
        parent = waiting[parent].parent
    if parent != queue.name:
        return {}
    out: dict[str, tuple[FieldError, ...]] = {}
    for i, name in enumerate(chain):
        loop = [*chain[i:], *chain[:i], name]
        out[name] = (FieldError(name, "spec.parent", "cycle in the queue hierarchy: "
                                + " -> ".join(loop) + " (none of them is in force until "
                                "one of them names another parent)"),)
    return out


def _not_in_force(queue: Queue, waiting: Mapping[str, Queue]) -> tuple[FieldError, ...]:
    """The error of a queue whose parent exists but waits for its own parent itself."""
    parent = waiting.get(queue.parent or "")
    if parent is None:
        return ()
    return (FieldError(queue.name, "spec.parent", f"queue {parent.name!r} exists but is not "
                       f"in force yet: it waits for its own parent {parent.parent!r}"),)
