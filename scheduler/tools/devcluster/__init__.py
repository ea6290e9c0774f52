"""A local Kubernetes control plane for tests and the demo.

Real etcd and kube-apiserver binaries (built from pinned sources by `build`), TLS and RBAC as in
production, the real kube-controller-manager and kube-scheduler (`controllers`), fake GPU nodes
from a cluster description (`nodes`) run by kwok (`kwok`, stages in ``kwok-stages.yaml``),
and a fake DRA driver publishing their GPUs as ResourceSlices (`dra`, `dra_driver`).
`cluster.DevCluster` puts it together; the CLI is
``gang-scheduler dev-cluster`` and the pytest fixture is ``control_plane`` in tests/e2e.
See README.md next to this file.
"""
