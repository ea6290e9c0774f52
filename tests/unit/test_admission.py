"""The admission webhook's decisions (``scheduler.feed.admission``): the defaults it adds to
a new object, never over what the user wrote, and the annotations it refuses, naming the field.

Each case applies the patch with ``jsonpatch``'s semantics reimplemented below (``add`` only,
which is all the module writes), so the assertions read the object the apiserver would store.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.queues import Queue, QueueSet
from scheduler.feed.admission import (
    DEFAULT_SCHEDULER,
    OPT_LABEL,
    RESUME_RULE,
    Admission,
    Defaults,
    mutate,
    namespace_defaults,
    refusal_message,
    validate,
)

SCHED, Q = "gang-scheduler", "team-a"
QUEUE = "gangscheduler.io/queue"
RUNTIME = "gangscheduler.io/expected-runtime"
CHECKPOINT = "gangscheduler.io/last-checkpoint"
MIN_MEMBER = "gangscheduler.io/min-member"
SCOPE = "gangscheduler.io/gang-scope"
DEFAULTS = Defaults(SCHED, Q)
NOW = 1_800_000_000.0


def job(labels: dict[str, str] | None = None, template_labels: dict[str, str] | None = None,
        scheduler: str | None = DEFAULT_SCHEDULER, restart: str = "Never",
        policy: dict[str, Any] | None = None, annotations: dict[str, str] | None = None,
        template_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Job as the mutating webhook receives it (defaulted by the apiserver: it has a
    schedulerName whether the user wrote one or not)."""
    pod_spec: dict[str, Any] = {"restartPolicy": restart, "containers": [{"name": "c"}]}
    if scheduler is not None:
        pod_spec["schedulerName"] = scheduler
    template: dict[str, Any] = {"spec": pod_spec}
    if template_labels is not None or template_annotations is not None:
        template["metadata"] = {}
        if template_labels is not None:
            template["metadata"]["labels"] = template_labels
        if template_annotations is not None:
            template["metadata"]["annotations"] = template_annotations
    meta: dict[str, Any] = {"name": "train", "namespace": "ns"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"template": template}
    if policy is not None:
        spec["podFailurePolicy"] = policy
    else:  # the apiserver's default without a podFailurePolicy
        spec["podReplacementPolicy"] = "TerminatingOrFailed"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def pod(labels: dict[str, str] | None = None,
        scheduler: str = DEFAULT_SCHEDULER) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]}}


def jobset(labels: dict[str, str] | None = None,
           annotations: dict[str, str] | None = None) -> dict[str, Any]:
    rjob = {"name": "workers", "replicas": 1, "template": {"spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c"}]}}}}}
    meta: dict[str, Any] = {"name": "js", "namespace": "ns", "labels": labels or {}}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta,
            "spec": {"replicatedJobs": [rjob, copy.deepcopy(rjob) | {"name": "driver"}]}}


def apply(obj: dict[str, Any], answer: Admission) -> dict[str, Any]:
    """*obj* with *answer*'s patch applied (RFC 6902 ``add`` on maps)."""
    out = copy.deepcopy(obj)
    for op in answer.patch:
        assert op["op"] == "add"
        *parents, last = [s.replace("~1", "/").replace("~0", "~")
                          for s in op["path"].split("/")[1:]]
        target = out
        for step in parents:
            target = target[int(step)] if isinstance(target, list) else target[step]
        assert isinstance(target, dict), op
        target[last] = op["value"]
    return out


def dig(obj: Any, *path: str | int) -> Any:
    for step in path:
        obj = obj[step]
    return obj


# Defaults ----------------------------------------------------------------------------------
def test_a_bare_job_gets_the_scheduler_the_queue_and_the_resume_recipe() -> None:
    answer = mutate("Job", job(), DEFAULTS)
    got = apply(job(), answer)
    assert answer.warnings == ()
    assert dig(got, "spec", "template", "spec", "schedulerName") == SCHED
    assert dig(got, "metadata", "labels", QUEUE) == Q
    assert dig(got, "spec", "template", "metadata", "labels", QUEUE) == Q
    assert dig(got, "spec", "podFailurePolicy") == {"rules": [RESUME_RULE]}
    # The API accepts a podFailurePolicy only with this (found by the e2e test).
    assert dig(got, "spec", "podReplacementPolicy") == "Failed"


