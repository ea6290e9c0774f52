"""The views' rows (scheduler/views/): built from a real cycle, cut for a tenant, read back
from JSON, parsed from what the scheduler writes on pods, rendered as text and HTML, and
served read-only."""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from rich.console import Console

from scheduler.decide.plan import CyclePlan
from scheduler.kube.oneshot import status_time
from scheduler.kube.write.queue_status import status_of
from scheduler.model import PodRequirements, Resources
from scheduler.model.demand import gpus_of
from scheduler.model.native import GroupPolicy, NativeGroupInfo
from scheduler.model.resources import GPU
from scheduler.model.workloads import OwnerRef, PodInfo
from scheduler.run.loop import Scheduler
from scheduler.run.serve import Health, serve
from scheduler.views import apiserver, html, live, text
from scheduler.views.apiserver import parse_reason
from scheduler.views.state import (
    ClusterView,
    QueuePool,
    QueueRow,
    gang_labels,
    tree_order,
    with_lent,
    workload_of,
)
from tests.unit.policies.builders import gang, policies, queue
from tests.unit.test_loop_metrics import gang_pods, make, node

RANK = "batch.kubernetes.io/job-completion-index"
ROOT = Path(__file__).resolve().parents[2]


def scene() -> ClusterView:
    """team-a runs a 2-rank gang on n1 and waits with an 8-GPU one; team-b (namespace other)
    uses 12 GPUs on n2 and n3, 4 of them borrowed from team-a's idle quota."""
    sched, plan = scene_cycle()
    last = sched.last_cycle
    assert last is not None
    inp, pol_in_force = last
    return live.build(live.Cycle(inp, plan, pol_in_force, sched.last_queues),
                      sched.cache.gang_pods)


def scene_cycle() -> tuple[Scheduler, CyclePlan]:
    """The scene's scheduler after its one cycle, and that cycle's plan."""
    pol = policies(queue("org", namespaces=()),
                   queue("team-a", "org", quota={"p": 8}, namespaces=("ns",)),
                   queue("team-b", "org", quota={"p": 8}, namespaces=("other",)))
    train = gang_pods("train", 2, 2, "team-a", node="n1")
    pods = [dataclasses.replace(p, labels={**p.labels, RANK: str(1 - i)})
            for i, p in enumerate(train)]  # rank order differs from name order
    pods += gang_pods("wide", 1, 8, "team-a", created=1)
    pods += [dataclasses.replace(p, namespace="other")
             for p in (*gang_pods("borrow", 1, 8, "team-b", node="n2"),
                       *gang_pods("extra", 1, 4, "team-b", node="n3"))]
    sched, _, _ = make(pods, [node("n1"), node("n2"), node("n3")], pol)
    return sched, sched.run_once()


@pytest.fixture(scope="module")
def view() -> ClusterView:
    return scene()


def test_a_cycle_becomes_rows(view: ClusterView) -> None:
    assert [q.name for q in view.queues] == ["org", "team-a", "team-b"]
    assert [q.depth for q in view.queues] == [0, 1, 1]
    (wide,) = view.pending
    assert (wide.id, wide.queue_position, wide.cluster_position) == ("ns/wide", 1, 1)
    assert wide.reason and wide.message
    train = next(g for g in view.running if g.id == "ns/train")
    assert [(r.rank, r.node, r.pod) for r in train.ranks] == [("0", "n1", "train-1"),
                                                                ("1", "n1", "train-0")]
    assert view.nodes is not None
    n2 = next(n for n in view.nodes if n.name == "n2")
    assert n2.used == (("team-b", 8),) and n2.free == 0
    n1 = next(n for n in view.nodes if n.name == "n1")
    assert n1.used == (("team-a", 4),) and n1.free == 4


def test_borrowed_and_lent_quota(view: ClusterView) -> None:
    b = next(q for q in view.queues if q.name == "team-b")
    a = next(q for q in view.queues if q.name == "team-a")
    (pb,), (pa,) = b.pools, a.pools
    assert (pb.allocated, pb.nominal, pb.borrowed) == (12, 8, 4)
    assert (pa.allocated, pa.nominal, pa.lent) == (4, 8, 4)  # its idle 4 are what b borrows
    assert view.nodes is not None
    assert sum(n.borrowed for n in view.nodes) == 4


def test_a_tenant_sees_its_gangs_and_the_queues_that_admit_it(view: ClusterView) -> None:
    mine = view.for_namespaces(["ns"])
    assert [q.name for q in mine.queues] == ["org", "team-a"]  # the parent keeps the tree
    assert {g.namespace for g in (*mine.pending, *mine.running)} == {"ns"}
    assert view.for_namespaces(None) is view


