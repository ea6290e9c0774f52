"""A TCP proxy between the scheduler and the apiserver that can cut every connection at once.

Why: a watch stream cut mid-event (a load balancer's idle timeout, a network blip, an
apiserver replica going away) is a fault the apiserver itself cannot be asked to make. TLS
passes through untouched (the apiserver's certificate names 127.0.0.1, which the proxy shares),
so the scheduler talks to the real apiserver, only over a line the test can break.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class CuttableProxy:
    """Forwards 127.0.0.1:``port`` to *target*; ``cut()`` resets every open connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = threading.Event()
        self.cuts = 0
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                downstream.close()  # the apiserver is down: so is the line
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {downstream, upstream}
            for a, b in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            self._drop(src, dst)

    def _drop(self, *socks: socket.socket) -> None:
        for s in socks:
            with self._lock:
                self._open.discard(s)
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def cut(self) -> int:
        """Reset every connection open now (watches included); how many were cut."""
        with self._lock:
            socks = list(self._open)
        for s in socks:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._drop(*socks)
        self.cuts += 1
        return len(socks) // 2

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        self.cut()
