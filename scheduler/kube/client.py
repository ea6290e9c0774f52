"""A thin raw-JSON client over the official ``ApiClient``: the one door to the apiserver.

Why raw: the generated client builds a model object for every reply (thousands per second at
best) and cannot even parse the ``pods/binding`` reply (kubernetes-client/python 547, 825).
Every module in ``scheduler.kube`` therefore speaks JSON dicts through ``KubeClient.request``,
which reuses the official client only for what it does well: reading a kubeconfig or the
in-cluster service account, TLS, token refresh and urllib3 connection pooling.

``KubeClient`` is also the seam tests fake: anything with the same ``request``/``stream``
methods can stand in for the apiserver.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import structlog
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

log = structlog.get_logger()

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

#: (connect, read) seconds for ordinary requests; watches pass their own.
DEFAULT_TIMEOUT: tuple[float, float] = (5.0, 30.0)


#: The methods that change something (what the fence refuses, what a writer retries).
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

_unanswered = threading.local()


def unanswered_writes() -> int:
    """How many writes sent from the calling thread got no answer, or a 429 or 5xx (the
    apiserver or etcd away or overloaded), so far: a writer reads it before and after a task
    to learn whether the task must be tried again (``scheduler.kube.write.writer``)."""
    return getattr(_unanswered, "count", 0)


def _count_unanswered() -> None:
    _unanswered.count = unanswered_writes() + 1


#: 4xx answers to a write that say nothing is wrong with it: the object is gone (404) or was
#: replaced (409: a uid precondition), or the apiserver asks to come back (429: unanswered).
_NOT_REFUSED = frozenset({404, 409, 429})


def refused_writes() -> int:
    """How many writes sent from the calling thread the apiserver refused (any other 4xx: the
    write itself is wrong, so sending it again would be refused again), so far: a writer
    counts them as failed, without keeping them to retry (``scheduler.kube.write.writer``)."""
    return getattr(_unanswered, "refused", 0)


class TransportError(ConnectionError):
    """The request may not have reached the apiserver, or its reply was lost (outcome unknown)."""


@dataclass(frozen=True, slots=True)
class Response:
    """A fully read reply: status code and raw body."""

    status: int
    data: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return decode(self.data) if self.data else None

    def message(self) -> str:
        """The ``Status.message`` of an error reply, else the start of the body."""
        try:
            body = self.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
        return self.data[:200].decode("utf-8", "replace") or f"HTTP {self.status}"


def decode(data: bytes | str) -> Any:
    """Parse a reply or a watch line from the apiserver: the one place that does.

    Why ``json.loads`` and not orjson: orjson decodes faster, but its parser builds a whole
    document before the Python objects, and a first list is one reply of every pod; with
    30,000 pods the scheduler's peak RSS at the first bind was 1,093-1,132 MiB with orjson
    against 899-932 MiB without, and it started no sooner (``docs/performance.md``).
    """
    return json.loads(data)


class ApiError(RuntimeError):
    """A non-2xx reply, with the apiserver's own message."""

    def __init__(self, method: str, path: str, response: Response) -> None:
        self.status = response.status
        self.reason = response.message()
        super().__init__(f"{method} {path}: HTTP {response.status}: {self.reason}")


class Requester(Protocol):
    """What the writers and the binder need; ``KubeClient`` and test fakes implement it."""

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str = JSON,
                timeout: float | tuple[float, float] | None = None) -> Response: ...


def path_segment(value: str) -> str:
    """Escape a name or namespace for use inside a URL path."""
    return quote(value, safe="")


