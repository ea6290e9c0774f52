"""Does kwok look at every pod again after a control-plane restart? (A probe, run by hand.)

kwok v0.8.0 drops a stage whose write failed mid-request, so the dev cluster relies on kwok
re-listing pods to replay it (``scheduler/tools/devcluster/README.md``, "kwok drops a write that
fails mid-request"). This starts a dev cluster of its own, runs kwok at DEBUG (it logs every
pod event it handles), starts one pod, restarts *component* and counts kwok's log lines about
that unchanged pod afterwards: one or more means kwok re-listed it::

    .venv/bin/python -m tests.e2e.kwok_relist kube-apiserver
    .venv/bin/python -m tests.e2e.kwok_relist etcd
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kubernetes import client

from scheduler.tools.devcluster import procs, rest, resync, state
from scheduler.tools.devcluster.cluster import DevCluster
from scheduler.world import clusterspec

DEV = Path(__file__).resolve().parents[2] / "scheduler" / "examples" / "clusters" / "dev.yaml"
POD = "relist-probe"


def probe(component: str, workdir: Path, settle_s: float = 15.0) -> list[str]:
    """kwok's log lines about the probe pod after *component* restarted."""
    cluster = DevCluster(workdir, owned=True)
    cluster.up(clusterspec.load(DEV), training_operators=False)
    try:
        st = cluster.state
        assert st is not None
        i, old = next((i, p) for i, p in enumerate(st.processes) if p.name == "kwok")
        procs.kill(old)
        log = Path(old.log).with_suffix(".debug.log")
        st.processes[i] = procs.spawn("kwok", [*old.argv, "--v=DEBUG"], log, True)
        state.save(st)
        core = client.CoreV1Api(cluster.api_client())
        node = rest.call(core.list_node)["items"][0]["metadata"]["name"]
        rest.call(core.create_namespaced_pod, "default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "probe"}]}})
        deadline = time.monotonic() + 120  # the new kwok waits out the old one's node Leases
        while rest.call(core.read_namespaced_pod, POD, "default")["status"].get(
                "phase") != "Running":
            if time.monotonic() > deadline:
                raise SystemExit(f"{POD} never Running; see {log}")
            time.sleep(0.2)
        time.sleep(2)
        mark = log.stat().st_size
        began = time.time()
        cluster.restart(component)
        time.sleep(settle_s)
        lines = log.read_text(encoding="utf-8")[mark:].splitlines()
        about = [json.loads(line) for line in lines if f"default/{POD}" in line]
        return [f"+{(resync.epoch(e['time']) or 0.0) - began:.1f}s {e['msg']} "
                f"({e.get('reason', '')})" for e in about]
    finally:
        cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("component", choices=("kube-apiserver", "etcd"),
                        help="what to restart (SIGKILL and start again, as the rig does)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        seen = probe(args.component, Path(tmp))
    print(f"after restarting {args.component}, kwok handled the unchanged pod "
          f"{len(seen)} time(s): {'re-listed' if seen else 'no re-list'}")
    for line in seen:
        print(f"  {line}")


if __name__ == "__main__":
    main()