JOB_CASES: list[tuple[str, dict[str, Any], dict[tuple[str | int, ...], Any], list[str]]] = [
    # (case, the Job, what the stored Job holds at each path, words the warnings must have)
    ("an unset scheduler name is set", job(scheduler=None),
     {("spec", "template", "spec", "schedulerName"): SCHED}, []),
    ("another scheduler is kept", job(scheduler="volcano"),
     {("spec", "template", "spec", "schedulerName"): "volcano"}, []),
    ("the Job's queue is carried to its pods", job(labels={QUEUE: "mine"}),
     {("metadata", "labels", QUEUE): "mine",
      ("spec", "template", "metadata", "labels", QUEUE): "mine"}, []),
    ("the pods' queue is kept, the Job left without", job(template_labels={QUEUE: "mine"}),
     {("spec", "template", "metadata", "labels", QUEUE): "mine",
      ("metadata", "labels"): None}, []),
    ("other labels are kept", job(labels={"app": "x"}, template_labels={"role": "w"}),
     {("metadata", "labels"): {"app": "x", QUEUE: Q},
      ("spec", "template", "metadata", "labels"): {"role": "w", QUEUE: Q}}, []),
    ("the user's podFailurePolicy is kept",
     job(policy={"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In",
                                                                 "values": [42]}}]}),
     {("spec", "podFailurePolicy", "rules", 0, "action"): "FailJob"},
     ["no rule ignoring DisruptionTarget"]),
    ("a policy that has the rule is kept without a word",
     job(policy={"rules": [dict(RESUME_RULE), {"action": "FailJob", "onExitCodes": {
         "operator": "In", "values": [42]}}]}),
     {("spec", "podFailurePolicy", "rules", 1, "action"): "FailJob"}, []),
    ("restartPolicy OnFailure gets no recipe (the API refuses it), and a warning",
     job(restart="OnFailure"), {("spec", "podFailurePolicy"): None,
                                ("spec", "podReplacementPolicy"): "TerminatingOrFailed"},
     ["needs restartPolicy Never"]),
    ("a JobSet's Job: its JobSet decides queue and failures",
     job(labels={"jobset.sigs.k8s.io/jobset-name": "js"}),
     {("spec", "template", "spec", "schedulerName"): SCHED,
      ("spec", "podFailurePolicy"): None,
      ("metadata", "labels", QUEUE): None}, []),
    ("opted out: nothing at all", job(labels={OPT_LABEL: "disabled"}),
     {("spec", "template", "spec", "schedulerName"): DEFAULT_SCHEDULER,
      ("spec", "podFailurePolicy"): None, ("metadata", "labels", QUEUE): None}, []),
]


@pytest.mark.parametrize(("case", "obj", "expected", "words"), JOB_CASES,
                         ids=[c[0] for c in JOB_CASES])
def test_job_defaults_never_override_what_the_user_wrote(
        case: str, obj: dict[str, Any], expected: dict[tuple[str | int, ...], Any],
        words: list[str]) -> None:
    answer = mutate("Job", obj, DEFAULTS)
    got = apply(obj, answer)
    for path, value in expected.items():
        *head, last = path
        holder = dig(got, *head) if head else got
        assert holder.get(str(last)) == value if isinstance(holder, dict) else value is None, path
    text = " ".join(answer.warnings)
    assert all(w in text for w in words), answer.warnings
    if not words:
        assert answer.warnings == ()


def test_defaults_are_idempotent() -> None:
    """A defaulted Job admitted again (the apiserver may reinvoke) gets no further patch."""
    once = apply(job(), mutate("Job", job(), DEFAULTS))
    assert mutate("Job", once, DEFAULTS) == Admission()


@pytest.mark.parametrize(("defaults", "words"), [
    (Defaults(SCHED, None, "no queue admits namespace ns"), "no queue admits"),
    (Defaults(SCHED, None, "several queues; set it to one of: a, b"), "one of: a, b"),
])
def test_without_one_queue_the_label_is_left_unset_and_the_user_told(
        defaults: Defaults, words: str) -> None:
    answer = mutate("Job", job(), defaults)
    got = apply(job(), answer)
    assert "labels" not in got["metadata"]
    assert dig(got, "spec", "template", "spec", "schedulerName") == SCHED  # the rest is set
    assert any(words in w for w in answer.warnings)


