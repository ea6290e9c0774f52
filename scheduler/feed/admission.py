"""What the admission webhook decides about one object: the defaults it adds (a JSON patch)
and the annotations it refuses, from the object alone (pure: no I/O, ``now`` a parameter).

Why at admission: a new user hand-writes the scheduler name, the queue label and the
``podFailurePolicy`` that makes a preempted Job resume, and each fails quietly when missed
(the pods wait for a scheduler that never looks at them, the gang lands in the default queue,
a preempted Job fails for good); a malformed ``gangscheduler.io/`` annotation is only warned
about once pods exist. For namespaces an admin opts in, the webhook (``scheduler.run.webhook``
serves this over TLS) fills in what is missing and refuses what cannot be read, at ``kubectl
apply`` time, naming the field and the reason.

Rules, each in one place:

* **never override what the user wrote**: a field is set only when absent. The one exception
  is ``schedulerName: default-scheduler``, which the apiserver writes itself before admission
  (a user's explicit ``default-scheduler`` cannot be told apart): a workload that must keep
  the default scheduler carries the label ``gangscheduler.io/defaults: disabled``
  (``OPT_LABEL``), which turns every default off for that object; a DaemonSet's pods are
  never defaulted;
* **the queue** is the one queue that accepts the namespace (``QueueSet.accepting``); with
  none or several, no label is set and a warning says why. A Job's own queue label is carried
  to its pod template; the pods of a Job or JobSet are left to their owner (which the grouping
  reads first, ``grouping_terms.QUEUE_PRECEDENCE``), so that they never disagree with it;
* **the resume recipe** (README, "Preemption and resume"): a Job without a
  ``podFailurePolicy`` gets one rule, ``Ignore`` on ``DisruptionTarget``, so that a
  preemption is not a failure and the Job controller recreates the evicted pods. Not added
  when the pods restart ``OnFailure`` (the API allows a ``podFailurePolicy`` only with
  ``Never``) nor to the Jobs a JobSet makes (the JobSet's ``failurePolicy`` governs them).
  The recipe brings ``podReplacementPolicy: Failed``, which the API requires with it (the
  apiserver has written its default ``TerminatingOrFailed`` before admission, a value a user
  rarely writes and never needs with the recipe: new pods only once the old ones are gone);
  a warning says so, and says when a policy the user wrote lacks the rule;
* **annotations** are read by ``annotation_checks.value_problem`` and, for a JobSet's
  ``gang-scope``, ``grouping_jobset.gang_scope_problem``, the same readings the scheduler
  warns with, on the object and its templates (a JobSet's Job templates too: refusing the
  Jobs its controller makes would stall the JobSet). Only what a user writes is refused: on
  an update, a value that did not change, and any value on an object a controller made,
  are let through with a warning (an object from before its namespace opted in must stay
  updatable by its controllers, and their pods creatable).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.queues import QueueSet
from scheduler.feed.grouping_jobset import (
    GANG_SCOPE_ANNOTATION,
    JOBSET_NAME_LABEL,
    gang_scope_problem,
)
from scheduler.model.annotation_checks import CHECKED, label_problem, value_problem
from scheduler.model.failures import DISRUPTION_TARGET
from scheduler.model.workloads import JOB_NAME_LABEL, QUEUE_LABEL

#: On a Namespace, ``enabled`` opts its workloads in (the webhook configurations'
#: ``namespaceSelector``); on a workload, ``disabled`` opts that object out of the defaults.
OPT_LABEL = "gangscheduler.io/defaults"
OPT_IN, OPT_OUT = "enabled", "disabled"
#: What the apiserver writes into a pod spec that names no scheduler.
DEFAULT_SCHEDULER = "default-scheduler"
#: The rule of the resume recipe: a preemption (or a drain, a lost node) is not a failure.
RESUME_RULE: Mapping[str, Any] = {
    "action": "Ignore",
    "onPodConditions": [{"type": DISRUPTION_TARGET, "status": "True"}],
}
#: The only ``podReplacementPolicy`` the API allows beside a ``podFailurePolicy``.
REPLACE_FAILED = "Failed"
#: (API group, kind) -> the kind as this module names it; other kinds are let through as is.
KINDS: Mapping[tuple[str, str], str] = {
    ("", "Pod"): "Pod",
    ("batch", "Job"): "Job",
    ("jobset.x-k8s.io", "JobSet"): "JobSet",
    ("scheduling.x-k8s.io", "PodGroup"): "PodGroup",
}

Json = Mapping[str, Any]
Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer for one object: JSON-patch operations to apply, warnings for the user
    (``kubectl`` prints them), and refusals (``field: reason``; any refuses the object)."""

    patch: tuple[Json, ...] = ()
    warnings: tuple[str, ...] = ()
    refusals: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.refusals


