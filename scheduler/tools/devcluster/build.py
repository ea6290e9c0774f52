"""Build (or reuse) the etcd, kube-apiserver and kubectl binaries the dev cluster uses.

Why build from source: Docker is not available where the tests run and distribution packages
are too old (Debian's etcd 3.4 lacks the watch progress requests a current kube-apiserver
needs). Go is only a build tool here: the wrapper modules under ``hack/controlplane/`` pin the
versions (their ``go.mod``/``go.sum`` are the single source of truth) and ``go build`` produces
static binaries. A binary is cached per component and version under
``${XDG_CACHE_HOME:-~/.cache}/gang-scheduler/bin/<component>-<version>/`` and reused, so only
the first build is slow; a cached lookup reads ``go.mod`` and never runs Go.

kubectl is built from the same pinned ``k8s.io/kubernetes`` module as kube-apiserver, so the
deploy tests apply ``deploy/`` with the real ``kubectl apply -k`` (and its bundled kustomize)
at exactly the server's version instead of a re-implementation of kustomize in Python.

What is pinned and cached where is the catalogue in ``components``; its names are importable
from here too (``build.KUBECTL``, ``build.release``), as they were before it was split off.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from scheduler.tools.devcluster.components import (
    AUTOSCALER_APIS,
    CLUSTER_AUTOSCALER,
    COMPONENTS,
    DEFAULT_RELEASE,
    ETCD,
    HACK_DIR,
    HELM,
    JOBSET,
    KUBE_APISERVER,
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    KUBECTL,
    KUBERAY,
    KUEUE,
    KWOK,
    OPERATOR_COMPONENTS,
    RELEASE_ENV,
    RELEASES,
    REPO_ROOT,
    TRAINER,
    TRAINING_OPERATOR,
    BuildError,
    Component,
    ZipSource,
    bin_cache_root,
    components,
    kubectl_path,
    pinned_version,
    release,
)

# What this module builds and what it builds with (the catalogue's names, from
# ``components``), importable from here as before the split.
__all__ = [
    "AUTOSCALER_APIS", "CLUSTER_AUTOSCALER", "COMPONENTS", "DEFAULT_RELEASE", "ETCD", "HACK_DIR",
    "HELM", "JOBSET", "KUBECTL", "KUBERAY", "KUBE_APISERVER", "KUBE_CONTROLLER_MANAGER",
    "KUBE_SCHEDULER", "KUEUE", "KWOK", "OPERATOR_COMPONENTS", "PROGRESS_EVERY_S", "RELEASES",
    "RELEASE_ENV", "REPO_ROOT", "TRAINER", "TRAINING_OPERATOR", "BuildError", "Component",
    "ZipSource", "bin_cache_root", "components", "ensure", "ensure_all", "ensure_manifests",
    "go_env", "kubectl_path", "ldflags", "module_info", "pinned_version", "release", "say",
    "unpack_source",
]

PROGRESS_EVERY_S = 30.0
# Kubernetes binaries: their version is stamped into component-base and client-go.
_KUBE_STAMPED = (KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBECTL)


def say(line: str) -> None:
    """Progress goes out at once, also when stdout is a pipe or a CI log."""
    print(line, flush=True)


def ldflags(component: Component, version: str, build_date: str) -> str:
    """Version stamps so ``/version`` and ``--version`` report the pinned release.

    A plain ``go build`` leaves Kubernetes' version at v0.0.0-master, which breaks clients
    that negotiate on the server version; etcd otherwise says "Git SHA: Not provided".
    """
    flags = ["-s", "-w"]
    if component in _KUBE_STAMPED:
        major, minor = version.lstrip("v").split(".")[:2]
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            flags += [
                f"-X {pkg}.gitVersion={version}",
                f"-X {pkg}.gitMajor={major}",
                f"-X {pkg}.gitMinor={minor}",
                f"-X {pkg}.gitTreeState=clean",
                f"-X {pkg}.buildDate={build_date}",
            ]
    elif component is ETCD:
        flags.append(f"-X go.etcd.io/etcd/api/v3/version.GitSHA=module-{version}")
    elif component is HELM:  # as helm's Makefile: its version, and the Kubernetes version
        # `helm template` and `helm lint` assume (client-go 0.N is Kubernetes 1.N; else 1.20)
        minor = pinned_version(component.module_dir / "go.mod", "k8s.io/client-go").split(".")[1]
        flags.append(f"-X helm.sh/helm/v3/internal/version.version={version}")
        flags += [f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersion{part}={value}"
                  for pkg in ("chartutil", "lint/rules")
                  for part, value in (("Major", "1"), ("Minor", minor))]
    flags += [f"-X {var}={version}" for var in component.version_vars]
    return " ".join(flags)


def go_env() -> dict[str, str]:
    """A hermetic-enough environment: local toolchain only, static binaries, go.sum enforced."""
    env = dict(os.environ)
    env.update(
        GOTOOLCHAIN="local",
        CGO_ENABLED="0",
        GOFLAGS="-mod=readonly -buildvcs=false -trimpath",
    )
    return env


def module_info(component: Component, env: dict[str, str],
                cwd: Path | None = None) -> dict[str, str]:
    """``go list -m -json`` of the pinned module: its release ``Time`` (a reproducible build
    date) and ``Dir`` in the module cache (where its manifests are)."""
    out = subprocess.run(
        ["go", "list", "-m", "-json", component.pinned_module],
        cwd=cwd or component.source_dir, env=env, capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise BuildError(f"go list -m {component.pinned_module} failed:\n{out.stderr}")
    return {str(k): str(v) for k, v in json.loads(out.stdout).items()}


def _cache_manifests(component: Component, module_dir: str) -> None:
    for relative in component.manifests:
        source = Path(module_dir) / relative
        if not source.is_file():
            raise BuildError(f"{component.name}: {relative} is not in {module_dir}")
        target = component.manifest(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)


def ensure(component: Component, log: Callable[[str], None] = say) -> Path:
    """Return the cached binary for `component`, building it first if it is missing."""
    binary = component.binary()
    if binary.is_file() and os.access(binary, os.X_OK):
        log(f"{component.name} {component.version}: cached at {binary}")
        return binary
    if shutil.which("go") is None:
        raise BuildError(f"{component.name}: not cached at {binary} and `go` is not on PATH")
    env = go_env()
    version = component.version
    log(f"{component.name} {version}: building from {component.source_dir} "
        "(a cold build takes minutes; later runs reuse the cache)")
    started = time.monotonic()
    component.cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = binary.with_name(f".{binary.name}.{os.getpid()}.tmp")
    with tempfile.TemporaryDirectory(dir=component.cache_dir(), prefix=".src-") as scratch:
        workdir = (unpack_source(component, version, Path(scratch), log)
                   if component.source_zip else component.source_dir)
        info = module_info(component, env, workdir)
        tags = ["-tags", ",".join(component.tags)] if component.tags else []
        cmd = ["go", "build", *tags, "-ldflags",
               ldflags(component, version, info.get("Time", "1970-01-01T00:00:00Z")),
               "-o", str(tmp), component.package]
        _run_with_progress(cmd, component, env, started, log, workdir)
    if component.manifests and not info.get("Dir"):
        # On an empty module cache `go list -m` knows the version but has no directory until
        # the build has downloaded the module.
        info = module_info(component, env)
    _cache_manifests(component, info.get("Dir", ""))
    tmp.replace(binary)  # atomic and last: a binary in the cache means its manifests are too
    elapsed = time.monotonic() - started
    (component.cache_dir() / "BUILDINFO.json").write_text(
        json.dumps({"component": component.name, "version": version,
                    "build_seconds": round(elapsed, 1), "command": cmd}, indent=2) + "\n"
    )
    log(f"{component.name} {version}: built in {elapsed:.1f}s -> {binary}")
    return binary


def ensure_manifests(component: Component, log: Callable[[str], None] = say) -> list[Path]:
    """The cached manifests of a component that has no binary (``AUTOSCALER_APIS``), copied
    from its pinned module, downloaded (``go mod download``, go.sum enforced) if missing."""
    paths = [component.manifest(relative) for relative in component.manifests]
    if all(p.is_file() for p in paths):
        return paths
    if shutil.which("go") is None:
        raise BuildError(f"{component.name}: manifests not cached under {component.cache_dir()} "
                         "and `go` is not on PATH")
    out = subprocess.run(["go", "mod", "download", "-json", component.pinned_module],
                         cwd=component.source_dir, env=go_env(), capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise BuildError(f"go mod download {component.pinned_module} failed:\n"
                         f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
    _cache_manifests(component, str(json.loads(out.stdout).get("Dir", "")))
    log(f"{component.name} {component.version}: manifests cached in {component.cache_dir()}")
    return paths


def unpack_source(component: Component, version: str, into: Path,
                  log: Callable[[str], None] = say) -> Path:
    """Download `component`'s source zip at *version*, check its sha256, unpack it under
    *into* and lay the committed ``go.mod``/``go.sum`` over it; returns the module's root."""
    source = component.source_zip
    assert source is not None
    url = source.url(version)
    archive = into / "source.zip"
    log(f"{component.name}: downloading {url}")
    try:
        with urllib.request.urlopen(url, timeout=300) as reply, archive.open("wb") as out:
            shutil.copyfileobj(reply, out)
    except OSError as exc:
        raise BuildError(f"{component.name}: cannot download {url}: {exc}") from None
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != source.sha256:
        raise BuildError(f"{component.name}: {url} has sha256 {digest}, expected "
                         f"{source.sha256} (pinned in components.py): refusing to build it")
    prefix = f"{source.module}@{version}/"
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
        if not names or any(not n.startswith(prefix) for n in names):
            raise BuildError(f"{component.name}: {url} is not the zip of {prefix}")
        zipped.extractall(into / "src")
    archive.unlink()
    root = into / "src" / prefix
    for name in ("go.mod", "go.sum"):
        shutil.copyfile(component.module_dir / name, root / name)
    for relative, old, new in source.edits:
        text = (root / relative).read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise BuildError(f"{component.name}: the fix of {relative} ({old!r} -> {new!r}) "
                             "does not apply to this version: drop or update it in components.py")
        (root / relative).write_text(text.replace(old, new), encoding="utf-8")
    return root


def _run_with_progress(cmd: list[str], component: Component, env: dict[str, str],
                       started: float, log: Callable[[str], None],
                       cwd: Path | None = None) -> None:
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            log(f"{component.name}: still building ({time.monotonic() - started:.0f}s)")

    ticker = threading.Thread(target=heartbeat, daemon=True)
    ticker.start()
    try:
        proc = subprocess.run(cmd, cwd=cwd or component.source_dir, env=env, check=False,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finally:
        done.set()
    if proc.returncode != 0:
        raise BuildError(f"{component.name}: `{' '.join(cmd)}` failed "
                         f"(exit {proc.returncode}):\n{proc.stdout[-4000:]}")


def ensure_all(log: Callable[[str], None] = say, operators: bool = True) -> dict[str, Path]:
    """Build or reuse every component (`components`); returns name -> binary path."""
    started = time.monotonic()
    paths = {c.name: ensure(c, log) for c in components(operators)}
    ensure_manifests(AUTOSCALER_APIS, log)
    log(f"control plane binaries ready in {time.monotonic() - started:.1f}s")
    return paths


if __name__ == "__main__":  # pragma: no cover - convenience for `python -m`
    try:
        ensure_all()
    except BuildError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
