"""The dev cluster's agent process: the fake kubelet of every fake node.

Why a separate process: the cluster must keep working after `gang-scheduler dev-cluster up`
returns, and a test process's GIL should not slow the "nodes" down. Run as
``python -m scheduler.devcluster.agent --kubeconfig FILE --ready-file FILE``; it touches the
ready file once its first lists are done, so `up` can wait for it.

Everything a controller does (``default`` ServiceAccounts, Jobs, garbage collection, ...) is
the real kube-controller-manager's work (``controllers.py``); this process only stands in for
the kubelets.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from scheduler.devcluster import kubeconfig, kubelet, rest

log = logging.getLogger("devcluster.agent")
WATCH_TIMEOUT_S = 60
Handler = Callable[[str, dict[str, Any]], None]


def watch_forever(list_fn: Callable[..., Any], handle: Handler, synced: threading.Event,
                  **selectors: str) -> None:
    """List then watch `list_fn` for ever, handing (event type, object dict) to `handle`.

    Plain JSON instead of client models: models are slow and strict, and this process only
    reads a few fields. On 410 Gone (or any error) it re-lists, which the handlers tolerate
    because they act on state, not on event types.
    """
    while True:
        try:
            listing = rest.call(list_fn, **selectors)
            for item in listing.get("items") or []:
                handle("ADDED", item)
            synced.set()
            version = listing["metadata"]["resourceVersion"]
            while True:
                reply = list_fn(_preload_content=False, watch=True, resource_version=version,
                                allow_watch_bookmarks=True, timeout_seconds=WATCH_TIMEOUT_S,
                                **selectors)
                for line in _lines(reply):
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        raise client.ApiException(status=event["object"].get("code", 500),
                                                  reason=event["object"].get("message", ""))
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        handle(event["type"], event["object"])
        except Exception as exc:  # keep the node alive whatever the API does
            log.warning("watch %s: %s; re-listing", list_fn.__name__, exc)
            time.sleep(1.0)


def _lines(reply: Any) -> Any:
    """Split a streamed HTTP body into complete lines (watch events are newline-delimited)."""
    buffer = b""
    try:
        for chunk in reply.stream(4096, decode_content=False):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield line
    finally:
        reply.release_conn()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    api = kubeconfig.api_client(args.kubeconfig)
    core = client.CoreV1Api(api)
    fake = kubelet.FakeKubelet(kubeconfig.api_client(args.kubeconfig))
    watches: list[tuple[Callable[..., Any], Handler, dict[str, str]]] = [
        (core.list_node, fake.handle_node, {"label_selector": f"{kubelet.FAKE_NODE_LABEL}=true"}),
        (core.list_pod_for_all_namespaces, fake.handle_pod, {"field_selector": "spec.nodeName!="}),
    ]
    synced = []
    for list_fn, handle, selectors in watches:
        event = threading.Event()
        synced.append(event)
        threading.Thread(target=watch_forever, args=(list_fn, handle, event), kwargs=selectors,
                         daemon=True, name=list_fn.__name__).start()
    for event in synced:
        event.wait()
    if args.ready_file:
        args.ready_file.write_text("ready\n")
    log.info("agent ready: fake kubelet running")
    while True:
        fake.run_once()


if __name__ == "__main__":
    sys.exit(main())