@dataclass(frozen=True, slots=True)
class Defaults:
    """What the defaults are for one namespace: the scheduler's name and the namespace's
    queue (None when it has not exactly one, *queue_note* then says why)."""

    scheduler_name: str
    queue: str | None
    queue_note: str = ""
    #: Every queue the namespace may submit to (None: not known, nothing is checked): a
    #: queue label naming another is warned about, since its gangs would wait for good.
    accepting: tuple[str, ...] | None = None

    def foreign(self, queue: str) -> list[str]:
        """A warning if the user's *queue* will not take this namespace's gangs."""
        if self.accepting is None or queue in self.accepting:
            return []
        return [f"label {QUEUE_LABEL}: queue {queue!r} does not take this namespace's gangs "
                "(it does not exist, is a parent or is being deleted, or does not admit the "
                "namespace); they would wait: use "
                + (f"one of: {', '.join(self.accepting)}" if self.accepting else
                   "a queue an admin opens to the namespace (spec.namespaces)")]


def namespace_defaults(scheduler_name: str, queues: QueueSet, namespace: str) -> Defaults:
    """The defaults of *namespace*: its queue is the one queue that accepts it."""
    names = queues.accepting(namespace)
    if len(names) == 1:
        return Defaults(scheduler_name, names[0], accepting=names)
    if not names:
        return Defaults(scheduler_name, None, (
            f"label {QUEUE_LABEL} not set: no queue admits namespace {namespace} (ask an "
            "admin to add it to a queue's spec.namespaces)"), names)
    return Defaults(scheduler_name, None, (
        f"label {QUEUE_LABEL} not set: namespace {namespace} may submit to several queues; "
        f"set it to one of: {', '.join(names)}"), names)


# Reading objects ---------------------------------------------------------------------------
def _get(obj: Any, path: Path) -> Any:
    for step in path:
        if isinstance(step, int):
            obj = obj[step] if isinstance(obj, list) and step < len(obj) else None
        else:
            obj = obj.get(step) if isinstance(obj, Mapping) else None
        if obj is None:
            return None
    return obj


def _strings(obj: Any, path: Path) -> Mapping[str, str]:
    found = _get(obj, path)
    if not isinstance(found, Mapping):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, str)}


def _templates(kind: str, obj: Json) -> Iterator[Path]:
    """The paths of the pod templates of *obj* (a Pod is its own template: ``()``)."""
    if kind == "Pod":
        yield ()
    elif kind == "Job":
        yield ("spec", "template")
    elif kind == "JobSet":
        rjobs = _get(obj, ("spec", "replicatedJobs"))
        for i in range(len(rjobs) if isinstance(rjobs, list) else 0):
            yield ("spec", "replicatedJobs", i, "template", "spec", "template")


