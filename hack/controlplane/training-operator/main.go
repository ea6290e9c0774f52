// Command training-operator runs the PyTorchJob and MPIJob controllers of Kubeflow's
// training-operator v1, from the pinned github.com/kubeflow/training-operator module, as a
// process on 127.0.0.1 next to the dev cluster.
//
// Why not the operator's own main (cmd/training-operator.v1): it starts no controller until
// its certificate manager has written a webhook certificate for the in-cluster Service name
// into a Secret of its namespace and patched its webhook configurations, none of which exist
// on loopback; and it links every framework's controller. Here:
//
//   - only the controllers gang-scheduler sizes gangs from are started (PyTorchJob, MPIJob);
//   - no webhook server and no certificate management: the webhooks only validate, and each
//     controller applies its kind's defaults itself before it reconciles;
//   - no gang-scheduler integration (the operator's --gang-scheduler-name): it would create
//     PodGroups for its jobs; here the pods only carry the schedulerName of their template and
//     gang-scheduler sizes the gang from the job object;
//   - no leader election and no metrics server.
//
// The controllers themselves are the operator's, wired as its main wires them.
package main

import (
	"flag"
	"os"

	"go.uber.org/zap/zapcore"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/kubeflow/training-operator/pkg/config"
	"github.com/kubeflow/training-operator/pkg/controller.v1/common"
	mpicontroller "github.com/kubeflow/training-operator/pkg/controller.v1/mpi"
	pytorchcontroller "github.com/kubeflow/training-operator/pkg/controller.v1/pytorch"
)

func main() {
	var probeAddr string
	var threads int
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:8081", "address of /healthz and /readyz")
	flag.IntVar(&threads, "controller-threads", 1, "worker threads of each controller")
	// The operator's own settings, with its defaults (its main sets them through these flags;
	// left unset, the PyTorchJob workers' init container gets no image and is refused).
	flag.StringVar(&config.Config.PyTorchInitContainerImage, "pytorch-init-container-image",
		config.PyTorchInitContainerImageDefault, "image of the PyTorch workers' init container")
	flag.StringVar(&config.Config.PyTorchInitContainerTemplateFile, "pytorch-init-container-template-file",
		config.PyTorchInitContainerTemplateFileDefault, "template of that init container (built-in when absent)")
	flag.IntVar(&config.Config.PyTorchInitContainerMaxTries, "pytorch-init-container-max-tries",
		config.PyTorchInitContainerMaxTriesDefault, "tries of that init container")
	flag.StringVar(&config.Config.MPIKubectlDeliveryImage, "mpi-kubectl-delivery-image",
		config.MPIKubectlDeliveryImageDefault, "image of the MPI launcher's init container")
	opts := zap.Options{Development: true, StacktraceLevel: zapcore.DPanicLevel}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	// The PodGroup kinds stay in the scheme, as upstream has them: each controller watches
	// the PodGroups of whichever of them is installed (the dev cluster serves
	// scheduler-plugins'), though with no gang scheduler set it never creates one.
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		log.Error(err, "could not create the manager")
		os.Exit(1)
	}
	noGang := common.GenNonGangSchedulerSetupFunc()
	if err := pytorchcontroller.NewReconciler(mgr, noGang).SetupWithManager(mgr, threads); err != nil {
		log.Error(err, "could not create a controller", "kind", kubeflowv1.PyTorchJobKind)
		os.Exit(1)
	}
	if err := mpicontroller.NewReconciler(mgr, noGang).SetupWithManager(mgr, threads); err != nil {
		log.Error(err, "could not create a controller", "kind", kubeflowv1.MPIJobKind)
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "the manager stopped")
		os.Exit(1)
	}
}