def _queue_objects(sched: Scheduler) -> list[dict[str, Any]]:
    """The scene's Queues as the apiserver serves them: spec, and the status the leader wrote."""
    last = sched.last_cycle
    assert last is not None
    queues = last[1].queues.queues
    objects = []
    for report in sched.last_queues:
        q = queues[report.name]
        spec: dict[str, Any] = {"weight": q.weight, "namespaces": list(q.namespaces),
                                "quotas": [{"pool": pq.pool, "nominal": {GPU: gpus_of(pq.nominal)}}
                                           for pq in q.quotas]}
        if q.parent:
            spec["parent"] = q.parent
        objects.append({"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
                        "metadata": {"name": q.name}, "spec": spec, "status": status_of(report)})
    return objects


def test_both_sources_mark_borrowed_and_stranded_gpus_alike(view: ClusterView) -> None:
    """Issue 32: the apiserver-sourced view marked no GPU borrowed or stranded where the
    scheduler's own view did, on the same cluster. One rule (``views.marks``) now."""
    sched, plan = scene_cycle()
    last = sched.last_cycle
    assert last is not None
    inp = last[0]
    read = apiserver.build(inp.gangs, sched.cache.gang_pods, {}, _queue_objects(sched),
                           inp.snapshot, plan.now)
    assert read.nodes is not None and view.nodes is not None
    assert read.nodes == view.nodes
    assert [(n.name, n.free) for n in read.nodes if n.stranded] == [("n1", 4), ("n3", 4)]
    assert sum(n.borrowed for n in read.nodes) == 4


def test_json_round_trips(view: ClusterView) -> None:
    assert ClusterView.from_dict(json.loads(json.dumps(view.to_dict()))) == view


def test_tree_order_and_lent_without_a_cycle() -> None:
    rows = [QueueRow("b", "root", 0, 1, (), (QueuePool("p", 4, 6, 2, 0),), 0.5, 0.5, 1, 0),
            QueueRow("root", "", 0, 1, (), (), 1, 0, 0, 0),
            QueueRow("a", "root", 0, 1, (), (QueuePool("p", 4, 1, 0, 0),), 0.5, 0.1, 1, 0)]
    ordered = tree_order(with_lent(rows))
    assert [(r.name, r.depth) for r in ordered] == [("root", 0), ("a", 1), ("b", 1)]
    assert ordered[1].pools[0].lent == 2  # a's idle 3, of which b borrows 2


@pytest.mark.parametrize(("message", "parsed"), [
    ("Quota (#3 in queue order): team-a needs 8 a100 GPUs",
     ("Quota", 3, "team-a needs 8 a100 GPUs")),
    ("WaitingForMembers: 2 of 3 pods exist", ("WaitingForMembers", None, "2 of 3 pods exist")),
    ("something else", ("", None, "something else")),
])
def test_reasons_the_scheduler_wrote_are_read_back(message: str, parsed: tuple) -> None:
    assert parse_reason(message) == parsed


def test_eta_from_the_podgroup_field() -> None:
    """The views read the estimate from ``status.estimatedStart``, not from a message."""
    assert status_time({"status": {"estimatedStart": "2024-05-01T12:02:00Z"}}) == \
        1_714_564_920.0
    assert status_time({"status": {}}) is None
    assert status_time({"status": {"estimatedStart": "soon"}}) is None


def test_text_and_html_show_the_rows(view: ClusterView) -> None:
    console = Console(record=True, width=200, color_system=None)
    console.print(text.top(view))
    out = console.export_text()
    for wanted in ("Queues", "Pending gangs", "ns/wide", "0:n1", "Nodes"):
        assert wanted in out, wanted
    page = html.render(view)
    assert "<script" not in page and "<form" not in page
    assert "data-gang='ns/wide'" in page and "rank 0: n1 (Running)" in page
    assert page.count("<div class='cell ") == 3 * 8  # 3 nodes x 8 GPUs
    assert page.count("<span class='cell ") == 6  # the legend names every kind of cell


def test_html_escapes_what_users_wrote(view: ClusterView) -> None:
    evil = dataclasses.replace(view, pending=(dataclasses.replace(
        view.pending[0], message="<img src=x onerror=alert(1)>"),))
    page = html.render(evil)
    assert "<img src=x" not in page and "&lt;img src=x" in page


@pytest.fixture
def server(view: ClusterView) -> Iterator[tuple[int, list[ClusterView | None]]]:
    current: list[ClusterView | None] = [view]
    srv = serve(CollectorRegistry(), Health(), "127.0.0.1", 0, view=lambda: current[0])
    yield srv.server_address[1], current
    srv.shutdown()


