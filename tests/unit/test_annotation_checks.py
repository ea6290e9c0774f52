"""Unreadable gangscheduler.io annotations are named with the accepted forms, never ignored
silently; the forms users write are accepted."""

from __future__ import annotations

import pytest

from scheduler.kube.read import convert, informer
from scheduler.kube.read.feed import converting_handler
from scheduler.kube.read.input_warnings import InputWarnings
from scheduler.model.annotation_checks import annotation_problems

RUNTIME = "gangscheduler.io/expected-runtime"
CHECKPOINT = "gangscheduler.io/last-checkpoint"
MIN_MEMBER = "gangscheduler.io/min-member"


@pytest.mark.parametrize(("annotations", "named"), [
    ({RUNTIME: "soon"}, [RUNTIME]),
    ({RUNTIME: "1d"}, []),
    ({RUNTIME: "PT2H"}, []),
    ({RUNTIME: "90m"}, []),
    ({RUNTIME: "3600"}, []),
    ({CHECKPOINT: "yesterday"}, [CHECKPOINT]),
    ({CHECKPOINT: "2026-11-30T09:00:00"}, [CHECKPOINT]),  # no zone: which 09:00?
    ({CHECKPOINT: "2026-11-30T09:00:00Z"}, []),
    ({MIN_MEMBER: "four"}, [MIN_MEMBER]),
    ({MIN_MEMBER: "0"}, [MIN_MEMBER]),
    ({MIN_MEMBER: "4"}, []),
    ({RUNTIME: "soon", CHECKPOINT: "yesterday", "other.io/x": "soon"}, [RUNTIME, CHECKPOINT]),
    ({}, []),
])
def test_annotation_problems(annotations: dict[str, str], named: list[str]) -> None:
    problems = annotation_problems(annotations)
    assert [p.split(":")[0] for p in problems] == [f"annotation {k}" for k in named]


NOW = 1_790_000_000.0  # 2026-09-21T14:13:20Z


@pytest.mark.parametrize(("annotations", "says"), [
    ({RUNTIME: "99999999999999999999d"},
     f"annotation {RUNTIME}: '99999999999999999999d' is more than 365d, the longest duration "
     "the scheduler accepts; treated as no estimate"),
    ({RUNTIME: "366d"}, f"annotation {RUNTIME}: '366d' is more than 365d"),
    ({RUNTIME: "\uff13h"}, f"annotation {RUNTIME}: cannot read '\uff13h'; accepted: "),
    ({RUNTIME: "\u0663h"}, f"annotation {RUNTIME}: cannot read '\u0663h'; accepted: "),
    ({RUNTIME: "PT2\u017f"}, f"annotation {RUNTIME}: cannot read 'PT2\u017f'"),  # ſ.upper() == S
    ({MIN_MEMBER: "\u0664"}, f"annotation {MIN_MEMBER}: cannot read '\u0664'"),
    ({MIN_MEMBER: "\uff14"}, f"annotation {MIN_MEMBER}: cannot read '\uff14'"),
    ({CHECKPOINT: "2026-09-21T15:13:20Z"},
     f"annotation {CHECKPOINT}: '2026-09-21T15:13:20Z' is 3600s ahead of the scheduler's clock "
     "(more than the 300s allowed for clock skew); treated as never checkpointed"),
    ({CHECKPOINT: "9999-12-31T23:59:59Z"}, f"annotation {CHECKPOINT}: '9999-12-31T23:59:59Z' is"),
    ({CHECKPOINT: "\uff12\uff10\uff12\uff16-09-21T14:13:20Z"},
     f"annotation {CHECKPOINT}: cannot read"),
])
def test_out_of_bounds_and_non_ascii_values_are_named_with_the_reason(
        annotations: dict[str, str], says: str) -> None:
    (problem,) = annotation_problems(annotations, now=NOW)
    assert problem.startswith(says), problem


@pytest.mark.parametrize("checkpoint", ["2026-09-21T14:13:20Z", "2026-09-21T14:18:20Z",
                                        "2020-01-01T00:00:00Z"])
def test_a_checkpoint_up_to_the_clock_skew_ahead_is_accepted(checkpoint: str) -> None:
    assert annotation_problems({CHECKPOINT: checkpoint}, now=NOW) == ()
    assert annotation_problems({CHECKPOINT: "2099-01-01T00:00:00Z"}) == ()  # no clock: no check


def test_a_problem_says_the_value_the_accepted_forms_and_what_happens_instead() -> None:
    (problem,) = annotation_problems({RUNTIME: "soon"})
    assert "cannot read 'soon'" in problem
    assert "1d" in problem and "PT2H" in problem  # the accepted forms
    assert "treated as no estimate" in problem


def pod(uid: str, **annotations: str) -> dict[str, object]:
    return {"metadata": {"uid": uid, "namespace": "ns", "name": f"pod-{uid}",
                         "annotations": annotations}}


def test_each_object_is_warned_once_per_finding_and_again_after_a_fix_is_undone() -> None:
    sink = InputWarnings()
    sink.check("Pod", "v1", pod("a", **{RUNTIME: "soon"}))
    sink.check("Pod", "v1", pod("a", **{RUNTIME: "soon"}))  # an unrelated update
    sink.check("Pod", "v1", pod("b", **{RUNTIME: "2h"}))
    (finding,) = sink.drain()
    assert (finding.kind, finding.namespace, finding.name, finding.uid) == \
        ("Pod", "ns", "pod-a", "a")
    assert sink.drain() == []
    sink.check("Pod", "v1", pod("a", **{RUNTIME: "2h"}))  # fixed
    sink.check("Pod", "v1", pod("a", **{RUNTIME: "later"}))  # broken again
    assert [f.message.split(";")[0] for f in sink.drain()] == \
        [f"annotation {RUNTIME}: cannot read 'later'"]


def test_a_finding_fixed_or_deleted_before_the_loop_drains_it_is_not_emitted() -> None:
    sink = InputWarnings()
    seen: list[str] = []
    handle = sink.checking("Pod", "v1", lambda event, obj: seen.append(event.value))
    handle(informer.EventType.ADDED, pod("a", **{CHECKPOINT: "yesterday"}))
    handle(informer.EventType.DELETED, pod("a", **{CHECKPOINT: "yesterday"}))
    sink.check("Pod", "v1", pod("b", **{MIN_MEMBER: "four"}))
    sink.check("Pod", "v1", pod("b", **{MIN_MEMBER: "4"}))
    assert sink.drain() == []
    assert seen == ["ADDED", "DELETED"]  # the wrapped handler still gets every event


def test_an_object_of_ours_that_cannot_be_used_is_said_once_and_forgotten_when_fixed() -> None:
    sink = InputWarnings()
    upserted: list[object] = []
    handle = converting_handler(
        convert.pod_from_json, upserted.append, lambda _: None,
        lambda obj, why: sink.unusable("Pod", "v1", obj, why))
    bad = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
           "spec": {"schedulerName": "gang-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}
    handle(informer.EventType.ADDED, bad)
    handle(informer.EventType.MODIFIED, bad)
    (finding,) = sink.drain()
    assert (finding.reason, finding.uid) == ("InvalidObject", "u1") and not upserted
    assert "spec.containers[0].resources.requests" in finding.message, finding.message
    assert finding.message.endswith("the scheduler ignores this Pod until it is fixed")
    good = {**bad, "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c"}]}}
    handle(informer.EventType.MODIFIED, good)
    assert len(upserted) == 1 and sink.drain() == []
    handle(informer.EventType.MODIFIED, bad)  # broken again: said again
    assert [f.reason for f in sink.drain()] == ["InvalidObject"]
