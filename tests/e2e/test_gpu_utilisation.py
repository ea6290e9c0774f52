"""GPU utilisation joined with gangs, end to end: a fake dcgm-exporter, a real Prometheus
(Debian's ``prometheus``) scraping it and the scheduler, and the scheduler reading the
utilisation back from that Prometheus (``gpuMetrics``).

A real Indexed Job of 4 pods (1 GPU each) runs on kwok nodes; the exporter reports rank 2 at
0% and rank 3 at 40% while the others work at 95%. The exporter is scraped as a service
discovery would see it (its own pod's ``namespace`` and ``pod`` as target labels), so
Prometheus renames the exporter's pod labels to ``exported_*``, as it does in a cluster
without ``honorLabels``. What a unit test cannot show: that the query, the label mapping and
the windowed mean work on what a real Prometheus answers, that the gauges and the idle
GPU-seconds reach Prometheus, and that the shipped alerts on them evaluate and become active;
and where users look: the chargeback read back from Prometheus, ``top``, ``explain`` (which
queries Prometheus itself) and the dashboard's rank view in headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from scheduler.cli.main import main
from scheduler.run.config import GpuMetricsConfig
from scheduler.run.serve import Health, serve
from scheduler.tools.devcluster import procs
from scheduler.views.state import GangRow
from tests.cli_logging import quiet_cli_logging
from tests.e2e.browser import chromium, read_page, screenshot
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.fake_dcgm import FakeDcgm, Gpu
from tests.e2e.ops_support import Ops, ops_for
from tests.e2e.prometheus_support import Prometheus
from tests.e2e.test_deploy_support import CLI

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("prometheus") is None,
                                 reason="prometheus not installed (.ci/run installs it)")]

RANK_LABEL = "batch.kubernetes.io/job-completion-index"
UTILISATION = {"0": 95.0, "1": 95.0, "2": 0.0, "3": 40.0}  # percent, by rank


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


@pytest.fixture(autouse=True)
def _cli_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``top`` and ``chargeback`` run in-process: their logging set-up must not outlive the
    test (``tests.cli_logging``; without it every later test that checks a log line failed)."""
    yield from quiet_cli_logging(monkeypatch)


