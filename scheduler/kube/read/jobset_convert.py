"""A JobSet (``jobset.x-k8s.io/v1alpha2``) from apiserver JSON: the part of its spec that says
which pods start together (``scheduler.feed.grouping_jobset``), with field paths in every error.

Why apart from ``convert``: JobSet is an optional CRD with its own defaults (``replicas`` 1,
a Job's ``parallelism`` 1 and ``completions`` unset as in ``batch/v1``); status is not read,
so a JobSet's status updates never regroup its pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.kube.read.fields import (
    FieldError,
    converted,
    parse_time,
    read_int,
    read_list,
    read_map,
    read_name,
    read_str_map,
)
from scheduler.model.workloads import JobSetInfo, ReplicatedJobInfo


def jobset_from_json(obj: Mapping[str, Any]) -> JobSetInfo:
    return converted("jobset", obj, lambda: _jobset(obj))


def _jobset(obj: Mapping[str, Any]) -> JobSetInfo:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    rjobs = []
    for i, item in enumerate(read_list(spec, "replicatedJobs", "spec.replicatedJobs")):
        path = f"spec.replicatedJobs[{i}]"
        if not isinstance(item, Mapping):
            raise FieldError(path, f"expected an object, got {type(item).__name__}")
        job = read_map(read_map(item, "template", f"{path}.template"), "spec",
                       f"{path}.template.spec")
        depends = []
        for j, dep in enumerate(read_list(item, "dependsOn", f"{path}.dependsOn")):
            name = dep.get("name") if isinstance(dep, Mapping) else None
            if not isinstance(name, str) or not name:
                raise FieldError(f"{path}.dependsOn[{j}].name", "missing")
            depends.append(name)
        rjobs.append(ReplicatedJobInfo(
            name=_rjob_name(item, path),
            replicas=read_int(item, "replicas", f"{path}.replicas", 1, minimum=0) or 0,
            parallelism=read_int(job, "parallelism", f"{path}.template.spec.parallelism", 1,
                             minimum=0) or 0,
            completions=read_int(job, "completions", f"{path}.template.spec.completions", None,
                             minimum=0),
            depends_on=tuple(depends)))
    return JobSetInfo(
        namespace=str(meta.get("namespace") or "default"), name=read_name(meta),
        uid=str(meta.get("uid") or ""), replicated_jobs=tuple(rjobs),
        in_order=_in_order(spec),
        creation_time=parse_time(meta.get("creationTimestamp")),
        labels=read_str_map(meta, "labels", "metadata.labels"),
        annotations=read_str_map(meta, "annotations", "metadata.annotations"))


def _in_order(spec: Mapping[str, Any]) -> bool:
    """``spec.startupPolicy.startupPolicyOrder``: ``InOrder`` or ``AnyOrder`` (the default)."""
    path = "spec.startupPolicy.startupPolicyOrder"
    order = read_map(spec, "startupPolicy", "spec.startupPolicy").get("startupPolicyOrder")
    if order is None or order == "AnyOrder":
        return False
    if order == "InOrder":
        return True
    raise FieldError(path, f"expected InOrder or AnyOrder, got {order!r}")


def _rjob_name(item: Mapping[str, Any], path: str) -> str:
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise FieldError(f"{path}.name", "missing")
    return name
