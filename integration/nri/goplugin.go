package main

import (
	"context"
	"fmt"

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
