"""The everyday views against the dev cluster: ``gang-scheduler queues | gangs | top``
through the apiserver (as an admin, and as a tenant with deploy/users' namespace RBAC only),
from the scheduler's ``/api/v1/state``, as the ``kubectl-gang`` plugin; and the read-only
dashboard in a real
headless Chromium (Debian's chromium and chromium-driver, driven by selenium), asserting what
a person sees on the page.

One scene for the module: a live scheduler for this test's tenant, 3 nodes x 8 GPUs, queues
org > a (16 GPUs) and b (8 GPUs). In a, a running gang of two 4-GPU ranks (completion
indexes 0 and 1) and a waiting gang of two 8-GPU pods; in b, a gang of two 6-GPU pods that
borrows 4 of a's idle GPUs and leaves 2 GPUs stranded on each of its nodes. And in a, a
lone pod ``crash`` (no GPUs, rank 0) that exits 3 a second after it starts: a failed gang,
shown with its last failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cli.main import main
from scheduler.run.serve import serve
from scheduler.tools.devcluster import rest
from tests.cli_logging import errors_only_logged, quiet_cli_logging
from tests.e2e.browser import chromium, read_page, screenshot
from tests.e2e.cluster_api import SIMULATED_EXIT_CODE, SIMULATED_RUNTIME, ControlPlane, wait_for
from tests.e2e.live import QUEUE_LABEL, Tenant
from tests.e2e.ops_support import Ops

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RANK = "batch.kubernetes.io/job-completion-index"


@pytest.fixture(autouse=True)
def _cli_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from quiet_cli_logging(monkeypatch)


@dataclass
class Scene:
    ops: Ops
    queue: str  # a
    other: str  # b, the borrower
    port: int  # the scheduler's metrics + dashboard port
    config: Path  # a scheduler config naming this tenant's schedulerName

    @property
    def ns(self) -> str:
        return self.ops.ns

    def cli(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err


@pytest.fixture(scope="module")
def scene(control_plane: ControlPlane) -> Iterator[Scene]:
    tenant = Tenant.create(control_plane)
    ops = Ops(control_plane, tenant, f"views-{tenant.pool.removeprefix('pool-')}")
    # The scene's scheduler logs nothing into the stdout the CLI's JSON is read from.
    with errors_only_logged():
        try:
            tenant.create_nodes(3, gpus=8)
            ops.queue("org")
            queue = ops.queue("a", gpus=16, parent="org")
            other = ops.queue("b", gpus=8, parent="org")
            runner = ops.start_scheduler()
            server = serve(runner.live.metrics.registry, runner.live.health, "127.0.0.1", 0,
                           view=runner.live.view)
            ops.cleanup.append(server.shutdown)
            for i in range(2):
                ops.pod(f"train-{i}", 4, queue, group="train", labels={RANK: str(i)})
            rest.call(control_plane.custom.create_namespaced_custom_object, "scheduling.x-k8s.io",
                      "v1alpha1", ops.ns, "podgroups",
                      {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                       "metadata": {"name": "train", "labels": {"gangscheduler.io/queue": queue}},
                       "spec": {"minMember": 2}})
            wait_for(lambda: tenant.all_bound(["train-0", "train-1"]), 30, what="train bound")
            borrow = ops.gang("borrow", 2, 6, other)
            wait_for(lambda: tenant.all_bound(borrow), 30, what="borrow bound")
            ops.gang("wide", 2, 8, queue)
            rest.call(control_plane.core.create_namespaced_pod, ops.ns, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "crash", "labels": {QUEUE_LABEL: queue, RANK: "0"},
                             "annotations": {SIMULATED_RUNTIME: "1", SIMULATED_EXIT_CODE: "3"}},
                "spec": tenant.pod_spec(0)})
            config = Path(tempfile.mkdtemp()) / "config.yaml"
            config.write_text(yaml.safe_dump({"schedulerName": tenant.scheduler_name,
                                              "defaultQueue": queue}))
            scene = Scene(ops, queue, other, server.server_address[1], config)
            # The scheduler has written its reason on the waiting pods: the complete gang's,
            # not the "WaitingForMembers" of a cycle that saw one pod only.
            wait_for(lambda: all(_scheduled_false(p) and not _reason(p).startswith(
                "WaitingForMembers") for n, p in tenant.pods().items()
                if n.startswith("wide-")), 60, what="wide's pods say why")
            # What the tests read is settled: kwok started the bound pods, and both Queues'
            # statuses (written every second, each its own write) count them.
            wait_for(lambda: {p["status"].get("phase") for n, p in tenant.pods().items()
                              if n.startswith(("train-", "borrow-"))} == {"Running"}, 60,
                     what="train and borrow running")
            wait_for(lambda: tenant.pods()["crash"]["status"].get("phase") == "Failed", 60,
                     what="crash failed")
            wait_for(lambda: (ops.queue_status(queue).get("allocatedGPUs"),
                              ops.queue_status(other).get("allocatedGPUs")) == (8, 12), 60,
                     what="the Queues' status: a 8 GPUs, b 12")
            yield scene
        finally:
            for stop in reversed(ops.cleanup):
                stop()


def _reason(pod: dict[str, Any]) -> str:
    return next((str(c.get("message") or "") for c in (pod.get("status") or {}).get(
        "conditions") or () if c.get("type") == "PodScheduled"), "")


def _scheduled_false(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or ())


def test_gangs_through_the_apiserver_as_an_admin(scene: Scene,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    admin = str(scene.ops.cp.kubeconfig)
    code, out, err = scene.cli(capsys, "gangs", "--kubeconfig", admin, "--config",
                               str(scene.config), "-n", scene.ns, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    running = {g["id"]: g for g in doc["running"]}
    assert set(running) == {f"{scene.ns}/train", f"{scene.ns}/borrow"}
    train = running[f"{scene.ns}/train"]
    assert train["gpus"] == 8
    assert [(r["rank"], r["phase"]) for r in train["ranks"]] == [("0", "Running"),
                                                                  ("1", "Running")]
    assert all(r["node"].startswith(scene.ops.tenant.pool) for r in train["ranks"])
    (wide,) = doc["pending"]
    assert wide["id"] == f"{scene.ns}/wide" and wide["gpus"] == 16
    assert wide["cluster_position"] == 1 and wide["queue_position"] == 1
    assert wide["reason"] in ("Quota", "Placement", "Reserved") and wide["message"]
    # The lone pod that exited 3: a failed gang, read from the failed pod listed.
    (crash,) = doc["failed"]
    assert crash["id"] == f"{scene.ns}/crash" and crash["state"] == "Failed"
    assert crash["failures"]["summary"].startswith("rank 0: exit 3 "), crash
    (rank,) = crash["failures"]["ranks"]
    assert rank["what"] == "exit code 3 (Error) in container main", rank
    # The same as a table, and as yaml from the kubectl plugin.
    code, out, _ = scene.cli(capsys, "gangs", "--kubeconfig", admin, "--config",
                             str(scene.config), "-n", scene.ns)
    assert code == 0 and "Pending gangs" in out and f"{scene.ns}/wide" in out
    assert "Failed gangs" in out and "rank 0: exit code 3 (Error) in container main" in out
    plugin = shutil.which("kubectl-gang", path=str(REPO / ".venv" / "bin"))
    assert plugin, "the kubectl-gang entry point is installed with the package"
    proc = subprocess.run([plugin, "gangs", "-n", scene.ns, "--config", str(scene.config),
                           "-o", "yaml", "--kubeconfig", admin], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)["pending"][0]["id"] == f"{scene.ns}/wide"


def test_a_tenant_sees_its_namespace_and_the_queues_it_may_use(
        scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    cp, ns = scene.ops.cp, scene.ns
    kubeconfig = _tenant(cp, ns)
    common = ["--kubeconfig", str(kubeconfig), "--config", str(scene.config)]
    code, out, err = scene.cli(capsys, "gangs", *common, "-n", ns, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [g["id"] for g in doc["running"]] == [f"{ns}/borrow", f"{ns}/train"]
    assert [g["id"] for g in doc["pending"]] == [f"{ns}/wide"]
    code, out, err = scene.cli(capsys, "queues", *common, "-n", ns, "-o", "json")
    assert code == 0, err
    queues = {q["name"]: q for q in json.loads(out)["queues"]}
    # Only the queues that admit this namespace: the tenant's own and the scene's.
    assert set(queues) == {scene.queue, scene.other, scene.ops.name("org"),
                           scene.ops.tenant.queue}
    pool = scene.ops.tenant.pool
    a = next(p for p in queues[scene.queue]["pools"] if p["pool"] == pool)
    b = next(p for p in queues[scene.other]["pools"] if p["pool"] == pool)
    assert (a["allocated"], a["nominal"], a["lent"]) == (8, 16, 4)
    assert (b["allocated"], b["nominal"], b["borrowed"]) == (12, 8, 4)
    # No nodes for a tenant (it may not list them), and no other namespace.
    code, out, err = scene.cli(capsys, "top", *common, "-n", ns, "-o", "json")
    assert code == 0 and json.loads(out)["nodes"] is None
    code, _, err = scene.cli(capsys, "gangs", *common)
    assert code == 1 and "pass -n NAMESPACE" in err


def _tenant(cp: ControlPlane, ns: str) -> Path:
    """A ServiceAccount with deploy/users' RBAC for one namespace: gang-scheduler-tenant bound
    in *ns* only, and gang-scheduler-queue-viewer (every authenticated user may read Queues)."""
    users = REPO / "deploy" / "users"
    objects = [yaml.safe_load((users / f).read_text())
               for f in ("queue-viewer.yaml", "queue-viewer-binding.yaml", "tenant.yaml")]
    objects.append({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-gangs", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "gang-scheduler-tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": ns}]})
    from kubernetes import utils

    kubeconfig = cp.service_account_kubeconfig(ns, "alice")
    for obj in objects:
        try:
            utils.create_from_dict(cp.api, obj)
        except utils.FailToCreateError as exc:  # the cluster-scoped ones: once per session
            if not all(getattr(e, "status", 0) == 409 for e in exc.api_exceptions):
                raise
    return kubeconfig


def test_top_and_the_state_endpoint_show_the_schedulers_own_view(
        scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{scene.port}"
    with urllib.request.urlopen(f"{url}/api/v1/state?namespace={scene.ns}", timeout=10) as r:
        state = json.loads(r.read())
    assert state["source"] == "scheduler"
    mine = [n for n in state["nodes"] if n["pool"] == scene.ops.tenant.pool]
    assert len(mine) == 3 and sum(n["free"] for n in mine) == 4  # 20 of 24 GPUs allocated
    assert sum(n["borrowed"] for n in mine) == 4
    assert [n["free"] for n in mine if n["stranded"]] == [2, 2]  # no 8-GPU pod fits there
    code, out, err = scene.cli(capsys, "top", "--scheduler", url, "-n", scene.ns,
                               "--iterations", "1")
    assert code == 0, err
    for text in ("Queues", "Pending gangs", "Running gangs", "Nodes", f"{scene.ns}/wide",
                 "0:" + scene.ops.tenant.pool):
        assert text in out, text


def test_the_apiserver_view_marks_nodes_as_the_schedulers_own(
        scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: read through the apiserver, no GPU was ever borrowed or stranded. Both
    sources mark nodes by one rule now, so an admin's ``top`` shows the scheduler's grid."""
    admin = str(scene.ops.cp.kubeconfig)
    code, out, err = scene.cli(capsys, "top", "--kubeconfig", admin, "--config",
                               str(scene.config), "-n", scene.ns, "-o", "json")
    assert code == 0, err
    read = [n for n in json.loads(out)["nodes"] if n["pool"] == scene.ops.tenant.pool]
    url = f"http://127.0.0.1:{scene.port}/api/v1/state?namespace={scene.ns}"
    with urllib.request.urlopen(url, timeout=10) as r:
        own = [n for n in json.loads(r.read())["nodes"] if n["pool"] == scene.ops.tenant.pool]
    assert read == own, (read, own)
    assert sum(n["borrowed"] for n in read) == 4
    assert [n["free"] for n in read if n["stranded"]] == [2, 2]