def _name(path: Path) -> str:
    """``spec.replicatedJobs[0].template`` for a path."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


# Writing the patch -------------------------------------------------------------------------
def _pointer(path: Path) -> str:
    return "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in path)


@dataclass
class _Patch:
    """JSON-patch ``add`` operations on *obj*, creating the maps on the way that are absent
    (a patch cannot add ``/metadata/labels/x`` to an object without labels)."""

    obj: Json
    ops: list[Json] = field(default_factory=list)
    made: set[Path] = field(default_factory=set)

    def add(self, path: Path, value: Any) -> None:
        for depth in range(1, len(path)):
            parent = path[:depth]
            if parent not in self.made and _get(self.obj, parent) is None:
                self.ops.append({"op": "add", "path": _pointer(parent), "value": {}})
                self.made.add(parent)
        self.ops.append({"op": "add", "path": _pointer(path), "value": value})


# The defaults ------------------------------------------------------------------------------
def mutate(kind: str, obj: Json, defaults: Defaults) -> Admission:
    """The defaults *obj* (a new object of *kind*) lacks, as a patch; warnings for those it
    cannot be given."""
    if kind not in ("Pod", "Job", "JobSet") or _strings(obj, ("metadata", "labels")).get(
            OPT_LABEL) == OPT_OUT or (kind == "Pod" and _daemon(obj)):
        return Admission()
    patch, warnings = _Patch(obj), []
    for template in _templates(kind, obj):
        name = _get(obj, (*template, "spec", "schedulerName"))
        if name in (None, "", DEFAULT_SCHEDULER):
            patch.add((*template, "spec", "schedulerName"), defaults.scheduler_name)
    labels = _strings(obj, ("metadata", "labels"))
    if kind == "Job" and JOBSET_NAME_LABEL not in labels:
        warnings += _job_queue(obj, labels, defaults, patch)
        warnings += _resume_recipe(obj, patch)
    elif kind == "JobSet" or (kind == "Pod" and not {JOB_NAME_LABEL, JOBSET_NAME_LABEL} & set(
            labels)):
        warnings += _own_queue(labels, defaults, patch)
    return Admission(tuple(patch.ops), tuple(warnings))


def _daemon(obj: Json) -> bool:
    """A DaemonSet's pod: one per node, pinned there by node affinity; not a workload to queue."""
    owners = _get(obj, ("metadata", "ownerReferences"))
    return any(_get(o, ("kind",)) == "DaemonSet" and _get(o, ("controller",)) is True
               for o in (owners if isinstance(owners, list) else []))


def _own_queue(labels: Mapping[str, str], defaults: Defaults, patch: _Patch) -> list[str]:
    if own := labels.get(QUEUE_LABEL):
        return defaults.foreign(own)
    if defaults.queue is None:
        return [defaults.queue_note]
    patch.add(("metadata", "labels", QUEUE_LABEL), defaults.queue)
    return []


def _job_queue(obj: Json, labels: Mapping[str, str], defaults: Defaults,
               patch: _Patch) -> list[str]:
    """The Job and its pod template both carry the queue: the user's (the Job's label,
    carried down), else the namespace's."""
    own = labels.get(QUEUE_LABEL)
    pods = _strings(obj, ("spec", "template", "metadata", "labels")).get(QUEUE_LABEL)
    if own and not pods:
        patch.add(("spec", "template", "metadata", "labels", QUEUE_LABEL), own)
    elif not own and not pods:
        if defaults.queue is None:
            return [defaults.queue_note]
        patch.add(("metadata", "labels", QUEUE_LABEL), defaults.queue)
        patch.add(("spec", "template", "metadata", "labels", QUEUE_LABEL), defaults.queue)
        return []
    return defaults.foreign(own or pods or "")  # the one the grouping reads first


