"""The shipped alert and recording rules (deploy/monitoring/prometheusrule.yaml) evaluated by a
real Prometheus (Debian's ``prometheus`` package) scraping a live scheduler on the dev cluster.

What a unit test cannot show: that every expression parses and evaluates on the series the
scheduler really exports (a rule Prometheus cannot evaluate has health ``err``), that the
chargeback recordings give the GPU-hours and the cost at the configured price, and that the
alerts meant for this situation (a gang that cannot be placed, GPUs no waiting gang can use)
become active. Prometheus runs on loopback with a 1 s scrape and evaluation interval.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.run.config import PricingConfig
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import POOL_LABEL
from tests.e2e.ops_support import Ops, ops_for
from tests.e2e.prometheus_support import RULES, Prometheus

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("prometheus") is None,
                                 reason="prometheus not installed (.ci/run installs it)")]

PRICE = 3.6  # EUR per GPU-hour of the tenant's pool


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def test_rules_evaluate_on_a_live_scheduler(ops: Ops, tmp_path: Path) -> None:
    pool = ops.tenant.pool
    ops.tenant.create_nodes(2, gpus=8)
    # A pool no gang of this test may use (its pods select the tenant's pool): idle, and
    # never stranded, however long the tenant's gang waits.
    idle_pool = f"{pool}-idle"
    ops.cp.create_node(f"{idle_pool}-n0", gpus=8, labels={POOL_LABEL: idle_pool})
    queue = ops.queue("q", gpus=24)  # quota for both gangs: only placement keeps one waiting
    runner = ops.start_scheduler(metrics_port=True, pricing=PricingConfig(
        currency="EUR", gpu_hour={pool: PRICE}))
    # A 4-GPU gang runs; a gang of two 8-GPU pods cannot be placed (only one node has 8
    # free), and the 4 GPUs left free beside the first gang fit no waiting pod: stranded.
    running = ops.gang("small", 1, 4, queue)
    wait_for(lambda: ops.tenant.all_bound(running), 30, what="the 4-GPU gang bound")
    ops.gang("wide", 2, 8, queue)
    prom = Prometheus(tmp_path, {"gang-scheduler": runner.metrics_port})  # type: ignore[attr-defined]
    try:
        def evaluated() -> list[dict[str, Any]]:
            data = prom.api("rules") or {"groups": []}
            rules = [r for g in data["groups"] for r in g["rules"]]
            done = all(r.get("lastEvaluation", "").startswith("2") for r in rules)
            return rules if done else []

        rules = wait_for(evaluated, 90, 1.0, what="every shipped rule evaluated")
        assert [r["name"] for r in rules if r["health"] != "ok"] == [], \
            [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
        shipped = [r for g in yaml.safe_load(RULES.read_text())["spec"]["groups"]
                   for r in g["rules"]]
        assert len(rules) == len(shipped)

        # The leader's view of the pool: 12 GPUs free, 4 of them stranded, none reserved.
        def pool_gauges() -> tuple[float, ...]:
            got = tuple(prom.query(f'pool:gang_scheduler_{name}:leader{{pool="{pool}"}}')
                        .get(f"pool={pool}", -1.0)
                        for name in ("idle_gpus", "stranded_gpus", "reserved_idle_gpus"))
            return got if got == (12.0, 4.0, 0.0) else ()

        assert wait_for(pool_gauges, 60, 1.0, what="idle, stranded, reserved-idle: 12, 4, 0")

        def idle_gauges() -> tuple[float, ...]:
            got = tuple(prom.query(f'pool:gang_scheduler_{name}:leader{{pool="{idle_pool}"}}')
                        .get(f"pool={idle_pool}", -1.0) for name in ("idle_gpus", "stranded_gpus"))
            return got if got == (8.0, 0.0) else ()

        assert wait_for(idle_gauges, 60, 1.0, what="the idle pool: 8 GPUs idle, 0 stranded")
        # Its own rule, evaluated on its own schedule: wait for it to catch up too.
        in_use = wait_for(lambda: q if (q := prom.query(
            f'pool:gang_scheduler_gpus_in_use:ratio{{pool="{pool}"}}')) == {
                f"pool={pool}": 0.25} else {}, 60, 1.0, what="gpus_in_use ratio 0.25")
        assert in_use == {f"pool={pool}": 0.25}

        # Chargeback: GPU-hours of the running gang's queue and their cost at the price.
        where = f'queue="{queue}",namespace="{ops.ns}",pool="{pool}"'

        def charged() -> tuple[float, float] | tuple[()]:
            hours = prom.query("queue_namespace_pool:gang_scheduler_allocated_gpu_hours:"
                               f"increase1h{{{where}}}")
            cost = prom.query(f"queue_namespace_pool:gang_scheduler_gpu_cost:increase1h{{{where}}}")
            h, c = sum(hours.values()), sum(cost.values())
            return (h, c) if h * 3600 >= 40 and c > 0 else ()  # 10 s of 4 GPUs, at least

        recorded = wait_for(charged, 90, 1.0, what="GPU-hours and cost recorded")
        assert len(recorded) == 2
        hours, cost = recorded
        assert math.isclose(cost / hours, PRICE, rel_tol=0.1), (hours, cost)
        assert set(prom.query(f"queue_namespace_pool:gang_scheduler_gpu_cost:increase1h"
                              f"{{{where}}}")) == {f"currency=EUR,namespace={ops.ns},"
                                                   f"pool={pool},queue={queue}"}
        gpus = prom.query(f"queue_namespace_pool:gang_scheduler_allocated_gpus:rate5m{{{where}}}")
        assert 0 < sum(gpus.values()) <= 4.5, gpus  # 4 GPUs allocated (rate over few samples)

        # The alerts for this situation are active (pending: their `for` has not run out);
        # the leader alerts are not.
        def active() -> list[dict[str, str]]:
            labels = prom.alerts()
            mine = [a for a in labels if a.get("queue") == queue or a.get("pool") == pool]
            names = {a["alertname"] for a in mine}
            wanted = {"GangSchedulerGangsPendingTooLong", "GangSchedulerStrandedGpus"}
            return labels if wanted <= names else []

        # Only for the pool the waiting gang could use: not for the idle pool beside it, nor
        # for the other tests' pools the scheduler sees (issue 32: each was "stranded").
        labels = wait_for(active, 60, 1.0, what="pending-too-long and stranded alerts active")
        pending = [a for a in labels if a["alertname"] == "GangSchedulerGangsPendingTooLong"]
        assert [(a["queue"], a["reason"]) for a in pending] == [(queue, "Placement")]
        assert [a["pool"] for a in labels if a["alertname"] == "GangSchedulerStrandedGpus"
                ] == [pool]
        alerts = {a["alertname"] for a in labels}
        assert not {"GangSchedulerNoLeader", "GangSchedulerMultipleLeaders"} & set(alerts)
    finally:
        prom.stop()