@pytest.mark.parametrize(("labels", "queued"), [
    (None, True),  # a bare pod: its own queue
    ({QUEUE: "mine"}, False),  # the user's
    ({"batch.kubernetes.io/job-name": "train"}, False),  # its Job carries the queue
    ({"jobset.sigs.k8s.io/jobset-name": "js"}, False),  # its JobSet does
])
def test_pods_get_the_scheduler_and_a_queue_unless_an_owner_carries_it(
        labels: dict[str, str] | None, queued: bool) -> None:
    got = apply(pod(labels), mutate("Pod", pod(labels), DEFAULTS))
    assert got["spec"]["schedulerName"] == SCHED
    assert (got["metadata"].get("labels", {}).get(QUEUE) == Q) is queued


def test_a_daemonsets_pods_are_left_to_the_default_scheduler() -> None:
    daemon = pod()
    daemon["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "d", "uid": "u",
                                              "apiVersion": "apps/v1", "controller": True}]
    assert mutate("Pod", daemon, DEFAULTS) == Admission()
    daemon["metadata"]["ownerReferences"][0]["kind"] = "ReplicaSet"
    assert apply(daemon, mutate("Pod", daemon, DEFAULTS))["spec"]["schedulerName"] == SCHED


def test_a_jobset_gets_the_scheduler_in_every_replicated_job_and_its_queue() -> None:
    got = apply(jobset(), mutate("JobSet", jobset(), DEFAULTS))
    names = [dig(r, "template", "spec", "template", "spec", "schedulerName")
             for r in got["spec"]["replicatedJobs"]]
    assert names == [SCHED, SCHED]
    assert got["metadata"]["labels"][QUEUE] == Q
    assert "podFailurePolicy" not in got["spec"]["replicatedJobs"][0]["template"]["spec"]


def test_label_keys_with_a_slash_are_escaped_in_the_patch() -> None:
    paths = [op["path"] for op in mutate("Pod", pod({}), DEFAULTS).patch]
    assert "/metadata/labels/gangscheduler.io~1queue" in paths


def test_other_kinds_and_podgroups_get_no_defaults() -> None:
    for kind in ("PodGroup", "Deployment"):
        assert mutate(kind, {"metadata": {}}, DEFAULTS) == Admission()


# The namespace's queue ---------------------------------------------------------------------
@pytest.mark.parametrize(("queues", "expected", "words"), [
    ([Queue("a", namespaces=("ns",))], "a", ""),
    ([Queue("a", namespaces=("ns",)), Queue("b", namespaces=("other",))], "a", ""),
    ([Queue("a", namespaces=("n*",)), Queue("b", namespaces=("*",))], None, "one of: a, b"),
    ([Queue("org", namespaces=("ns",)), Queue("a", parent="org", namespaces=("ns",))], "a",
     ""),  # a parent holds no gangs
    ([Queue("b", namespaces=("other",))], None, "no queue admits namespace ns"),
])
def test_the_namespace_queue_is_the_one_queue_that_accepts_it(
        queues: list[Queue], expected: str | None, words: str) -> None:
    defaults = namespace_defaults(SCHED, QueueSet.of(queues), "ns")
    assert defaults.queue == expected
    assert words in defaults.queue_note


@pytest.mark.parametrize(("kind", "obj", "warned"), [
    ("Job", job(labels={QUEUE: "elsewhere"}), True),
    ("Job", job(template_labels={QUEUE: "elsewhere"}), True),
    ("Job", job(labels={QUEUE: "team-a"}), False),
    ("Pod", pod({QUEUE: "elsewhere"}), True),
    ("JobSet", jobset({QUEUE: "team-a"}), False),
])
def test_a_queue_label_that_will_not_take_the_gang_is_kept_and_warned_about(
        kind: str, obj: dict[str, Any], warned: bool) -> None:
    defaults = namespace_defaults(SCHED, QueueSet.of([Queue(Q, namespaces=("ns",)),
                                                      Queue("elsewhere", namespaces=("x",))]),
                                  "ns")
    answer = mutate(kind, obj, defaults)
    got = apply(obj, answer)
    assert QUEUE not in got["metadata"].get("labels", {}) or \
        got["metadata"]["labels"][QUEUE] == obj["metadata"].get("labels", {}).get(QUEUE)
    text = " ".join(answer.warnings)
    assert ("queue 'elsewhere' does not take this namespace's gangs" in text) is warned, text
    if warned:
        assert "use one of: team-a" in text


def test_a_queue_being_deleted_is_not_a_default() -> None:
    queues = QueueSet.of([Queue("a", namespaces=("ns",)), Queue("b", namespaces=("ns",))],
                         terminating=["b"])
    assert namespace_defaults(SCHED, queues, "ns").queue == "a"


