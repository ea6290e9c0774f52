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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
HACK_DIR = REPO_ROOT / "hack" / "controlplane"
PROGRESS_EVERY_S = 30.0
#: The Kubernetes releases the dev cluster can run, each pinned by its own wrapper module
#: (1.36 serves the gang API at scheduling.k8s.io/v1alpha2, 1.37 at v1beta1). Chosen with
#: ``$GANG_SCHEDULER_KUBERNETES`` (``dev-cluster --kubernetes`` sets it); etcd is shared.
RELEASE_ENV = "GANG_SCHEDULER_KUBERNETES"
RELEASES: dict[str, Path] = {"1.36": HACK_DIR, "1.37": REPO_ROOT / "hack" / "controlplane-1.37"}
DEFAULT_RELEASE = "1.36"


def say(line: str) -> None:
    """Progress goes out at once, also when stdout is a pipe or a CI log."""
    print(line, flush=True)


class BuildError(RuntimeError):
    """A binary could not be built; the message says which and why."""


def release() -> str:
    """The Kubernetes release chosen (``$GANG_SCHEDULER_KUBERNETES``, default 1.36)."""
    chosen = os.environ.get(RELEASE_ENV, "").strip() or DEFAULT_RELEASE
    if chosen not in RELEASES:
        raise BuildError(f"${RELEASE_ENV}={chosen!r}: unknown Kubernetes release "
                         f"(known: {', '.join(sorted(RELEASES))})")
    return chosen


@dataclass(frozen=True, slots=True)
class ZipSource:
    """A main module built from its source zip on the Go module proxy, for a module the proxy
    serves only as a zip (it refuses the version's ``.mod`` and ``@v/list``, so neither
    ``go install`` nor a wrapper module's ``require`` can resolve it).

    The zip is pinned by its sha256 and checked after download; its ``go.mod``/``go.sum`` are
    replaced by the committed ones in the component's ``module_dir`` (patched so that every
    module they name is one the proxy serves), so the build needs nothing but the proxy.
    """

    module: str
    #: The zip's version is the version ``module_dir/go.mod`` requires the component's
    #: ``pinned_module`` at (the same commit), so the pin lives in one place.
    sha256: str
    #: One-line fixes of the release's own source, ``(file, old, new)``, each of which must
    #: apply (a bumped version that no longer needs one fails the build, naming it).
    edits: tuple[tuple[str, str, str], ...] = ()

    def url(self, version: str) -> str:
        proxy = next((p for p in os.environ.get("GOPROXY", "").split(",")
                      if p.startswith(("https://", "http://"))), "https://proxy.golang.org")
        return f"{proxy.rstrip('/')}/{self.module}/@v/{version}.zip"


@dataclass(frozen=True, slots=True)
class Component:
    """One control-plane binary: which wrapper module builds it and from which Go package."""

    name: str
    module_dir: Path
    pinned_module: str  # the module whose version in go.mod is the component version
    package: str
    #: Go string variables (``pkg.Var``) that get the version, so the binary reports it.
    version_vars: tuple[str, ...] = ()
    #: Files of the pinned module (CRDs, webhook and RBAC manifests) cached beside the binary,
    #: so that starting the component needs no Go and reads the manifests of its own release.
    manifests: tuple[str, ...] = ()
    #: A Kubernetes binary: built from the chosen release's module (``RELEASES``), not
    #: ``module_dir`` (the default release's).
    follows_release: bool = False
    #: Built from a module's source zip instead of a wrapper module (`ZipSource`).
    source_zip: ZipSource | None = None
    #: Go build tags (``go build -tags``).
    tags: tuple[str, ...] = ()

    @property
    def source_dir(self) -> Path:
        return RELEASES[release()] if self.follows_release else self.module_dir

    @property
    def version(self) -> str:
        return pinned_version(self.source_dir / "go.mod", self.pinned_module)

    def cache_dir(self) -> Path:
        return bin_cache_root() / f"{self.name}-{self.version}"

    def binary(self) -> Path:
        return self.cache_dir() / self.name

    def manifest(self, relative: str) -> Path:
        """A cached manifest (one of `manifests`) of this component."""
        return self.cache_dir() / "manifests" / relative


