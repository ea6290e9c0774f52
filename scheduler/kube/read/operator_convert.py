"""The gang an operator's own object asks for: Kubeflow training-operator v1 PyTorchJob and
MPIJob (``kubeflow.org/v1``), KubeRay RayCluster (``ray.io/v1``), read from apiserver JSON.

Why: these operators create their pods themselves, without a PodGroup unless their own gang
scheduling is switched on; read here, their pods form the right gang with no PodGroup
(``scheduler.feed.grouping``, after every explicit source). Each object becomes a
``JobInfo`` of the pods its operator creates at once (``parallelism``) and the fewest that
may run (``min_available``, None: all of them), the operators' own rules:

* **PyTorchJob**: the sum of ``spec.pytorchReplicaSpecs.*.replicas`` (Master and Worker; an
  unset count is 1, the operator's default). Minimum: ``spec.runPolicy.schedulingPolicy.
  minAvailable`` when set (what the operator writes into its own PodGroup's minMember), else
  with ``spec.elasticPolicy.minReplicas`` the elastic minimum (those workers plus any
  Master), else all of them.
* **MPIJob** (v1, the training-operator's): launcher plus workers, ``spec.mpiReplicaSpecs``;
  ``minAvailable`` as above. The v1 controller creates the launcher in the same pass as the
  workers (not once they are ready: ``runLauncherAsWorker`` and the launcher creation policy
  are mpi-operator v2beta1 fields, not v1's), so the launcher is part of the gang.
* **RayCluster**: the head plus each worker group's replicas as KubeRay makes them
  (``replicas`` clamped to ``minReplicas..maxReplicas``, times ``numOfHosts``; a suspended
  group none). With ``spec.enableInTreeAutoscaling`` the autoscaler may shrink each group
  to ``minReplicas``: an elastic gang of the head plus those. A RayJob creates a RayCluster
  that owns the pods, so a RayJob's cluster is sized the same way (its submitter is a Job:
  a gang of its own, as KubeRay's own PodGroup leaves it out).

A spec that does not read (a count that is not an integer, a negative one) is not skipped:
its ``JobInfo`` says which field and why in ``unknown``, so its pods wait with that reason
instead of running as a gang of a guessed size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
from scheduler.model.workloads import JobInfo

#: (pods at once, fewest that may run or None) from an object's spec.
Sizer = Callable[[Mapping[str, Any]], tuple[int, int | None]]


def _replica_sum(spec: Mapping[str, Any], field: str) -> tuple[int, dict[str, int]]:
    """The pods of a training-operator job's replica specs (``spec.<field>``): total, and
    per replica type."""
    specs = read_map(spec, field, f"spec.{field}")
    if not specs:
        raise FieldError(f"spec.{field}", "missing: no replica specs, so no gang size")
    counts: dict[str, int] = {}
    for rtype, rspec in specs.items():
        path = f"spec.{field}.{rtype}"
        if not isinstance(rspec, Mapping):
            raise FieldError(path, f"expected an object, got {type(rspec).__name__}")
        counts[str(rtype)] = read_int(rspec, "replicas", f"{path}.replicas", 1, minimum=0) or 0
    return sum(counts.values()), counts


def _min_available(spec: Mapping[str, Any]) -> int | None:
    policy = read_map(read_map(spec, "runPolicy", "spec.runPolicy"), "schedulingPolicy",
                      "spec.runPolicy.schedulingPolicy")
    return read_int(policy, "minAvailable", "spec.runPolicy.schedulingPolicy.minAvailable",
                    None, minimum=1)


def pytorchjob_size(spec: Mapping[str, Any]) -> tuple[int, int | None]:
    size, counts = _replica_sum(spec, "pytorchReplicaSpecs")
    explicit = _min_available(spec)
    if explicit is not None:
        return size, explicit
    elastic = read_map(spec, "elasticPolicy", "spec.elasticPolicy")
    low = read_int(elastic, "minReplicas", "spec.elasticPolicy.minReplicas", None, minimum=1)
    high = read_int(elastic, "maxReplicas", "spec.elasticPolicy.maxReplicas", None, minimum=1)
    if low is not None and high is not None and low > high:
        raise FieldError("spec.elasticPolicy.minReplicas",
                         f"must be <= maxReplicas ({high}), got {low}")
    if low is None:
        return size, None
    others = sum(n for rtype, n in counts.items() if rtype.lower() != "worker")
    return size, low + others


def mpijob_size(spec: Mapping[str, Any]) -> tuple[int, int | None]:
    size, _ = _replica_sum(spec, "mpiReplicaSpecs")
    return size, _min_available(spec)


def raycluster_size(spec: Mapping[str, Any]) -> tuple[int, int | None]:
    read_map(spec, "headGroupSpec", "spec.headGroupSpec")
    desired, least = 1, 1  # the head
    for i, group in enumerate(read_list(spec, "workerGroupSpecs", "spec.workerGroupSpecs")):
        path = f"spec.workerGroupSpecs[{i}]"
        if not isinstance(group, Mapping):
            raise FieldError(path, f"expected an object, got {type(group).__name__}")
        if group.get("suspend") is True:
            continue
        low = read_int(group, "minReplicas", f"{path}.minReplicas", 0, minimum=0) or 0
        high = read_int(group, "maxReplicas", f"{path}.maxReplicas", None, minimum=0)
        want = read_int(group, "replicas", f"{path}.replicas", None, minimum=0)
        hosts = read_int(group, "numOfHosts", f"{path}.numOfHosts", 1, minimum=0) or 1
        high = (2**31 - 1) if high is None else high
        # KubeRay's own clamp: above max -> max; below min (or unset) -> min; min > max -> max.
        replicas = high if low > high else min(max(want if want is not None else low, low), high)
        desired += replicas * hosts
        least += min(low, high) * hosts
    autoscaled = spec.get("enableInTreeAutoscaling") is True
    return desired, least if autoscaled and least < desired else None


def operator_job(kind: str, obj: Mapping[str, Any], size_of: Sizer) -> JobInfo:
    """*obj* (of *kind*) as the ``JobInfo`` its gang is sized by; an unreadable spec as one
    whose ``unknown`` names the field (its pods wait with it)."""
    return converted(kind.lower(), obj, lambda: _operator_job(kind, obj, size_of))


def _operator_job(kind: str, obj: Mapping[str, Any], size_of: Sizer) -> JobInfo:
    meta = read_map(obj, "metadata", "metadata")
    namespace, name = str(meta.get("namespace") or "default"), read_name(meta)
    unknown, size, least = "", 1, None
    try:
        size, least = size_of(read_map(obj, "spec", "spec"))
    except FieldError as exc:
        unknown = (f"{kind} {namespace}/{name}: {exc.path}: {exc.reason}; its pods wait until "
                   "it is fixed, as its gang size is not known")
    return JobInfo(namespace, name, str(meta.get("uid") or ""), parallelism=max(1, size),
                   min_available=least, creation_time=parse_time(meta.get("creationTimestamp")),
                   labels=read_str_map(meta, "labels", "metadata.labels"),
                   annotations=read_str_map(meta, "annotations", "metadata.annotations"),
                   unknown=unknown)


#: The operator kinds whose objects size their pods' gang, and how.
SIZERS: Mapping[str, Sizer] = {
    "PyTorchJob": pytorchjob_size,
    "MPIJob": mpijob_size,
    "RayCluster": raycluster_size,
}