def test_idle_and_straggler_ranks_reach_the_views_metrics_and_alerts(
        ops: Ops, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ops.tenant.create_nodes(2, gpus=8)  # the tenant's own queue has quota in their pool
    exporter = FakeDcgm()
    prom_port = procs.free_port()
    runner = ops.start_scheduler(metrics_port=True, gpu_metrics=GpuMetricsConfig(
        prometheus=f"http://127.0.0.1:{prom_port}", window=5, interval=1))
    prom = Prometheus(tmp_path, {
        "gang-scheduler": runner.metrics_port,  # type: ignore[attr-defined]
        "dcgm-exporter": (exporter.port, {"namespace": "gpu-operator",
                                          "pod": "nvidia-dcgm-exporter-x7k2p"})},
        port=prom_port)
    try:
        job = "ddp"
        ops.tenant.create_job(job, parallelism=4, gpus=1, completionMode="Indexed")

        def bound() -> dict[str, tuple[str, str]]:
            pods = ops.tenant.job_pods(job)
            placed = {p["metadata"]["labels"][RANK_LABEL]: (name, p["spec"].get("nodeName", ""))
                      for name, p in pods.items()}
            return placed if len(placed) == 4 and all(n for _, n in placed.values()) else {}

        ranks = wait_for(bound, 60, 0.2, what="the Job's 4 ranks bound")
        per_node: dict[str, int] = {}
        for rank, (pod, node) in sorted(ranks.items()):
            exporter.set(Gpu(node, per_node.get(node, 0), ops.ns, pod), UTILISATION[rank])
            per_node[node] = per_node.get(node, 0) + 1
        # A GPU no pod holds: node-level, never joined.
        exporter.set(Gpu(next(iter(per_node)), 7), 0.0)

        # The live view (what /api/v1/state serves): rank 2 idle, rank 3 a straggler.
        def row() -> GangRow | None:
            view = runner.live.view()
            found = [g for g in view.running if g.workload == f"Job/{job}"] if view else []
            if not found or found[0].use is None:
                return None
            flags = {r.rank: r.flag for r in found[0].use.ranks}
            return found[0] if flags == {"0": "", "1": "", "2": "idle", "3": "straggler"} \
                else None

        gang = wait_for(row, 60, 0.5, what="rank 2 idle and rank 3 a straggler in the view")
        assert gang is not None and gang.use is not None
        assert gang.use.idle_gpus == 1 and gang.use.allocated == 4
        assert gang.use.summary.startswith("1 of 4 GPUs idle (rank 2); rank 3 lags: 40%")
        view = runner.live.view()
        assert view is not None
        assert {q.name: q.idle_gpus for q in view.queues if q.name == gang.queue} == {
            gang.queue: 1}

        # The gauges, as Prometheus scraped them from the scheduler.
        name = gang.id.partition("/")[2]
        where = f'queue="{gang.queue}",namespace="{ops.ns}",gang="{name}"'

        def gauges() -> tuple[float, ...]:
            got = tuple(sum(prom.query(f"gang_scheduler_gang_{g}{{{where}}}").values())
                        for g in ("idle_gpus", "straggler_ranks", "missing_ranks"))
            idle = sum(prom.query("gang_scheduler_idle_allocated_gpus"
                                  f'{{queue="{gang.queue}",namespace="{ops.ns}"}}').values())
            age = prom.query("gang_scheduler_gpu_metrics_age_seconds")
            fresh = bool(age) and all(0 <= v < 30 for v in age.values())
            return (*got, idle) if got == (1.0, 1.0, 0.0) and idle == 1.0 and fresh else ()

        assert wait_for(gauges, 60, 1.0, what="gang gauges 1 idle, 1 straggler, 0 missing")
        # The chargeback charges the idle GPU (Accrual.set_idle): idle GPU-seconds grow.
        charged = wait_for(lambda: sum(prom.query(
            f'gang_scheduler_idle_gpu_seconds_total{{queue="{gang.queue}",'
            f'namespace="{ops.ns}"}}').values()), 60, 1.0, what="idle GPU-seconds charged")
        assert charged > 0

        # The shipped alerts on them are active (pending: their `for` has not run out).
        def active() -> set[str]:
            mine = {a["alertname"] for a in prom.alerts() if a.get("gang") == name
                    and a.get("namespace") == ops.ns and a.get("queue") == gang.queue}
            wanted = {"GangSchedulerGangGpusIdle", "GangSchedulerStragglerRank"}
            return mine if wanted <= mine else set()

        alerts = wait_for(active, 60, 1.0, what="idle-GPU and straggler alerts active")
        assert "GangSchedulerMissingRanks" not in alerts
        assert not any(a["alertname"] == "GangSchedulerGpuMetricsStale" for a in prom.alerts())
        assert not [r["name"] for g in (prom.api("rules") or {"groups": []})["groups"]
                    for r in g["rules"] if r["health"] == "err"]

        # The chargeback from Prometheus' durable history: today's row for the tenant has
        # allocated and idle GPU-hours, idle part of allocated (used = the difference).
        # ``increase()`` needs two samples of a counter in its window, and on a loaded machine a
        # 1 s scrape can time out: the row may come a scrape or two after the counters do.
        def billed() -> list[dict[str, Any]]:
            capsys.readouterr()
            assert main(["chargeback", "--prometheus", f"http://127.0.0.1:{prom_port}",
                         "-o", "json"]) == 0
            rows = [r for r in json.loads(capsys.readouterr().out) if r["namespace"] == ops.ns]
            return rows if rows and all(r["idle_gpu_hours"] for r in rows) else []

        bill = wait_for(billed, 60, 1.0,
                        what=f"today's chargeback row for {ops.ns} with idle GPU-hours")
        assert len(bill) == 1 and bill[0]["queue"] == gang.queue, bill
        assert 0 < bill[0]["idle_gpu_hours"] < bill[0]["allocated_gpu_hours"], bill
        assert bill[0]["used_gpu_hours"] == pytest.approx(
            bill[0]["allocated_gpu_hours"] - bill[0]["idle_gpu_hours"])

        # Where users look: top (the scheduler's own view), explain (which reads Prometheus
        # itself) and the dashboard in a real browser.
        server = serve(CollectorRegistry(), Health(), "127.0.0.1", 0, view=runner.live.view)
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}"
            capsys.readouterr()
            monkeypatch.setenv("COLUMNS", "220")  # rich wraps the ranks cell at 80 columns
            assert main(["top", "--scheduler", url, "-n", ops.ns, "--iterations", "1"]) == 0
            out = capsys.readouterr().out
            node2, node3 = ranks["2"][1], ranks["3"][1]
            assert "GPU use" in out and "idle GPUs" in out
            assert f"2:{node2}[idle]" in out and f"3:{node3}[straggler]" in out
            assert "1 of 4 GPUs idle (rank 2); rank 3 lags: 40%" in out
            said = explain(ops, f"{ops.ns}/{job}", tmp_path, f"http://127.0.0.1:{prom_port}")
            use = said.split("GPU use", 1)[1]
            # The mean of 95, 95, 0 and 40% over explain's own window (the default 5m: only
            # the URL is given), however Prometheus rounds them.
            assert re.match(r"\s*5\d% mean over the last 5m: 1 of 4 GPUs idle \(rank 2\); "
                            r"rank 3 lags: 40% vs median 95%", use), said
            lines = {ln.split()[1]: ln for ln in use.splitlines()[1:] if ln.startswith("    rank")}
            assert lines["2"].endswith("0%  idle") and "lags the gang's median" in lines["3"]
            assert lines["0"].rstrip().endswith("95%") and lines["1"].rstrip().endswith("95%")
            with chromium() as driver:
                page = read_page(driver, f"{url}/dashboard?namespace={ops.ns}", RANK_VIEW,
                                 gang.id)
                assert page["running"] and re.search(r"5\d%, 1 idle", page["running"]), page
                assert page["ranks"] == [["0", "rank", "rank 0: 95%"],
                                         ["1", "rank", "rank 1: 95%"],
                                         ["2", "rank idle", "rank 2: 0%, idle"],
                                         ["3", "rank straggler",
                                          "rank 3: 40%, lags the gang"]], page
                assert page["heights"][2] == 0 and page["heights"][3] < page["heights"][0]
                assert "1 of 4 GPUs idle (rank 2)" in page["words"]
                screenshot(driver, "dashboard-gpu-use.png")
        finally:
            server.shutdown()
    finally:
        prom.stop()
        exporter.stop()


def explain(ops: Ops, target: str, tmp: Path, prometheus: str) -> str:
    """``gang-scheduler explain TARGET --gpu-metrics-url ...`` as a user runs it."""
    config = tmp / "explain.yaml"
    config.write_text(f"schedulerName: {ops.tenant.scheduler_name}\n")
    env = {**os.environ, "KUBECONFIG": str(ops.cp.kubeconfig), "HOME": str(tmp)}
    done = subprocess.run([str(CLI), "explain", target, "--config", str(config),
                           "--gpu-metrics-url", prometheus], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text
    return text


#: What the test reads of the dashboard's GPU use, in one script (``tests.e2e.browser``).
RANK_VIEW = """
const [gang] = arguments;
const box = document.querySelector(`#gpu-use [data-gang='${gang}']`);
const row = document.querySelector(`#running tr[data-gang='${gang}']`);
const ranks = box ? Array.from(box.querySelectorAll(".rank")) : [];
return {
  running: row ? row.innerText : null,
  ranks: ranks.map((r) => [r.getAttribute("data-rank"), r.className, r.title]),
  heights: ranks.map((r) => { const b = r.querySelector(".bar");
                              return b ? b.getBoundingClientRect().height : 0; }),
  words: box ? box.innerText : "",
};
"""
