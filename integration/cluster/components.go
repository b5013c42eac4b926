package main

// The Kubernetes components, each run through its own cobra command (k8s.io/kubernetes v1.37.2)
// in a child process of this binary: `devlet-cluster <component> ARGS...`. One binary, one `go
// build`, so the four components share one build cache and one link.

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// components maps a subcommand to the component's cobra command.
var components = map[string]func(ctx context.Context) *cobra.Command{
	"apiserver":          func(context.Context) *cobra.Command { return apiserver.NewAPIServerCommand() },
	"controller-manager": func(context.Context) *cobra.Command { return controllermanager.NewControllerManagerCommand() },
	"scheduler":          func(context.Context) *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":            kubelet.NewKubeletCommand,
}

// runComponent runs one component with args and exits with its status; it returns false when
// name is no component.
func runComponent(name string, args []string) bool {
	newCommand, ok := components[name]
	if !ok {
		return false
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cmd := newCommand(ctx)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}
