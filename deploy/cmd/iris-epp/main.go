// Command iris-epp is the Gateway API Inference Extension's Endpoint Picker (v1.5.0's runner,
// unchanged) with Iris's image-affinity scorer in its plugin registry, as upstream's cmd/epp
// documents for out-of-tree plugins. Its flags and configuration file are the EPP's.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/gateway-api-inference-extension/cmd/epp/runner"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"

	"github.com/iris-vlm/iris/deploy/imageaffinity"
)

func main() {
	plugin.Register(imageaffinity.Type, imageaffinity.Factory)
	if err := runner.NewRunner().Run(ctrl.SetupSignalHandler()); err != nil {
		os.Exit(1)
	}
}
