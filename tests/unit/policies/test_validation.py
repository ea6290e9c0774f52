"""Cross-object checks, policy files and the last-good-version store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.errors import PolicyError
from policies.validation import PolicyStore, load_policies, parse_documents, read_files
from scheduler.model.resources import GPU

EXAMPLES = Path(__file__).parents[3] / "scheduler" / "examples" / "queues"


def queue_obj(name: str, parent: str | None = None, gpus: int = 8) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaces": ["*"],
                            "quotas": [{"pool": "a100", "nominal": {GPU: gpus}}]}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name}, "spec": spec}


def errors_of(*objs: Any) -> list[str]:
    return [str(e) for e in parse_documents([("f.yaml#1", o) for o in objs]).errors]


def test_examples_are_valid() -> None:
    result = read_files(sorted(EXAMPLES.glob("*.yaml")))
    assert result.errors == ()
    assert set(result.policies.queues.queues) == {"research", "team-a", "team-b"}
    assert result.policies.queues.children_of("research") == ("team-a", "team-b")


def test_unknown_parent() -> None:
    assert errors_of(queue_obj("a", parent="nope")) == [
        "f.yaml#1: a: spec.parent: unknown queue 'nope'"]


def test_cycles_are_reported_for_every_member() -> None:
    errs = errors_of(queue_obj("a", parent="b"), queue_obj("b", parent="c"),
                     queue_obj("c", parent="a"), queue_obj("d", parent="a"))
    assert len(errs) == 3
    assert "a: spec.parent: cycle in the queue hierarchy: a -> b -> c -> a" in errs[0]


def test_duplicate_names() -> None:
    errs = errors_of(queue_obj("a"), queue_obj("a"))
    assert errs == ["f.yaml#1: a: metadata.name: duplicate Queue name (first in f.yaml#1)"]


def test_child_of_an_invalid_parent_does_not_cascade() -> None:
    bad = queue_obj("p")
    bad["spec"]["weight"] = -1
    errs = errors_of(bad, queue_obj("a", parent="p"))
    assert errs == ["f.yaml#1: p: spec.weight: must be > 0, got -1"]


def test_list_kind_and_multi_document_files(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    listed = {"apiVersion": "v1", "kind": "List",
              "items": [queue_obj("root"), queue_obj("a", parent="root")]}
    path.write_text(yaml.safe_dump(listed) + "---\n" + yaml.safe_dump(queue_obj("b", "root")))
    policies = load_policies([path])
    assert set(policies.queues.queues) == {"root", "a", "b"}


def test_load_policies_raises_with_every_error(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(queue_obj("a", gpus=-1)) + "---\nkind: Namespace\n")
    with pytest.raises(PolicyError) as info:
        load_policies([path])
    assert len(info.value.errors) == 2
    assert "q.yaml#1: a: spec.quotas[0].nominal.nvidia.com/gpu: must be >= 0" in str(info.value)
    assert "kind: must be Queue or SchedulerPolicy" in str(info.value)


def test_unreadable_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [unclosed\n")
    result = read_files([bad, tmp_path / "missing.yaml"])
    assert [e.reason.split(":")[0] for e in result.errors] == ["not valid YAML", "cannot read"]


def test_store_keeps_the_last_good_version() -> None:
    store = PolicyStore().apply(queue_obj("a", gpus=8)).store
    bad = queue_obj("a", gpus=-3)
    update = store.apply(bad)
    assert not update.accepted
    assert update.errors[0].path == "spec.quotas[0].nominal.nvidia.com/gpu"
    assert update.store is store
    quota = update.store.policies.queues.queues["a"].quota("a100")
    assert quota is not None and quota.nominal[GPU] == 8
    good = update.store.apply(queue_obj("a", gpus=16))
    assert good.accepted
    quota = good.store.policies.queues.queues["a"].quota("a100")
    assert quota is not None and quota.nominal[GPU] == 16


def test_store_rejects_an_update_that_makes_a_cycle() -> None:
    store = PolicyStore()
    for obj in (queue_obj("root"), queue_obj("a", parent="root"), queue_obj("b", parent="a")):
        store = store.apply(obj).store
    update = store.apply(queue_obj("a", parent="b"))
    assert not update.accepted and "cycle" in update.errors[0].reason
    assert update.store.policies.queues.queues["a"].parent == "root"


def test_store_accepts_children_before_their_parent() -> None:
    first = PolicyStore().apply(queue_obj("a", parent="root"))
    assert not first.accepted and "unknown queue 'root'" in first.errors[0].reason
    second = first.store.apply(queue_obj("root"))
    assert second.accepted
    assert second.store.policies.queues.parent_of("a") == "root"
    assert second.store.waiting == {}


def test_store_delete_and_scheduler_policy() -> None:
    store = PolicyStore().apply(queue_obj("root")).store.apply(queue_obj("a", "root")).store
    store = store.delete("a")
    assert set(store.policies.queues.queues) == {"root"}
    obj = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
           "metadata": {"name": "default"}, "spec": {"preset": "fifo-gang"}}
    update = store.apply(obj)
    assert update.accepted and update.store.policies.scheduler.preemption is False
    obj["spec"] = {"backfill": "maybe"}
    assert not update.store.apply(obj).accepted
