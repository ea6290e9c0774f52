"""What the initial pod list costs, by encoding: the apiserver serving every pod as JSON (what
gang-scheduler reads) and as protobuf (what kube-scheduler's client asks for), and our
decoding of the JSON.

Why: on a busy cluster gang-scheduler's start-up is mostly its first pod list
(``scheduler.kube.read.informer.list_all``), and ``bench_first_bind.py`` shows that our own
work on it (decoding, converting, the first cycle) is a small part when the objects are
small. Real pods carry ``managedFields`` and a status, and the apiserver encodes each of them
per list. This script asks a running dev cluster for the whole pod list from its watch cache
(``resourceVersion=0``, as the informer's first list does), once per encoding per round,
alternating, and prints the bytes, the wall seconds, the kube-apiserver's CPU seconds over
the request (from ``/proc``: other clients' requests count too, so read the rounds side by
side) and, for JSON, the CPU seconds of our decoding (``scheduler.kube.client.decode``), of
the list and of the list without ``managedFields``, each with the cyclic collector paused, as
the live scheduler's first lists are decoded (``scheduler.run.memory``), and the MiB of Python
objects the decoded list holds, with and without ``managedFields`` (``tracemalloc``):

    .venv/bin/python benchmarks/bench_list_encoding.py --state-dir DIR --rounds 3

DIR is a dev cluster's state directory (``gang-scheduler dev-cluster up --state-dir DIR``;
``bench_fair.py`` prints its own). It asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import urllib3
from bench_kwok import cluster_pids
from bench_scheduler_setup import cpu_seconds

from scheduler.kube.client import decode
from scheduler.kube.read.informer import unmanaged
from scheduler.tools.devcluster.cluster import DevCluster

JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", type=Path, required=True,
                        help="a running dev cluster's state directory (with state.json, pki/)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="lists per encoding, alternating (default 3)")
    args = parser.parse_args(argv)
    state_file = args.state_dir / "state.json"
    if not state_file.is_file():
        parser.error(f"--state-dir: {state_file} does not exist (is the dev cluster up?)")
    cluster = DevCluster(args.state_dir)
    pid = cluster_pids(cluster).get("kube-apiserver")
    if pid is None:
        parser.error(f"--state-dir: {args.state_dir} has no live kube-apiserver")
    assert cluster.state is not None
    pki = args.state_dir / "pki"
    http = urllib3.PoolManager(ca_certs=str(pki / "ca.crt"), cert_file=str(pki / "admin.crt"),
                               key_file=str(pki / "admin.key"))
    url = f"{cluster.state.server}/api/v1/pods?resourceVersion=0"
    for rnd in range(1, args.rounds + 1):
        for accept in (JSON, PROTOBUF):
            cpu, wall = cpu_seconds(pid), time.monotonic()
            resp = http.request("GET", url, headers={"Accept": accept,
                                                     "User-Agent": "bench-list-encoding"},
                                timeout=urllib3.Timeout(connect=5, read=300))
            wall, cpu = time.monotonic() - wall, cpu_seconds(pid) - cpu
            if resp.status != 200:
                raise SystemExit(f"GET {url} ({accept}): HTTP {resp.status}")
            said = (f"round {rnd} {accept.rsplit('/', 1)[-1]:<24} {len(resp.data) / 1e6:6.1f} MB, "
                    f"wall {wall:5.2f}s, apiserver CPU {cpu:5.2f}s")
            if accept == JSON:
                pods, ours = decoding(decode, resp.data)
                _, slim = decoding(decode, without_managed_fields(resp.data))
                full, kept = held_mib(resp.data)
                said += (f", {pods} pods ({len(resp.data) / max(pods, 1) / 1e3:.1f} kB each), "
                         f"our decode {ours:.2f}s CPU (without managedFields {slim:.2f}s), "
                         f"decoded objects {full:.0f} MiB ({kept:.0f} MiB kept)")
            print(f"{said}; load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


def decoding(decoder: Callable[[bytes], Any], body: bytes) -> tuple[int, float]:
    """The pods in a JSON list and the CPU seconds *decoder* took, with the cyclic collector
    paused, as the scheduler's first lists are decoded (``scheduler.run.memory``)."""
    gc.disable()
    try:
        started = time.process_time()
        pods = len(decoder(body)["items"])
        return pods, time.process_time() - started
    finally:
        gc.enable()


def held_mib(body: bytes) -> tuple[float, float]:
    """MiB of Python objects the decoded list holds (``tracemalloc``), and what is left once
    the informer has dropped each object's ``managedFields`` (``informer.unmanaged``)."""
    tracemalloc.start()
    try:
        listed = decode(body)
        full = tracemalloc.get_traced_memory()[0]
        for item in listed.get("items") or ():
            unmanaged(item)
        return full / 2**20, tracemalloc.get_traced_memory()[0] / 2**20
    finally:
        tracemalloc.stop()


def without_managed_fields(body: bytes) -> bytes:
    """The list with every object's ``metadata.managedFields`` left out: what a decoder that
    skips them would have to read (client-go drops them after decoding)."""
    listed = decode(body)
    for item in listed.get("items") or ():
        unmanaged(item)
    return json.dumps(listed).encode()


if __name__ == "__main__":
    sys.exit(main())
