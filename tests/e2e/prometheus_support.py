"""A real Prometheus (Debian's ``prometheus`` package) on loopback for the e2e tests: it scrapes
the given targets every second and evaluates the shipped rules
(deploy/monitoring/prometheusrule.yaml) every second."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from scheduler.tools.devcluster import procs
from tests.e2e.test_deploy_support import stop_process

RULES = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "prometheusrule.yaml"


class Prometheus:
    """A Prometheus process scraping *targets* (job name -> port on loopback, or -> (port,
    target labels): labels a service discovery would add, such as the exporter pod's own
    ``namespace`` and ``pod``) and evaluating the shipped rules; on *port* (default: a free
    one)."""

    def __init__(self, workdir: Path, targets: Mapping[str, int | tuple[int, Mapping[str, str]]],
                 port: int | None = None) -> None:
        spec = yaml.safe_load(RULES.read_text())["spec"]  # a PrometheusRule's spec is a rule file
        (workdir / "rules.yaml").write_text(yaml.safe_dump(spec))
        scrapes = []
        for job, target in targets.items():
            target_port, labels = target if isinstance(target, tuple) else (target, {})
            static: dict[str, Any] = {"targets": [f"127.0.0.1:{target_port}"]}
            if labels:
                static["labels"] = dict(labels)
            scrapes.append({"job_name": job, "static_configs": [static]})
        (workdir / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(workdir / "rules.yaml")],
            "scrape_configs": scrapes}))
        self.port = port or procs.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                ["prometheus", f"--config.file={workdir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=out, stderr=subprocess.STDOUT)

    def api(self, path: str, **params: str) -> Any:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited {self.proc.returncode}:\n"
                                 f"{self.log.read_text()[-3000:]}")
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return json.loads(resp.read())["data"]
        except OSError:
            return None  # not listening yet

    def query(self, expr: str) -> dict[str, float]:
        """Instant query: the value of each series, keyed by its labels as ``k=v,...``."""
        data = self.api("query", query=expr) or {"result": []}
        return {",".join(f"{k}={v}" for k, v in sorted(r["metric"].items())
                         if k != "__name__"): float(r["value"][1]) for r in data["result"]}

    def alerts(self) -> list[dict[str, str]]:
        """The labels of every active alert (pending or firing)."""
        data = self.api("alerts") or {"alerts": []}
        return [a["labels"] for a in data["alerts"]]

    def stop(self) -> None:
        stop_process(self.proc)
