// Command trainer-controller runs Kubeflow Trainer's controllers and webhooks, from the pinned
// github.com/kubeflow/trainer/v2 module, as a process on 127.0.0.1 next to the dev cluster.
//
// Why not Trainer's own main: it always rotates its webhook certificate itself (a Secret in
// the namespace it reads from its ServiceAccount mount, a fixed /tmp directory shared by every
// process on the machine, and a certificate for the in-cluster Service name). A process on
// loopback has no such mount, no Service, and may run beside other dev clusters. Here the
// webhook serves the certificate the dev cluster issued from its CA (--cert-dir), and the dev
// cluster points the webhook configuration at this process's URL with that CA as caBundle.
// Everything else (scheme, runtimes, controllers, webhooks) is Trainer's, wired as upstream.
package main

import (
	"flag"
	"os"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlpkg "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/controller"
	runtimecore "github.com/kubeflow/trainer/v2/pkg/runtime/core"
	"github.com/kubeflow/trainer/v2/pkg/webhooks"
)

func main() {
	var host, certDir, probeAddr string
	var port int
	flag.StringVar(&host, "webhook-host", "127.0.0.1", "address the webhook server listens on")
	flag.IntVar(&port, "webhook-port", 9443, "port of the webhook server")
	flag.StringVar(&certDir, "cert-dir", "", "directory with tls.crt and tls.key for the webhook server")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:8081", "address of /healthz and /readyz")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	if certDir == "" {
		log.Info("--cert-dir is required")
		os.Exit(2)
	}

	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(trainer.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		WebhookServer:          webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir}),
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		log.Error(err, "could not create the manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	runtimes, err := runtimecore.New(ctx, mgr.GetClient(), mgr.GetFieldIndexer())
	if err != nil {
		log.Error(err, "could not initialize the runtimes")
		os.Exit(1)
	}
	if name, err := controller.SetupControllers(mgr, runtimes, ctrlpkg.Options{}); err != nil {
		log.Error(err, "could not create a controller", "controller", name)
		os.Exit(1)
	}
	if name, err := webhooks.Setup(mgr, runtimes); err != nil {
		log.Error(err, "could not create a webhook", "webhook", name)
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", mgr.GetWebhookServer().StartedChecker()))
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "the manager stopped")
		os.Exit(1)
	}
}