class Outages:
    """One warning when the apiserver stops answering and one line when it answers again,
    with how long it was away and how many requests failed meanwhile, rather than a warning
    per failed request (a restart is otherwise hundreds of lines that hide real problems).
    Shared by a client and the clients derived from it (``FencedClient``)."""

    def __init__(self, host: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.host, self._clock = host, clock
        self._lock = threading.Lock()
        self._down: tuple[float, int] | None = None  # (since, failed requests)

    @property
    def down(self) -> bool:
        return self._down is not None

    def failed(self, what: str, error: object) -> None:
        with self._lock:
            first = self._down is None
            since, count = self._down or (self._clock(), 0)
            self._down = (since, count + 1)
        if first:
            log.warning("apiserver_unreachable", host=self.host, first=what, error=str(error))

    def answered(self) -> None:
        if self._down is None:  # the common case, without the lock
            return
        with self._lock:
            down, self._down = self._down, None
        if down is not None:
            log.warning("apiserver_reachable_again", host=self.host,
                        unreachable_s=round(self._clock() - down[0], 1), failed_requests=down[1])


class KubeClient:
    """JSON requests and watch streams over one pooled, authenticated ``ApiClient``."""

    def __init__(self, api_client: k8s_client.ApiClient,
                 timeout: tuple[float, float] = DEFAULT_TIMEOUT,
                 outages: Outages | None = None) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self._host = api_client.configuration.host.rstrip("/")
        self.outages = outages or Outages(self._host)

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": "gang-scheduler"}
        if content_type:
            headers["Content-Type"] = content_type
        # Re-read per request: the refresh hook renews exec-plugin and service-account tokens.
        auth = self.api_client.configuration.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers[auth["key"]] = auth["value"]
        return headers

    def _url(self, path: str, query: Mapping[str, Any] | None) -> str:
        if not query:
            return self._host + path
        return f"{self._host}{path}?{urlencode({k: v for k, v in query.items() if v is not None})}"

    def _send(self, method: str, path: str, query: Mapping[str, Any] | None, body: Any,
              content_type: str | None, timeout: float | tuple[float, float] | None
              ) -> urllib3.BaseHTTPResponse:
        try:
            raw = self.api_client.call_api(
                method, self._url(path, query), header_params=self._headers(content_type),
                body=body, _request_timeout=timeout or self.timeout)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self.outages.failed(f"{method} {path}", exc)
            raise TransportError(f"{method} {path}: {exc}") from exc
        except k8s_client.ApiException as exc:  # TLS failures surface as status 0
            if exc.status:
                self.outages.answered()
                raise
            self.outages.failed(f"{method} {path}", exc.reason)
            raise TransportError(f"{method} {path}: {exc.reason}") from exc
        self.outages.answered()
        return raw.response

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str = JSON,
                timeout: float | tuple[float, float] | None = None) -> Response:
        """Send one request and read the whole reply; never raises on HTTP status."""
        try:
            resp = self._send(method, path, query, body,
                              content_type if body is not None else None, timeout)
            try:
                data = resp.data
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise TransportError(f"{method} {path}: reading reply: {exc}") from exc
            finally:
                resp.release_conn()
        except TransportError:
            if method in WRITES:
                _count_unanswered()
            raise
        if method in WRITES and (resp.status == 429 or resp.status >= 500):
            _count_unanswered()
        elif method in WRITES and 400 <= resp.status < 500 and resp.status not in _NOT_REFUSED:
            _unanswered.refused = refused_writes() + 1
        return Response(resp.status, data)

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> Any:
        """GET and decode; raises ``ApiError`` on a non-2xx reply."""
        resp = self.request("GET", path, query=query)
        if not resp.ok:
            raise ApiError("GET", path, resp)
        return resp.json()

    def stream(self, path: str, query: Mapping[str, Any] | None,
               timeout: tuple[float, float]) -> urllib3.BaseHTTPResponse:
        """Open a GET whose body is read incrementally (a watch); the caller closes it."""
        return self._send("GET", path, query, None, None, timeout)

    def close(self) -> None:
        self.api_client.close()


def build_api_client(kubeconfig: str | None = None, *, context: str | None = None,
                     pool_maxsize: int = 64) -> k8s_client.ApiClient:
    """An ``ApiClient`` from a kubeconfig path, or the in-cluster service account when None.

    ``pool_maxsize`` must be at least the bind concurrency: urllib3 otherwise opens and discards
    extra connections (new TLS handshakes) under load and logs "Connection pool is full".
    """
    configuration = k8s_client.Configuration()
    if kubeconfig:
        k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                    client_configuration=configuration, persist_config=False)
    else:
        k8s_config.load_incluster_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = pool_maxsize
    return k8s_client.ApiClient(configuration)


def connect(kubeconfig: str | None = None, *, context: str | None = None,
            pool_maxsize: int = 64, timeout: tuple[float, float] = DEFAULT_TIMEOUT) -> KubeClient:
    """The usual entry point: ``KubeClient`` over ``build_api_client``."""
    return KubeClient(build_api_client(kubeconfig, context=context, pool_maxsize=pool_maxsize),
                      timeout=timeout)
