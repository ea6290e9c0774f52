"""``explain`` on a running gang of a semi-preemptible queue says what reclaim could take."""

from __future__ import annotations

from policies.queues import PolicySet
from scheduler.cli.explain import explain_text
from scheduler.feed.cache import ClusterCache
from scheduler.model.workloads import PodInfo
from tests.unit.elastic.helpers import NODES, NOW
from tests.unit.semi.helpers import N0, N1, N2, N3, job, tree


class Fixed:
    def __init__(self, policies: PolicySet) -> None:
        self.policies = policies

    def current(self) -> PolicySet:
        return self.policies


def _explain(pods: list[PodInfo], gang: str, *, on: bool = True) -> str:
    cache = ClusterCache()
    for node in NODES:
        cache.upsert_node(node)
    for pod in pods:
        cache.upsert_pod(pod)
    text, found = explain_text(gang, cache, Fixed(tree(16, 16, on=on)), now=NOW)
    assert found
    return text


def test_an_elastic_gang_is_told_which_members_may_be_taken_back() -> None:
    text = _explain(job("e", [N0, N1, N2, N3], gpus=4, min_member=2), "ns/e")
    assert ("reclaim      its minimum runs within a's quota and is kept; members e-2, e-3 "
            "above it may be taken back while a borrows (spec.preemption.semiPreemptible)"
            ) in text


def test_the_gang_that_came_later_is_told_it_may_go_whole() -> None:
    pods = [*job("old", [N0, N1], at=100), *job("new", [N2, N3], at=200)]
    assert "reclaim      its minimum runs within a's quota: other queues' reclaim never" in (
        _explain(pods, "ns/old"))
    assert "while a borrows, reclaim may take the whole gang" in _explain(pods, "ns/new")


def test_without_the_field_nothing_is_said() -> None:
    assert "reclaim" not in _explain(job("e", [N0, N1], min_member=1), "ns/e", on=False)