#: What the test reads of the rendered dashboard, in one script run inside the page
#: (``tests.e2e.browser``: the page reloads itself; 5 element-by-element reads in a row went
#: stale in the flake check).
SNAPSHOT = """
const [queue, other, wide, train, pool, crash] = arguments;
const text = (sel) => { const e = document.querySelector(sel); return e ? e.innerText : null; };
return {
  title: document.title,
  body: document.body.innerText,
  queue: text(`tr[data-queue='${queue}']`),
  other: text(`tr[data-queue='${other}']`),
  swatches: [queue, other].map((q) => {
    const e = document.querySelector(`tr[data-queue='${q}'] .swatch`);
    return e ? getComputedStyle(e).backgroundColor : null; }),
  wide: Array.from(document.querySelectorAll(`#pending tr[data-gang='${wide}'] td`),
                   (c) => c.innerText.trim()),
  train: text(`#running tr[data-gang='${train}']`),
  crash: text(`#failed tr[data-gang='${crash}']`),
  crashDetail: text(`#failures [data-gang='${crash}']`),
  nodes: Array.from(document.querySelectorAll("[data-node]"))
    .filter((n) => (n.getAttribute("data-node") || "").startsWith(pool))
    .map((n) => Array.from(n.querySelectorAll(".cell"), (c) => c.className)),
  forms: document.getElementsByTagName("form").length,
  scripts: document.getElementsByTagName("script").length,
  buttons: document.getElementsByTagName("button").length,
};
"""


