// Wrapper module that pins cluster-autoscaler's API module (k8s.io/autoscaler/cluster-autoscaler/apis)
// for the ProvisioningRequest CRD the dev cluster installs (autoscaling.x-k8s.io). No binary is
// built from it: scheduler/tools/devcluster/build.py copies the CRD from the module cache.
// The autoscaler itself is not built: see scheduler/tools/devcluster/README.md.
module gangscheduler.dev/hack/controlplane/autoscaler-apis

go 1.26.0

require k8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-20240830133931-adfbe7e45277
