package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/containerd/nri/pkg/stub"
)

type runningGoPlugin struct {
	s      stub.Stub
	cancel context.CancelFunc
	done   chan struct{}
}

// startGoPlugin runs a containerd/nri stub plugin in-process over the runtime's real socket.
func startGoPlugin(name, idx, socket string, bench bool) *runningGoPlugin {
	s, err := stub.New(&goPlugin{bench: bench}, stub.WithPluginName(name), stub.WithPluginIdx(idx),
		stub.WithSocketPath(socket), stub.WithOnClose(func() {}))
	must(err, "go stub")
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningGoPlugin{s: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := s.Run(ctx); err != nil && ctx.Err() == nil {
			fmt.Printf("go stub %s: %v\n", name, err)
		}
	}()
	return r
}

func stopGoPlugin(r *runningGoPlugin) {
	r.s.Stop()
	r.cancel()
	<-r.done
}

// goPluginMain is `nri-harness goplugin --socket S`: the benchmark's Go plugin as a process of its
// own, like devlet's, so both pay the same process boundary.
func goPluginMain(args []string) {
	fs := flag.NewFlagSet("goplugin", flag.ExitOnError)
	socket := fs.String("socket", "", "runtime socket")
	idx := fs.String("idx", "10", "plugin index")
	fs.Parse(args)
	s, err := stub.New(&goPlugin{bench: true}, stub.WithPluginName("gobench"), stub.WithPluginIdx(*idx),
		stub.WithSocketPath(*socket))
	must(err, "go stub")
	if err := s.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "goplugin:", err)
	}
}

func startGoPluginProcess(socket string) *exec.Cmd {
	self, err := os.Executable()
	must(err, "self")
	cmd := exec.Command(self, "goplugin", "--socket", socket)
	cmd.Stderr = os.Stderr
	must(cmd.Start(), "start go plugin process")
	return cmd
}