def test_the_endpoints_are_read_only_and_filter_by_namespace(server: tuple) -> None:
    port, current = server
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/state?namespace=ns") as r:
        state = json.loads(r.read())
    assert {g["namespace"] for g in state["pending"] + state["running"]} == {"ns"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/dashboard") as r:
        assert r.headers["Content-Type"].startswith("text/html")
        assert "default-src 'none'" in r.headers["Content-Security-Policy"]
        assert r.headers["X-Frame-Options"] == "DENY"
    post = urllib.request.Request(f"http://127.0.0.1:{port}/dashboard", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(post)
    assert refused.value.code == 501  # no handler for anything but GET
    current[0] = None  # a standby: no cycle of its own
    with pytest.raises(urllib.error.HTTPError) as standby:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/dashboard")
    assert standby.value.code == 503


def _swatches(page: str) -> dict[str, str]:
    """Queue name -> the colour of its swatch in the queues table."""
    return dict(re.findall(r"<tr data-queue='([^']*)'><td>(?:&nbsp;)*<span class='swatch' "
                           r"style='background:([^']*)'>", page))


def test_the_shipped_queues_get_distinct_colours_that_last_across_refreshes(
        view: ClusterView) -> None:
    """Issue 32: a hash of the name gave ``team-a`` and ``team-b`` (deploy/queues) one colour."""
    shipped = sorted(p.stem for p in (ROOT / "deploy" / "queues").glob("*.yaml")
                     if p.stem != "kustomization")
    assert {"team-a", "team-b"} <= set(shipped)
    rows = tuple(QueueRow(name, "", 0, 1, (), (), 1, 0, 0, 0) for name in shipped)
    first = html.render(dataclasses.replace(view, queues=rows, pending=(), running=(),
                                            nodes=()))
    colours = _swatches(first)
    assert set(colours) == set(shipped) and len(set(colours.values())) == len(shipped)
    # A refresh where gangs came and went: every queue keeps its colour.
    again = html.render(dataclasses.replace(view, queues=rows))
    assert _swatches(again) == colours
    # A node cell is drawn in the colour of the queue allocated it.
    page = html.render(view)
    n1 = page.split("data-node='n1'", 1)[1].split("</div></div>", 1)[0]
    assert f"background:{_swatches(page)['team-a']}" in n1


GENERATED = "ddp-train-c965486c9-ddp-train-pgt-0-5f8cbc9c64"  # what the Job controller names


def _pod(labels: dict[str, str] | None = None, owner: tuple[str, str] | None = None) -> PodInfo:
    return PodInfo(uid="u", namespace="ns", name="p-0", requirements=PodRequirements(Resources()),
                   labels=labels or {}, owner=OwnerRef(*owner) if owner else None)


@pytest.mark.parametrize(("gang_name", "native_owner", "pod", "workload"), [
    # Issue 32: the Job controller's PodGroup (WorkloadWithJob) names its Job as owner.
    (GENERATED, ("Job", "ddp-train"), _pod(owner=("Job", GENERATED)), "Job/ddp-train"),
    ("ddp", None, _pod(owner=("Job", "ddp")), "Job/ddp"),
    ("pair", None, _pod({"jobset.sigs.k8s.io/jobset-name": "pair"}, ("Job", "pair-w-0")),
     "JobSet/pair"),
    ("finetune", None, _pod({"jobset.sigs.k8s.io/jobset-name": "finetune",
                             "trainer.kubeflow.org/trainjob-name": "finetune"}),
     "TrainJob/finetune"),
    ("bert", None, _pod(owner=("PyTorchJob", "bert")), "PyTorchJob/bert"),
    ("alone", None, _pod(), ""),  # a PodGroup or a lone pod: the gang is what was submitted
])
def test_the_workload_behind_a_gang(gang_name: str, native_owner: tuple[str, str] | None,
                                    pod: PodInfo, workload: str) -> None:
    native = (NativeGroupInfo("ns", gang_name, GroupPolicy(min_count=1),
                              owner_kind=native_owner[0], owner_name=native_owner[1])
              if native_owner else None)
    g = dataclasses.replace(gang(gang_name, namespace="ns"), native=native)
    assert workload_of(g, [pod]) == workload


def test_gangs_are_named_after_their_workload_where_known(view: ClusterView) -> None:
    rows = (dataclasses.replace(view.pending[0], id=f"ns/{GENERATED}", workload="Job/ddp-train"),
            dataclasses.replace(view.pending[0], id="ns/js", workload="JobSet/js"),
            dataclasses.replace(view.pending[0], id="ns/js-workers", workload="JobSet/js"))
    named = dataclasses.replace(view, pending=rows)
    assert gang_labels(named) == {
        f"ns/{GENERATED}": "ns/ddp-train (Job)",
        # One JobSet, two gangs: each keeps its id, the JobSet after it.
        "ns/js": "ns/js (JobSet js)", "ns/js-workers": "ns/js-workers (JobSet js)",
        # No workload known (a PodGroup of their own): their ids.
        "ns/train": "ns/train", "other/borrow": "other/borrow", "other/extra": "other/extra"}
    console = Console(record=True, width=200, color_system=None)
    console.print(text.top(named))
    out = console.export_text()
    assert "ns/ddp-train (Job)" in out and GENERATED not in out
    page = html.render(named)
    assert "<td>ns/ddp-train (Job)</td>" in page
    assert f"data-gang='ns/{GENERATED}'" in page  # the id stays the row's key
    assert ClusterView.from_dict(json.loads(json.dumps(named.to_dict()))) == named