# Refusals ----------------------------------------------------------------------------------
REFUSED: list[tuple[str, str, dict[str, Any], str]] = [
    ("runtime on the Job", "Job", job(annotations={RUNTIME: "soon"}),
     "metadata.annotations[gangscheduler.io/expected-runtime]: cannot read 'soon'"),
    ("runtime on the pod template", "Job", job(template_annotations={RUNTIME: "2 hours"}),
     "spec.template.metadata.annotations[gangscheduler.io/expected-runtime]: cannot read"),
    ("runtime beyond its bound", "Job", job(annotations={RUNTIME: "400d"}),
     "metadata.annotations[gangscheduler.io/expected-runtime]: "),
    ("min-member zero", "Pod", {"metadata": {"annotations": {MIN_MEMBER: "0"}}},
     "metadata.annotations[gangscheduler.io/min-member]: cannot read '0'; accepted: a "
     "positive integer"),
    ("a checkpoint in the future", "PodGroup",
     {"metadata": {"annotations": {CHECKPOINT: "2099-01-01T00:00:00Z"}}},
     "metadata.annotations[gangscheduler.io/last-checkpoint]: '2099-01-01T00:00:00Z' is "),
    ("a checkpoint that is no time", "Job", job(annotations={CHECKPOINT: "yesterday"}),
     "metadata.annotations[gangscheduler.io/last-checkpoint]: cannot read 'yesterday'"),
    ("a JobSet's gang scope", "JobSet", jobset(annotations={SCOPE: "per-job"}),
     "metadata.annotations[gangscheduler.io/gang-scope]: 'per-job' is not one of jobset, "
     "replicated-job"),
    # A misspelt tier is batch work that batch may preempt: said at apply time, not later.
    ("a notebook's tier, misspelt", "Job",
     job(template_labels={"gangscheduler.io/tier": "interactve"}),
     "spec.template.metadata.labels[gangscheduler.io/tier]: 'interactve' is not one of "
     "batch | interactive"),
    ("a lone pod's tier", "Pod", {"metadata": {"labels": {"gangscheduler.io/tier": "Notebook"}}},
     "metadata.labels[gangscheduler.io/tier]: 'Notebook' is not one of batch | interactive"),
]


@pytest.mark.parametrize(("case", "kind", "obj", "message"), REFUSED,
                         ids=[c[0] for c in REFUSED])
def test_a_malformed_annotation_is_refused_naming_the_field_and_the_reason(
        case: str, kind: str, obj: dict[str, Any], message: str) -> None:
    answer = validate(kind, obj, now=NOW)
    assert not answer.allowed
    (refusal,) = answer.refusals
    assert refusal.startswith(message), refusal
    assert refusal_message(answer.refusals).startswith("gang-scheduler: " + message)


@pytest.mark.parametrize(("kind", "obj"), [
    ("Job", job(annotations={RUNTIME: "2h", MIN_MEMBER: "4", "other.io/x": "soon"})),
    ("Job", job(template_annotations={CHECKPOINT: "2026-01-01T00:00:00Z"})),
    ("JobSet", jobset(annotations={SCOPE: "replicated-job"})),
    ("Pod", {"metadata": {"annotations": {SCOPE: "anything"}}}),  # read on JobSets only
    ("Deployment", {"metadata": {"annotations": {RUNTIME: "soon"}}}),  # not ours
    ("Job", job(template_labels={"gangscheduler.io/tier": "interactive", "app": "x y"})),
])
def test_readable_and_foreign_annotations_pass(kind: str, obj: dict[str, Any]) -> None:
    assert validate(kind, obj, now=NOW) == Admission()


def test_a_jobsets_job_template_is_checked_too() -> None:
    """Else the JobSet is admitted and the Jobs its controller makes carry the bad value."""
    bad = jobset()
    bad["spec"]["replicatedJobs"][1]["template"]["metadata"] = {"annotations": {MIN_MEMBER: "x"}}
    bad["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = {
        "annotations": {RUNTIME: "soon"}}
    assert [r.split(":")[0] for r in validate("JobSet", bad, now=NOW).refusals] == [
        "spec.replicatedJobs[0].template.spec.template.metadata.annotations"
        "[gangscheduler.io/expected-runtime]",
        "spec.replicatedJobs[1].template.metadata.annotations[gangscheduler.io/min-member]"]


