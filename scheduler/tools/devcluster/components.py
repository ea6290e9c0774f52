"""The pinned components of the dev cluster: which binaries it runs, the wrapper module (or
source zip) that pins each one's version, and where each is cached.

Why apart from ``build``: this is the catalogue, read by everything that starts or names a
component (a cached lookup reads ``go.mod`` and never runs Go); ``build`` is how a missing
binary is made. Adding a component is a change here only (``COMPONENTS``, one per line), plus
its ``hack/`` module and its start-up in the cluster code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
HACK_DIR = REPO_ROOT / "hack" / "controlplane"
#: The Kubernetes releases the dev cluster can run, each pinned by its own wrapper module
#: (1.36 serves the gang API at scheduling.k8s.io/v1alpha2, 1.37 at v1beta1). Chosen with
#: ``$GANG_SCHEDULER_KUBERNETES`` (``dev-cluster --kubernetes`` sets it); etcd is shared.
RELEASE_ENV = "GANG_SCHEDULER_KUBERNETES"
RELEASES: dict[str, Path] = {"1.36": HACK_DIR, "1.37": REPO_ROOT / "hack" / "controlplane-1.37"}
DEFAULT_RELEASE = "1.36"


class BuildError(RuntimeError):
    """A binary could not be built (or its pinned version not read); the message says which
    and why."""


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


def kubectl_path() -> Path:
    """Where the pinned kubectl is cached (it may not be built yet: see `build.ensure`)."""
    return KUBECTL.binary()


#: What the training operators need beyond the control plane: left out by ``operators=False``.
OPERATOR_COMPONENTS: tuple[Component, ...] = (JOBSET, TRAINER, KUEUE, TRAINING_OPERATOR, KUBERAY)


def components(operators: bool = True) -> tuple[Component, ...]:
    """The components a dev cluster needs, with or without the training operators."""
    return COMPONENTS if operators else tuple(
        c for c in COMPONENTS if c not in OPERATOR_COMPONENTS)
