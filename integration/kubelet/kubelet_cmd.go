package main

// `kubelet-harness kubelet`: the kubelet's side of one call, for harnesses that run a whole
// devlet-node (integration/nri's `node` scenario). It registers the plugin whose socket is in the
// registry directory exactly as the kubelet does (GetInfo within 1 s, NotifyRegistrationStatus),
// then calls NodePrepareResources or NodeUnprepareResources over dra/v1 for the given claims and
// prints the response as JSON on stdout. Exit status 1 when registration or the call fails or any
// claim comes back with an error.
//
//	kubelet-harness kubelet --registry-dir DIR [--unprepare] --claim NS/NAME/UID [--claim ...]

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

func kubeletMain(args []string) {
	fs := flag.NewFlagSet("kubelet", flag.ExitOnError)
	registryDir := fs.String("registry-dir", "", "the kubelet's plugins_registry directory")
	unprepare := fs.Bool("unprepare", false, "NodeUnprepareResources instead of NodePrepareResources")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the registration socket")
	var claims []*drapbv1.Claim
	fs.Func("claim", "NS/NAME/UID of a claim (repeatable)", func(v string) error {
		parts := strings.Split(v, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return fmt.Errorf("%q: want NAMESPACE/NAME/UID", v)
		}
		claims = append(claims, &drapbv1.Claim{Namespace: parts[0], Name: parts[1], Uid: parts[2]})
		return nil
	})
	fs.Parse(args)
	if *registryDir == "" || len(claims) == 0 {
		fmt.Fprintln(os.Stderr, "usage: kubelet-harness kubelet --registry-dir DIR [--unprepare] --claim NS/NAME/UID...")
		os.Exit(2)
	}
	t := &T{name: "kubelet"}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(failure); !ok {
				fmt.Fprintf(os.Stderr, "panic: %v\n", r)
			}
			os.Exit(1)
		}
	}()
	socket := findRegistrationSocket(t, *registryDir, *timeout)
	e := &env{t: t}
	info := e.register(socket)
	if info.Type != "DRAPlugin" {
		t.Fatalf("plugin type %q, want DRAPlugin", info.Type)
	}
	conn := dial(t, info.Endpoint)
	defer conn.Close()
	client := drapbv1.NewDRAPluginClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second) // the kubelet's call timeout
	defer cancel()
	var resp proto.Message
	var claimErrors []string
	if *unprepare {
		r, err := client.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: claims})
		if err != nil {
			t.Fatalf("NodeUnprepareResources: %v", err)
		}
		resp, claimErrors = r, errorsOf(r.Claims)
	} else {
		r, err := client.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: claims})
		if err != nil {
			t.Fatalf("NodePrepareResources: %v", err)
		}
		resp, claimErrors = r, errorsOf(r.Claims)
	}
	out, err := protojson.MarshalOptions{Multiline: true}.Marshal(resp)
	if err != nil {
		t.Fatalf("encode the response: %v", err)
	}
	fmt.Println(string(out))
	if len(claimErrors) == 0 {
		return
	}
	t.Fatalf("claim errors: %s", strings.Join(claimErrors, "; "))
}

// errorsOf lists "uid: error" for every claim answered with an error.
func errorsOf[C interface{ GetError() string }](claims map[string]C) []string {
	var out []string
	for uid, c := range claims {
		if c.GetError() != "" {
			out = append(out, uid+": "+c.GetError())
		}
	}
	return out
}

// findRegistrationSocket polls DIR for a registration socket (the kubelet's plugin watcher skips
// names starting with a dot).
func findRegistrationSocket(t *T, dir string, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		entries, _ := os.ReadDir(dir)
		for _, entry := range entries {
			if strings.HasPrefix(entry.Name(), ".") || entry.Type()&os.ModeSocket == 0 {
				continue
			}
			return filepath.Join(dir, entry.Name())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no registration socket in %s within %v", dir, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