def test_what_a_controller_makes_is_let_through_with_a_warning() -> None:
    """A Job's pod with a bad value (its Job from before the opt-in) must still be created:
    refusing it would only stall the Job controller."""
    made: dict[str, Any] = {"metadata": {"annotations": {RUNTIME: "soon"}, "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}]}}
    answer = validate("Pod", made, now=NOW)
    assert answer.allowed and "made by a controller" in answer.warnings[0]
    made["metadata"]["ownerReferences"][0]["controller"] = False  # an owner, not a controller
    assert not validate("Pod", made, now=NOW).allowed


def test_every_malformed_annotation_is_named_at_once() -> None:
    answer = validate("Job", job(annotations={RUNTIME: "soon", MIN_MEMBER: "-1"},
                                 template_annotations={RUNTIME: "x"}), now=NOW)
    assert [r.split(":")[0] for r in answer.refusals] == [
        "metadata.annotations[gangscheduler.io/expected-runtime]",
        "metadata.annotations[gangscheduler.io/min-member]",
        "spec.template.metadata.annotations[gangscheduler.io/expected-runtime]"]


def test_an_update_that_keeps_a_bad_value_passes_with_a_warning_a_new_one_is_refused() -> None:
    """An object from before its namespace opted in stays updatable by its controllers."""
    old = job(annotations={RUNTIME: "soon"})
    kept = validate("Job", job(annotations={RUNTIME: "soon", "x": "y"}), old=old, now=NOW)
    assert kept.allowed and "unchanged" in kept.warnings[0]
    changed = validate("Job", job(annotations={RUNTIME: "later"}), old=old, now=NOW)
    assert not changed.allowed


# Properties over any Job -------------------------------------------------------------------
OVERWRITABLE = {  # what the apiserver wrote before admission, not the user (module docstring)
    "/spec/template/spec/schedulerName": ("", DEFAULT_SCHEDULER),
    "/spec/podReplacementPolicy": ("TerminatingOrFailed",),
}


@st.composite
def any_job(draw: st.DrawFn) -> dict[str, Any]:
    maybe = st.none() | st.just("")
    labels = draw(st.none() | st.dictionaries(
        st.sampled_from([QUEUE, "app", OPT_LABEL, "jobset.sigs.k8s.io/jobset-name"]),
        st.sampled_from(["mine", "disabled", "enabled", "x"]), max_size=3))
    template_labels = draw(st.none() | st.dictionaries(
        st.sampled_from([QUEUE, "role"]), st.sampled_from(["mine", "w"]), max_size=2))
    policies: list[dict[str, Any] | None] = [
        None, {"rules": []}, {"rules": [dict(RESUME_RULE)]},
        {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]}]
    policy = copy.deepcopy(draw(st.sampled_from(policies)))
    obj = job(labels=labels, template_labels=template_labels,
              scheduler=draw(maybe | st.sampled_from([DEFAULT_SCHEDULER, "volcano", SCHED])),
              restart=draw(st.sampled_from(["Never", "OnFailure"])), policy=policy)
    if draw(st.booleans()):
        obj["spec"].pop("podReplacementPolicy", None)
    return obj


@given(obj=any_job(), queue=st.none() | st.just(Q))
def test_any_job_is_only_added_to_and_once_is_enough(obj: dict[str, Any],
                                                      queue: str | None) -> None:
    """The patch writes only where the user wrote nothing (or where the apiserver wrote its
    own default); a defaulted Job needs no second patch; a recipe added is one the API takes
    (restartPolicy Never, podReplacementPolicy Failed)."""
    defaults = Defaults(SCHED, queue, "" if queue else "no queue admits namespace ns")
    answer = mutate("Job", obj, defaults)
    for op in answer.patch:
        steps = [s.replace("~1", "/") for s in op["path"].split("/")[1:]]
        before: Any = obj
        for step in steps[:-1]:  # the parent, if the user's object has it
            before = before.get(step) if isinstance(before, dict) else None
        present = isinstance(before, dict) and steps[-1] in before
        if present:  # also catches a map the patch would have replaced whole
            assert before[steps[-1]] in OVERWRITABLE.get(op["path"], ()), op
    got = apply(obj, answer)
    assert mutate("Job", got, defaults).patch == ()
    if "podFailurePolicy" in got["spec"] and "podFailurePolicy" not in obj["spec"]:
        assert got["spec"]["template"]["spec"]["restartPolicy"] == "Never"
        assert got["spec"].get("podReplacementPolicy", "Failed") == "Failed"
