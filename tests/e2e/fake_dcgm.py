"""A stand-in for NVIDIA dcgm-exporter: ``/metrics`` on loopback in the exporter's text format.

What the real exporter with its Kubernetes pod mapping serves: per GPU a
``DCGM_FI_DEV_GPU_UTIL`` (percent) and a ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio) series,
labelled ``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname`` and, for a GPU a pod holds,
``container``, ``namespace`` and ``pod``; a GPU no pod holds has no pod labels. The test sets
each GPU's utilisation, and may change it while Prometheus scrapes.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True, slots=True)
class Gpu:
    node: str
    index: int
    namespace: str = ""  # "" with pod "": a GPU no pod holds
    pod: str = ""
    container: str = "main"

    @property
    def uuid(self) -> str:
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{self.node}/{self.index}')}"


class FakeDcgm:
    """``FakeDcgm().set(gpu, percent)``; scraped at ``http://127.0.0.1:{port}/metrics``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[Gpu, float] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = fake.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="fake-dcgm",
                                        daemon=True)
        self._thread.start()

    def set(self, gpu: Gpu, percent: float) -> None:
        with self._lock:
            self._values[gpu] = percent

    def text(self) -> str:
        with self._lock:
            values = sorted(self._values.items(), key=lambda kv: (kv[0].node, kv[0].index))
        lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
                 "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
        lines += [f"DCGM_FI_DEV_GPU_UTIL{{{_labels(g)}}} {round(v)}" for g, v in values]
        lines += ["# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is "
                  "active.", "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
        lines += [f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{_labels(g)}}} {v / 100:.6f}"
                  for g, v in values]
        return "\n".join(lines) + "\n"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _labels(g: Gpu) -> str:
    labels = [("gpu", str(g.index)), ("UUID", g.uuid), ("device", f"nvidia{g.index}"),
              ("modelName", MODEL), ("Hostname", g.node)]
    if g.pod:
        labels += [("container", g.container), ("namespace", g.namespace), ("pod", g.pod)]
    return ",".join(f'{k}="{v}"' for k, v in labels)