ETCD = Component(
    "etcd", HACK_DIR / "etcd", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3"
)
KUBE_APISERVER = Component(
    "kube-apiserver", HACK_DIR, "k8s.io/kubernetes", "k8s.io/kubernetes/cmd/kube-apiserver",
    follows_release=True,
)
KUBE_CONTROLLER_MANAGER = Component(
    "kube-controller-manager", HACK_DIR, "k8s.io/kubernetes",
    "k8s.io/kubernetes/cmd/kube-controller-manager", follows_release=True,
)
KUBE_SCHEDULER = Component(
    "kube-scheduler", HACK_DIR, "k8s.io/kubernetes", "k8s.io/kubernetes/cmd/kube-scheduler",
    follows_release=True,
)
KUBECTL = Component("kubectl", HACK_DIR, "k8s.io/kubernetes", "k8s.io/kubernetes/cmd/kubectl",
                    follows_release=True)
KWOK = Component("kwok", HACK_DIR / "kwok", "sigs.k8s.io/kwok", "sigs.k8s.io/kwok/cmd/kwok")
JOBSET = Component(
    "jobset-controller", HACK_DIR / "jobset", "sigs.k8s.io/jobset", "sigs.k8s.io/jobset",
    ("sigs.k8s.io/jobset/pkg/version.GitVersion",),
    ("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
     "config/components/webhook/manifests.yaml",
     "config/components/webhook/patches/mutating-patch.yaml",
     "config/components/webhook/patches/validating-patch.yaml",
     "config/components/rbac/role.yaml"),
)
TRAINER = Component(
    "trainer-controller", HACK_DIR / "trainer", "github.com/kubeflow/trainer/v2",
    "gangscheduler.dev/hack/controlplane/trainer", (),
    ("manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
     "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
     "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
     "manifests/base/webhook/manifests.yaml",
     "manifests/base/rbac/role.yaml",
     "manifests/base/runtimes/torch_distributed.yaml"),
)
#: Kubeflow training-operator v1's PyTorchJob and MPIJob controllers, from a wrapper main with
#: no webhooks, certificate manager or PodGroups (why: hack/controlplane/training-operator/main.go).
#: Started on demand (``DevCluster.start_training_operator_v1``), as Kueue is.
TRAINING_OPERATOR = Component(
    "training-operator", HACK_DIR / "training-operator", "github.com/kubeflow/training-operator",
    "gangscheduler.dev/hack/controlplane/training-operator", (),
    ("manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
     "manifests/base/crds/kubeflow.org_mpijobs.yaml",
     "manifests/base/rbac/role.yaml"),
)
#: Kueue's manager (sigs.k8s.io/kueue/cmd/kueue): quota and admission above gang-scheduler in the
#: Kueue mode. Its own main is used as released; the dev cluster gives it a configuration file.
KUEUE = Component(
    "kueue-controller", HACK_DIR / "kueue", "sigs.k8s.io/kueue", "sigs.k8s.io/kueue/cmd/kueue",
    ("sigs.k8s.io/kueue/pkg/version.GitVersion",),
    ("config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_workloads.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_workloadpriorityclasses.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_admissionchecks.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_cohorts.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_topologies.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_provisioningrequestconfigs.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_multikueueclusters.yaml",
     "config/components/crd/bases/kueue.x-k8s.io_multikueueconfigs.yaml",
     "config/components/webhook/manifests.yaml",
     "config/components/rbac/role.yaml",
     "config/components/rbac/manager_secrets_role.yaml"),
)
#: The KubeRay operator (its own main, github.com/ray-project/kuberay/ray-operator): RayCluster,
#: RayJob and RayService controllers, started on demand (``DevCluster.start_kuberay``). Its
#: webhook is off (the release's main registers it only with ``ENABLE_WEBHOOKS=true``). Its
#: Kubernetes dependencies (k8s.io v0.34.1, controller-runtime v0.22.1) are JobSet's, so a
#: build after JobSet's reuses much of the Go build cache.
KUBERAY = Component(
    "kuberay-operator", HACK_DIR / "kuberay", "github.com/ray-project/kuberay/ray-operator",
    "github.com/ray-project/kuberay/ray-operator", (),
    ("config/crd/bases/ray.io_rayclusters.yaml",
     "config/crd/bases/ray.io_rayjobs.yaml",
     "config/crd/bases/ray.io_rayservices.yaml",
     "config/rbac/role.yaml"),
)
#: cluster-autoscaler's API module, for its ProvisioningRequest CRD only (``ensure_manifests``),
#: which ``up`` installs whether or not the autoscaler runs: the CRD is what gang-scheduler
#: writes its whole-gang scale-ups to. Pinned at the commit `CLUSTER_AUTOSCALER` is built from.
AUTOSCALER_APIS = Component(
    "autoscaler-apis", HACK_DIR / "autoscaler-apis", "k8s.io/autoscaler/cluster-autoscaler/apis",
    "", (), ("config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml",),
)
#: The real cluster-autoscaler with its kwok cloud provider only (``-tags kwok``): it adds and
#: removes the dev cluster's fake nodes for ProvisioningRequests and unschedulable pods
#: (autoscaler.py). Built from the proxy's source zip (`ZipSource`), with the go.mod/go.sum of
#: ``hack/cluster-autoscaler/`` (its ``apis`` module required from the proxy at the same commit
#: instead of the zip's ``replace ../apis``, which the zip does not contain).
CLUSTER_AUTOSCALER = Component(
    "cluster-autoscaler", REPO_ROOT / "hack" / "cluster-autoscaler",
    "k8s.io/autoscaler/cluster-autoscaler/apis", ".",
    source_zip=ZipSource(
        "k8s.io/autoscaler/cluster-autoscaler",
        "bc6d83485b5b5beb8b59d4d618463f2de576ca81c1a841c4cfffb296bbab841a",
        # builder_all.go (every provider) lacks ``!kwok`` in its build constraint, so with
        # ``-tags kwok`` it and builder_kwok.go both define the builder: "redeclared".
        (("cloudprovider/builder/builder_all.go", "//go:build !gce && ",
          "//go:build !kwok && !gce && "),)),
    tags=("kwok",),
)
# For the Helm chart's tests (deploy/helm): lint, template, install on the dev cluster.
HELM = Component("helm", REPO_ROOT / "hack" / "helm", "helm.sh/helm/v3", "helm.sh/helm/v3/cmd/helm")
# One component per line, so that additions merge cleanly.
COMPONENTS: tuple[Component, ...] = (
    ETCD,
    KUBE_APISERVER,
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    KUBECTL,
    KWOK,
    JOBSET,
    TRAINER,
    KUEUE,
    TRAINING_OPERATOR,
    KUBERAY,
    HELM,
    CLUSTER_AUTOSCALER,
)
# Kubernetes binaries: their version is stamped into component-base and client-go.
_KUBE_STAMPED = (KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBECTL)


def bin_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gang-scheduler" / "bin"


def pinned_version(go_mod: Path, module: str) -> str:
    """The version `module` is required at in `go_mod` (``module vX.Y.Z`` in a require)."""
    try:
        text = go_mod.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BuildError(f"{go_mod} not found: the dev cluster needs a source checkout of "
                         "gang-scheduler (hack/controlplane pins the versions)") from None
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if not match:
        raise BuildError(f"{go_mod}: no require line for {module}")
    return match.group(1)


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
                         f"{source.sha256} (pinned in build.py): refusing to build it")
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
                             "does not apply to this version: drop or update it in build.py")
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


def kubectl_path() -> Path:
    """Where the pinned kubectl is cached (it may not be built yet: see `ensure`)."""
    return KUBECTL.binary()


#: What the training operators need beyond the control plane: left out by ``operators=False``.
OPERATOR_COMPONENTS: tuple[Component, ...] = (JOBSET, TRAINER, KUEUE, TRAINING_OPERATOR, KUBERAY)


def components(operators: bool = True) -> tuple[Component, ...]:
    """The components a dev cluster needs, with or without the training operators."""
    return COMPONENTS if operators else tuple(
        c for c in COMPONENTS if c not in OPERATOR_COMPONENTS)


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
