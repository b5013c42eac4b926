// Command devlet-cluster runs a real single-node Kubernetes v1.37.2 cluster on this machine and
// devlet installed into it the way a user installs it (issue 17 §2):
//
//	devlet-cluster test --containerd-bin DIR --simnode PATH --topology XML [--profiles YAML]
//	    [--image ARCHIVE | --build-image build-image.sh [--image-build-dir DIR]] --chart DIR
//	    --helm PATH [--scenarios 1,9] [--keep DIR] [--hold]
//	devlet-cluster apiserver|controller-manager|scheduler|kubelet ARGS...
//
// The second form runs that component's own cobra command (k8s.io/kubernetes/cmd/...); `test`
// re-executes this binary in that form for each component. `test` starts etcd (embedded),
// kube-apiserver (Node+RBAC authorization, service-account tokens), kube-controller-manager (the
// ResourceClaim, DaemonSet, service-account, root-CA, garbage-collector and device-taint
// controllers), kube-scheduler, containerd (NRI and CDI on) and the kubelet (cgroup v1, cgroupfs,
// loopback ports), waits for the Node to be Ready, imports devlet's image into containerd,
// `helm install`s devlet's chart with devlet-simnode's simulated node mounted in, waits for the
// node's ResourceSlices, runs the scenarios, and tears everything down, putting back what the
// kubelet changed on the host. It prints each phase's time. Exit status 0: all passed, 1: a check
// failed, 77: this machine cannot run it (the reason is printed).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type options struct {
	containerdBin, simnode, topology, profiles string
	image, chart, helm                         string
	imageScript, imageBuildDir                 string
	extraValues                                string
	scenarios                                  string
	keepDir                                    string
	hold                                       bool
	timeout                                    time.Duration
}

func main() {
	if len(os.Args) > 1 && runComponent(os.Args[1], os.Args[2:]) {
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "test" {
		fmt.Fprintln(os.Stderr, "usage: devlet-cluster test --containerd-bin DIR --simnode PATH "+
			"--topology XML [--image ARCHIVE --chart DIR --helm PATH] [--scenarios 1,9] [--keep DIR] [--hold]\n"+
			"       devlet-cluster apiserver|controller-manager|scheduler|kubelet ARGS...")
		os.Exit(2)
	}
	var o options
	fs := flag.NewFlagSet("test", flag.ExitOnError)
	fs.StringVar(&o.containerdBin, "containerd-bin", "", "dir with containerd, ctr, containerd-shim-runc-v2, crictl")
	fs.StringVar(&o.simnode, "simnode", "", "devlet-simnode")
	fs.StringVar(&o.topology, "topology", "", "the simulated node's hwloc XML")
	fs.StringVar(&o.profiles, "profiles", "", "devlet's device profiles (examples/node/profiles.yaml)")
	fs.StringVar(&o.image, "image", "", "devlet's OCI image archive (packaging/image)")
	fs.StringVar(&o.imageScript, "build-image", "", "packaging/image/build-image.sh: build --image first")
	fs.StringVar(&o.imageBuildDir, "image-build-dir", "", "the build whose binaries build-image.sh packs (--no-build)")
	fs.StringVar(&o.chart, "chart", "", "devlet's Helm chart (packaging/helm/devlet)")
	fs.StringVar(&o.helm, "helm", "", "helm binary")
	fs.StringVar(&o.extraValues, "values", "", "one more values file for the chart (last: it wins)")
	fs.StringVar(&o.scenarios, "scenarios", "1,2,3,4,5,6,7,7b,8,9,10,bad", "scenarios to run, in order (issue 17 §2; 7 and 9 need 1)")
	fs.StringVar(&o.keepDir, "keep", "", "work in this dir and keep it (logs, configs)")
	fs.BoolVar(&o.hold, "hold", false, "after the scenarios, keep the cluster up until SIGINT/SIGTERM")
	fs.DurationVar(&o.timeout, "timeout", 25*time.Minute, "tear down and fail after this long")
	fs.Parse(os.Args[2:])
	if o.containerdBin == "" || o.simnode == "" || o.topology == "" {
		fmt.Fprintln(os.Stderr, "devlet-cluster test: --containerd-bin, --simnode and --topology are required")
		os.Exit(2)
	}
	os.Exit(runTest(o))
}

func runTest(o options) int {
	c := &cluster{bin: o.containerdBin, host: &hostState{}}
	self, err := os.Executable()
	must(err, "executable")
	c.self = self
	if o.keepDir != "" {
		keep = true
		c.dir, _ = filepath.Abs(o.keepDir)
		must(os.MkdirAll(c.dir, 0o755), "keep dir")
	} else {
		d, err := os.MkdirTemp("", "devlet-cluster-")
		must(err, "temp dir")
		c.dir = d
	}
	os.MkdirAll(c.path("logs"), 0o755)
	c.cgroupRoot = "/" + filepath.Base(c.dir)
	active = c
	logf("work dir %s", c.dir)

	// A signal or the overall timeout tears down as a failure does.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	// --hold: the end of the hold (every registered channel gets each signal).
	holdSignals := make(chan os.Signal, 1)
	signal.Notify(holdSignals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-signals:
			if o.hold {
				return
			}
			fatalf("signal %v", s)
		case <-time.After(o.timeout):
			fatalf("overall timeout %v", o.timeout)
		}
	}()

	c.prerequisites()
	if o.imageScript != "" {
		if o.image == "" {
			o.image = c.path("devlet-image.tar")
		}
		phase("image (packaging/image/build-image.sh)", func() {
			args := []string{o.imageScript, "--out", o.image}
			if o.imageBuildDir != "" {
				args = append(args, "--build-dir", o.imageBuildDir, "--no-build")
			}
			out, err := runCmd("bash", nil, args...)
			must(err, "build-image.sh")
			lines := strings.Split(out, "\n")
			logf("build-image.sh: %s", lines[len(lines)-1])
		})
	}
	c.up()
	if o.chart != "" {
		d := &devlet{c: c, opts: o}
		c.devlet = d
		d.install()
		for _, s := range strings.Split(o.scenarios, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			run, ok := scenarios[s]
			if !ok {
				fatalf("no scenario %q", s)
			}
			before := failures
			phase("scenario "+s, func() { run(d) })
			if failures > before {
				logf("scenario %s: FAILED (%d checks)", s, failures-before)
			} else {
				logf("scenario %s: passed", s)
			}
		}
	}
	if o.hold {
		logf("cluster up: KUBECONFIG=%s; crictl: CONTAINER_RUNTIME_ENDPOINT=unix://%s; ^C tears down",
			c.adminKubeconfig, c.sock())
		<-holdSignals
	}
	exitMu.Lock()
	active = nil
	phase("teardown", func() { shutdown(c) })
	if failures > 0 {
		fmt.Printf("FAIL: %d checks failed\n", failures)
		return 1
	}
	fmt.Println("PASS")
	return 0
}

// shutdown tears the cluster down and removes the work dir unless it is kept (exitMu held).
func shutdown(c *cluster) {
	c.teardown()
	if !keep {
		if err := os.RemoveAll(c.dir); err != nil {
			logf("cleanup: %v", err)
		}
	}
}