def test_the_dashboard_in_headless_chromium(scene: Scene) -> None:
    with chromium() as driver:
        page = read_page(driver, f"http://127.0.0.1:{scene.port}/dashboard?namespace={scene.ns}",
                         SNAPSHOT, scene.queue, scene.other, f"{scene.ns}/wide",
                         f"{scene.ns}/train", scene.ops.tenant.pool, f"{scene.ns}/crash")
        assert page["title"] == "gang-scheduler"
        body = page["body"]
        for heading in ("Queues", "Pending gangs", "Running gangs", "Failed gangs",
                        "Last failures", "GPUs by pool", "Recent preemptions and reservations"):
            assert heading in body, heading
        assert "8 / 16" in page["queue"] and "lent 4" in page["queue"]  # in use / nominal
        assert "12 / 8" in page["other"] and "borrowed 4" in page["other"]
        # Each queue its own colour (issue 32: a hash of the name could give two the same).
        assert None not in page["swatches"] and len(set(page["swatches"])) == 2, page
        cells = page["wide"]
        assert cells[0] == "1" and cells[1] == "1" and cells[4] == "16", cells
        assert cells[5] in ("Quota", "Placement", "Reserved") and cells[7], cells
        assert "rank 0: " + scene.ops.tenant.pool in page["train"]
        assert "rank 1: " + scene.ops.tenant.pool in page["train"]
        # The pod that exited 3: its last failure in the failed gangs, in full below.
        assert "rank 0: exit 3 " in (page["crash"] or ""), page["crash"]
        assert "exit code 3 (Error) in container main" in (page["crashDetail"] or ""), page
        # The occupancy grid: one cell per GPU of the tenant's three nodes, 20 of them allocated
        # (4 on borrowed quota), the 4 left stranded.
        assert len(page["nodes"]) == 3
        kinds = [kind for node in page["nodes"] for kind in node]
        assert len(kinds) == 24
        assert sum("used" in k for k in kinds) == 20 and sum("borrowed" in k for k in kinds) == 4
        assert sum("stranded" in k for k in kinds) == 4
        assert "stranded: no waiting gang fits" in body  # the legend says what that means
        # Read-only: nothing to click that changes anything, no script of its own.
        assert (page["forms"], page["scripts"], page["buttons"]) == (0, 0, 0)
        screenshot(driver, "dashboard.png")