def _resume_recipe(obj: Json, patch: _Patch) -> list[str]:
    policy = _get(obj, ("spec", "podFailurePolicy"))
    if policy is not None:
        rules = _get(policy, ("rules",))
        if not any(_ignores_disruption(r) for r in (rules if isinstance(rules, list) else [])):
            return [f"spec.podFailurePolicy has no rule ignoring {DISRUPTION_TARGET}: a "
                    "preempted pod counts as a failure of this Job (README: Preemption and "
                    "resume)"]
        return []
    restart = _get(obj, ("spec", "template", "spec", "restartPolicy"))
    if restart not in (None, "Never"):
        return [f"spec.podFailurePolicy not added: it needs restartPolicy Never, the pods "
                f"restart {restart}; a preempted pod counts as a failure of this Job"]
    patch.add(("spec", "podFailurePolicy"), {"rules": [dict(RESUME_RULE)]})
    # The API accepts a podFailurePolicy only with podReplacementPolicy Failed, the default
    # it gives a Job that has one; the apiserver wrote its other default before admission.
    if _get(obj, ("spec", "podReplacementPolicy")) not in (None, REPLACE_FAILED):
        patch.add(("spec", "podReplacementPolicy"), REPLACE_FAILED)
    return []


def _ignores_disruption(rule: Any) -> bool:
    conditions = _get(rule, ("onPodConditions",))
    return _get(rule, ("action",)) == "Ignore" and isinstance(conditions, list) and any(
        _get(c, ("type",)) == DISRUPTION_TARGET for c in conditions)


# The refusals ------------------------------------------------------------------------------
def validate(kind: str, obj: Json, old: Json | None = None,
             now: float | None = None) -> Admission:
    """Refusals for the gangscheduler.io annotations (and checked labels, such as the tier)
    of *obj* that cannot be read (on the object and the objects it makes: ``_annotated``):
    ``field: reason``. *old*: the object
    before an update (an unchanged value is only warned about); *now*: the time of the check.
    An object a controller makes (a Job's pods, a JobSet's Jobs) is never refused, only
    warned about: its annotations come from its owner, where the user fixes them, and a
    refusal would only stall the controller."""
    if kind not in ("Pod", "Job", "JobSet", "PodGroup"):
        return Admission()
    made = _controlled(obj)
    refusals, warnings = [], []
    for meta, part in ((m, p) for m in _annotated(kind, obj) for p in ("annotations",
                                                                           "labels")):
        path = (*meta, part)
        before = _strings(old, path) if old is not None else {}
        for key, value in sorted(_strings(obj, path).items()):
            problem = (_problem(kind, meta, key, value, now) if part == "annotations"
                       else label_problem(key, value))
            if problem is None:
                continue
            where = f"{_name(path)}[{key}]: {problem}"
            if before.get(key) == value:
                warnings.append(f"{where} (unchanged, so let through)")
            elif made:
                warnings.append(f"{where} (made by a controller, so let through: fix it on "
                                "the owner)")
            else:
                refusals.append(where)
    return Admission(warnings=tuple(warnings), refusals=tuple(refusals))


def _annotated(kind: str, obj: Json) -> Iterator[Path]:
    """The metadata whose annotations become a gang's: the object's own, and those of the
    objects made from it (a Job's pods; a JobSet's Jobs and their pods)."""
    yield ("metadata",)
    if kind == "Job":
        yield ("spec", "template", "metadata")
    elif kind == "JobSet":
        for template in _templates(kind, obj):  # replicatedJobs[i].template.spec.template
            yield (*template[:4], "metadata")
            yield (*template, "metadata")


def _controlled(obj: Json) -> bool:
    owners = _get(obj, ("metadata", "ownerReferences"))
    return any(_get(o, ("controller",)) is True
               for o in (owners if isinstance(owners, list) else []))


def _problem(kind: str, meta: Path, key: str, value: str, now: float | None) -> str | None:
    if key in CHECKED:
        return value_problem(key, value, now)
    if key == GANG_SCOPE_ANNOTATION and kind == "JobSet" and meta == ("metadata",):
        return gang_scope_problem(value)
    return None


def refusal_message(refusals: tuple[str, ...]) -> str:
    """The one message ``kubectl`` prints for a refused object."""
    return "gang-scheduler: " + "; ".join(refusals)
