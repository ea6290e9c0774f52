"""Reading how a pod failed (and what its Job does about failures) from apiserver JSON.

Why apart from ``convert``: everything else there is strict (a malformed field skips the
object), but a failed pod's status is read only to explain it. A status the kubelet (or a
simulator) wrote oddly must never cost the pod its record, so every reader here is lenient:
what it cannot read it leaves out, and the record still says the pod failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scheduler.model import failures, job_backoff, workloads
from scheduler.model.failures import Failure, FailureRule, RuleAction
from scheduler.model.shortfall import parse_indexes

#: The longest message kept from a status (a stack trace is not an explanation).
MESSAGE_CHARS = 200


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(annotations: Mapping[str, str], key: str) -> int:
    value = annotations.get(key, "")
    return int(value) if value.isascii() and value.isdigit() else 0


def _terminated(status: Any) -> Mapping[str, Any]:
    """A container status's ``state.terminated``, else its ``lastState.terminated``."""
    return _map(_map(status, "state"), "terminated") or _map(_map(status, "lastState"),
                                                              "terminated")


def _ended(status: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    """(container name, its terminated state, init container?): init containers first,
    because when one fails the others never ran."""
    found = []
    for key, init in (("initContainerStatuses", True), ("containerStatuses", False)):
        for entry in _list(status, key):
            ended = _terminated(entry)
            if ended:
                found.append((str(entry.get("name") or ""), ended, init))
    return found


def _culprit(ended: list[tuple[str, Mapping[str, Any], bool]]
             ) -> tuple[str, Mapping[str, Any], bool] | None:
    """The container that explains the failure: one OOM-killed, else the first with a
    non-zero exit code, else the first that ended at all."""
    for name, state, init in ended:
        if state.get("reason") == "OOMKilled":
            return name, state, init
    for name, state, init in ended:
        if _int(state.get("exitCode")):
            return name, state, init
    return ended[0] if ended else None


def _disruption(status: Mapping[str, Any]) -> tuple[str, float | None, str]:
    """The ``DisruptionTarget=True`` reason, when it was set, and its message."""
    for c in _list(status, "conditions"):
        if (isinstance(c, Mapping) and c.get("type") == failures.DISRUPTION_TARGET
                and c.get("status") == "True"):
            return (str(c.get("reason") or ""), _time(c.get("lastTransitionTime")),
                    str(c.get("message") or ""))
    return "", None, ""


def _last_change(status: Mapping[str, Any]) -> float | None:
    times = [t for c in _list(status, "conditions") if isinstance(c, Mapping)
             and (t := _time(c.get("lastTransitionTime"))) is not None]
    return max(times, default=None)


def pod_failure(pod: Any) -> Failure | None:
    """The failure record of a pod in phase ``Failed`` (None for any other pod); never
    raises: a field it cannot read is left out of the record."""
    status, meta = _map(pod, "status"), _map(pod, "metadata")
    if status.get("phase") != "Failed":
        return None
    labels = {str(k): str(v) for k, v in _map(meta, "labels").items()}
    annotations = {str(k): str(v) for k, v in _map(meta, "annotations").items()}
    name = str(meta.get("name") or "?")
    ended = _ended(status)
    culprit = _culprit(ended)
    container, state, init = culprit if culprit is not None else ("", {}, False)
    exit_code = _int(state.get("exitCode"))
    disruption, disrupted_at, disruption_message = _disruption(status)
    pod_reason = str(status.get("reason") or "")
    container_reason = str(state.get("reason") or "")
    kind = failures.classify(pod_reason, disruption, container_reason, exit_code)
    reason = ((disruption if kind in failures.DISRUPTIONS and disruption else "")
              or pod_reason or container_reason)
    message = (disruption_message if disruption else "") or str(
        status.get("message") or state.get("message") or "")
    job = next((str(ref.get("name") or "") for ref in _list(meta, "ownerReferences")
                if isinstance(ref, Mapping) and ref.get("controller")
                and ref.get("kind") == "Job"), "")
    return Failure(
        uid=str(meta.get("uid") or ""), pod=name,
        rank=workloads.rank_label(labels, annotations) or name, kind=kind, reason=reason,
        exit_code=exit_code, container=container, init_container=init,
        finished_at=_time(state.get("finishedAt")) or disrupted_at or _last_change(status),
        message=" ".join(message.split())[:MESSAGE_CHARS], job=job,
        index_failures=_count(annotations, job_backoff.INDEX_FAILURES_ANNOTATION),
        index_ignored_failures=_count(annotations,
                                      job_backoff.INDEX_IGNORED_FAILURES_ANNOTATION),
        exits=tuple((n, code, i) for n, s, i in ended if (code := _int(s.get("exitCode")))),
        disruption=disruption)


def failure_rules(spec: Mapping[str, Any]) -> tuple[FailureRule, ...]:
    """``spec.podFailurePolicy.rules`` (the apiserver validated them; a rule this cannot
    read is left out, never a reason to skip the Job)."""
    rules = []
    for raw in _list(_map(spec, "podFailurePolicy"), "rules"):
        if not isinstance(raw, Mapping):
            continue
        try:
            action = RuleAction(str(raw.get("action")))
        except ValueError:
            continue
        codes = _map(raw, "onExitCodes")
        conditions = frozenset(str(c.get("type")) for c in _list(raw, "onPodConditions")
                               if isinstance(c, Mapping) and c.get("status", "True") == "True")
        values = frozenset(v for v in _list(codes, "values") if _int(v) is not None)
        if not values and not conditions:
            continue
        rules.append(FailureRule(action, values, codes.get("operator") == "NotIn",
                                 str(codes.get("containerName") or ""), conditions))
    return tuple(rules)


def job_failures(status: Mapping[str, Any]) -> dict[str, Any]:
    """The failure fields of a Job's status, as ``JobInfo`` keywords."""
    try:
        failed_indexes = parse_indexes(str(status.get("failedIndexes") or ""))
    except ValueError:
        failed_indexes = frozenset()
    reason = next((str(c.get("reason") or "") for c in _list(status, "conditions")
                   if isinstance(c, Mapping) and c.get("type") in ("Failed", "FailureTarget")
                   and c.get("status") == "True"), "")
    return {"failed": max(0, _int(status.get("failed")) or 0),
            "failed_indexes": failed_indexes, "failed_reason": reason}
