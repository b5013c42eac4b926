// nri-harness drives devlet's C++ NRI plugin (nri-plugin/tests/test_plugin_main.cc) through the
// real runtime side of NRI, github.com/containerd/nri/pkg/adaptation (what containerd and CRI-O
// link), and asserts the merged adjustments.
//
//	nri-harness test  --plugin path/to/devlet-nri-test-plugin
//	nri-harness bench --plugin path/to/devlet-nri-test-plugin [--n 5000]
//	nri-harness node  --plugin devlet-node --kubelet kubelet-harness ...   (node.go)
//
// Scenarios (test): external plugin registration + sync; pod/container lifecycle with a Go stub
// plugin alongside (merged adjustments, UpdateContainer re-pinning); >4 KiB and ~1 MiB requests
// and responses; an unknown pod; a handler slower than the request timeout (plugin dropped,
// container created without it, plugin reconnects); a runtime restart (plugin reconnects and
// resyncs) with a Synchronize large enough to be split; the StateChange path; a pre-launched
// plugin (fd 3, NRI_PLUGIN_* env, config from conf.d) with the CDI-edits policy.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/sirupsen/logrus"
)

// The runtime's default; the slow-handler scenario sleeps longer than this.
const requestTimeout = 2 * time.Second

var failures int

func check(cond bool, format string, args ...any) bool {
	if !cond {
		failures++
		fmt.Printf("    FAIL: "+format+"\n", args...)
	}
	return cond
}

func must(err error, what string) {
	if err != nil {
		fmt.Printf("FATAL: %s: %v\n", what, err)
		os.Exit(1)
	}
}

// ---- fake runtime around the real adaptation ----------------------------------------------

type fakeRuntime struct {
	a        *adaptation.Adaptation
	mu       sync.Mutex
	pods     []*api.PodSandbox
	ctrs     []*api.Container
	synced   chan int
	starting bool
	pending  []int // synchronized external plugins not yet in the adaptation's plugin list
}

// Metrics: UpdatePluginCount runs right after an external plugin joins the plugin list, which is
// when events reach it (the sync callback returns just before that).
func (r *fakeRuntime) RecordPluginInvocation(string, string, error)      {}
func (r *fakeRuntime) RecordPluginLatency(string, string, time.Duration) {}
func (r *fakeRuntime) RecordPluginAdjustments(string, string, *api.ContainerAdjustment, int, int) {
}
func (r *fakeRuntime) UpdatePluginCount(int) {
	r.mu.Lock()
	pending := r.pending
	r.pending = nil
	r.mu.Unlock()
	for _, n := range pending {
		r.synced <- n
	}
}

type recorder struct {
	mu       sync.Mutex
	warnings []string
}

func (r *recorder) PluginWarning(_ context.Context, d adaptation.Deprecation, plugin, details string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, fmt.Sprintf("%s %s %s", d, plugin, details))
}

func newRuntime(dir, socket string, pods []*api.PodSandbox, ctrs []*api.Container,
	opts ...adaptation.Option) *fakeRuntime {
	r := &fakeRuntime{pods: pods, ctrs: ctrs, synced: make(chan int, 16)}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		r.mu.Lock()
		pods, ctrs := r.pods, r.ctrs
		r.mu.Unlock()
		start := time.Now()
		if _, err := cb(ctx, pods, ctrs); err != nil {
			return err
		}
		if len(ctrs) > 100 && !r.starting {
			fmt.Printf("    synchronized %d pods / %d containers in %v\n", len(pods), len(ctrs), time.Since(start))
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.starting {
			r.synced <- len(ctrs)
		} else {
			r.pending = append(r.pending, len(ctrs))
		}
		return nil
	}
	updateFn := func(_ context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		for _, u := range updates {
			select {
			case unsolicited <- u:
			default:
			}
		}
		return nil, nil
	}
	base := []adaptation.Option{
		adaptation.WithSocketPath(socket),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		adaptation.WithMetrics(r),
	}
	a, err := adaptation.New("containerd", "v2.4.0", syncFn, updateFn, append(base, opts...)...)
	must(err, "adaptation.New")
	r.a = a
	return r
}

// start starts the adaptation and consumes the synchronization of its pre-launched plugins
// (which happens, possibly with no plugin at all, inside Start).
func (r *fakeRuntime) start(what string) {
	r.mu.Lock()
	r.starting = true
	r.mu.Unlock()
	must(r.a.Start(), what)
	r.mu.Lock()
	r.starting = false
	r.mu.Unlock()
	r.waitSync(what + " (pre-launched sync)")
}

func (r *fakeRuntime) waitSync(what string) (int, bool) {
	select {
	case n := <-r.synced:
		return n, true
	case <-time.After(15 * time.Second):
		check(false, "%s: no plugin synchronized within 15s", what)
		return 0, false
	}
}

// ---- a unix socket proxy, so that a "runtime restart" really drops the plugin's socket -----

type proxy struct {
	l      net.Listener
	mu     sync.Mutex
	target string
	conns  []net.Conn
}

func newProxy(path, target string) *proxy {
	os.Remove(path)
	l, err := net.Listen("unix", path)
	must(err, "proxy listen")
	p := &proxy{l: l, target: target}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			target := p.target
			p.mu.Unlock()
			up, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close(); c.Close() }()
			go func() { io.Copy(c, up); up.Close(); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) restart(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.target = target
}

// ---- objects ------------------------------------------------------------------------------

func pod(uid string, annotations map[string]string) *api.PodSandbox {
	if annotations == nil {
		annotations = map[string]string{}
	}
	return &api.PodSandbox{
		Id: "sb-" + uid, Uid: uid, Name: "pod-" + uid, Namespace: "default",
		Annotations: annotations, Labels: map[string]string{},
		Linux: &api.LinuxPodSandbox{},
	}
}

// gpuPods are the pods claimsJSON prepares claim-gpu for; metaPods the pods of the claims with
// many metadata mounts.
var (
	gpuPods  = map[string]bool{"pod-gpu": true, "pod-slow": true, "pod-after-restart": true, "pod-legacy": true, "pod-pre": true, "pod-bench": true}
	metaPods = map[string]string{"pod-4k": "claim-40", "pod-1m": "claim-7000", "pod-broken": "claim-broken"}
)

// claimMarker is the environment entry devlet's CDI device for the first device of a claim
// carries (state/container_marker.h): the runtime copies it into the containers the kubelet gives
// that CDI device, and devlet reads it back to know which claims a container names.
func claimMarker(uid, request, pool, device string) string {
	name := []byte("DEVLET_CLAIM_" + strings.ToUpper(uid) + "_0")
	for i := len("DEVLET_CLAIM_"); i < len(name); i++ {
		if c := name[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			name[i] = '_'
		}
	}
	return fmt.Sprintf("%s=claim=%s request=%s device=%s/%s", name, uid, request, pool, device)
}

// container is a container of pod p; the one named "app" names the pod's claim in its resources:
// the kubelet gave it the claim's CDI devices, so it carries their marker.
func container(p *api.PodSandbox, name string) *api.Container {
	env := []string{"PATH=/usr/bin:/bin"}
	if name == "app" && gpuPods[p.Uid] {
		env = append(env, claimMarker("claim-gpu", "gpu", "node", "gpu1"))
	} else if claim := metaPods[p.Uid]; name == "app" && claim != "" {
		env = append(env, claimMarker(claim, "meta", "node", "meta-0"))
	}
	return &api.Container{
		Id: p.Id + "-" + name, PodSandboxId: p.Id, Name: name,
		State:       api.ContainerState_CONTAINER_CREATED,
		Labels:      map[string]string{},
		Annotations: map[string]string{},
		Env:         env,
		Linux: &api.LinuxContainer{
			Resources: &api.LinuxResources{
				Cpu:    &api.LinuxCPU{Cpus: "0-7", Mems: "0-1"},
				Memory: &api.LinuxMemory{},
			},
		},
	}
}

func report() map[string]string { return map[string]string{"devlet.test/report": "1"} }

// claims written for the plugin (nri-plugin's ParseClaimsJson format).
func claimsJSON(dir string) string {
	gpu := map[string]any{
		"uid": "claim-gpu", "namespace": "default", "name": "gpu",
		"devices": []any{map[string]any{
			"request": "gpu", "driver": "gpu.devlet.dev", "pool": "node", "device": "gpu1",
			"cdiDevices": []string{"devlet.dev/gpu=gpu1"}, "numaNodes": []int{1},
			"edits": map[string]any{
				"env":         []string{"DEVLET_GPU=gpu1"},
				"deviceNodes": []any{map[string]any{"path": "/dev/devlet-gpu1", "type": "c", "major": 240, "minor": 1}},
				"mounts": []any{map[string]any{"hostPath": "/opt/devlet/lib", "containerPath": "/usr/lib/devlet",
					"options": []string{"ro", "bind"}}},
				"hooks": []any{map[string]any{"hookName": "createContainer", "path": "/usr/bin/true", "args": []string{"true"}}},
			},
		}},
		"metadataMounts": []any{map[string]any{"hostPath": "/var/run/devlet/claim-gpu.json",
			"containerPath": "/var/run/devlet/gpu.json"}},
	}
	mounts := func(n int) []any {
		out := []any{}
		for i := 0; i < n; i++ {
			out = append(out, map[string]any{
				"hostPath":      fmt.Sprintf("/var/run/devlet/claims/%06d/%s.json", i, strings.Repeat("m", 60)),
				"containerPath": fmt.Sprintf("/var/run/devlet/m/%06d.json", i)})
		}
		return out
	}
	withMounts := func(n int) []any {
		return []any{map[string]any{"uid": fmt.Sprintf("claim-%d", n), "namespace": "default",
			"name": "meta", "metadataMounts": mounts(n),
			"devices": []any{map[string]any{"request": "meta", "pool": "node", "device": "meta-0"}}}}
	}
	all := map[string]any{
		"pod-gpu": []any{gpu}, "pod-slow": []any{gpu}, "pod-after-restart": []any{gpu},
		"pod-legacy": []any{gpu}, "pod-pre": []any{gpu}, "pod-bench": []any{gpu},
		"pod-4k": withMounts(40), "pod-1m": withMounts(7000),
		// Prepared, but what it gives containers cannot be resolved now (the node view's error).
		"pod-broken": []any{map[string]any{"uid": "claim-broken", "namespace": "default", "name": "broken",
			"error":   "its CDI spec /var/run/cdi/k8s.devlet.io-claim_claim-broken.json cannot be read",
			"devices": []any{map[string]any{"request": "meta", "pool": "node", "device": "meta-0"}}}},
	}
	data, err := json.Marshal(all)
	must(err, "claims json")
	path := filepath.Join(dir, "claims.json")
	must(os.WriteFile(path, data, 0o644), "write claims")
	return path
}

// ---- the plugins --------------------------------------------------------------------------

func startPlugin(bin string, args ...string) *exec.Cmd {
	if v := os.Getenv("DEVLET_NRI_PLUGIN_V"); v != "" {
		args = append(args, "-v", v)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	must(cmd.Start(), "start plugin")
	return cmd
}

func stopPlugin(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// goPlugin is a containerd/nri stub plugin: in tests it shares containers with devlet (merged
// adjustments); in the benchmark it makes devlet's adjustment, for comparison.
type goPlugin struct{ bench bool }

func (p *goPlugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adjust := &api.ContainerAdjustment{}
	if p.bench {
		adjust.AddCDIDevice(&api.CDIDevice{Name: "devlet.dev/gpu=gpu1"})
		adjust.AddMount(&api.Mount{Destination: "/var/run/devlet/gpu.json", Source: "/var/run/devlet/claim-gpu.json",
			Type: "bind", Options: []string{"bind", "ro"}})
		adjust.SetLinuxCPUSetCPUs("4-7")
		adjust.SetLinuxCPUSetMems("1")
		return adjust, nil, nil
	}
	adjust.AddAnnotation("go.devlet.test/seen", pod.Uid)
	adjust.AddEnv("FROM_GO", "1")
	return adjust, nil, nil
}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: nri-harness test|bench --plugin PATH [--n N] [--baseline PATH]")
	}
	if len(os.Args) < 2 {
		flag.Usage()
		os.Exit(2)
	}
	mode := os.Args[1]
	if mode == "goplugin" {
		goPluginMain(os.Args[2:])
		return
	}
	if mode == "node" || mode == "node-gates" {
		adaptation.SetPluginRegistrationTimeout(5 * time.Second)
		adaptation.SetPluginRequestTimeout(requestTimeout)
		logrus.SetLevel(logrus.ErrorLevel)
		if mode == "node" {
			nodeMain(os.Args[2:])
		} else {
			nodeGatesMain(os.Args[2:])
		}
		if failures > 0 {
			fmt.Printf("%d check(s) failed\n", failures)
			os.Exit(1)
		}
		fmt.Println("PASS")
		return
	}
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	plugin := fs.String("plugin", "", "devlet-nri-test-plugin binary")
	n := fs.Int("n", 5000, "benchmark iterations")
	baseline := fs.String("baseline", "", "bench: another devlet-nri-test-plugin (e.g. an older build) measured in the same run")
	verbose := fs.Bool("v", false, "adaptation logs")
	fs.Parse(os.Args[2:])
	if *plugin == "" {
		flag.Usage()
		os.Exit(2)
	}
	if !*verbose {
		logrus.SetLevel(logrus.ErrorLevel)
	}
	_ = nrilog.Get
	abs, err := filepath.Abs(*plugin)
	must(err, "plugin path")
	dir, err := os.MkdirTemp("/tmp", "nri-h-")
	must(err, "tempdir")
	defer os.RemoveAll(dir)
	must(os.MkdirAll(filepath.Join(dir, "plugins"), 0o755), "mkdir")
	must(os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755), "mkdir")
	adaptation.SetPluginRegistrationTimeout(5 * time.Second)
	adaptation.SetPluginRequestTimeout(requestTimeout)

	switch mode {
	case "test":
		runTests(abs, dir)
	case "bench":
		base := ""
		if *baseline != "" {
			base, err = filepath.Abs(*baseline)
			must(err, "baseline path")
		}
		runBench(abs, base, dir, *n)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if failures > 0 {
		fmt.Printf("%d check(s) failed\n", failures)
		os.Exit(1)
	}
	fmt.Println("PASS")
}

func findMount(adjust *api.ContainerAdjustment, dest string) *api.Mount {
	for _, m := range adjust.GetMounts() {
		if m.Destination == dest {
			return m
		}
	}
	return nil
}

func cdiNames(adjust *api.ContainerAdjustment) []string {
	var out []string
	for _, d := range adjust.GetCDIDevices() {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

func envOf(adjust *api.ContainerAdjustment) map[string]string {
	out := map[string]string{}
	for _, kv := range adjust.GetEnv() {
		out[kv.Key] = kv.Value
	}
	return out
}

func create(r *fakeRuntime, p *api.PodSandbox, c *api.Container) (*api.CreateContainerResponse, error) {
	ctx := context.Background()
	rsp, err := r.a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: p, Container: c})
	if err == nil {
		r.mu.Lock()
		r.ctrs = append(r.ctrs, c)
		r.mu.Unlock()
	}
	return rsp, err
}

func scenario(name string) { fmt.Printf("--- %s\n", name) }

// unsolicited receives the updates plugins send with Runtime.UpdateContainers.
var unsolicited = make(chan *api.ContainerUpdate, 16)

func runTests(bin, dir string) {
	ctx := context.Background()
	claims := claimsJSON(dir)
	adaptationSocket := filepath.Join(dir, "nri-1.sock")
	pluginSocket := filepath.Join(dir, "p.sock")
	px := newProxy(pluginSocket, adaptationSocket)

	// A Go stub plugin at index 05 next to devlet at 10.
	rt := newRuntime(dir, adaptationSocket, nil, nil)
	rt.start("adaptation start")

	scenario("external plugin registers, is configured and synchronized")
	devlet := startPlugin(bin, "--socket", pluginSocket, "--claims", claims, "--numa-cpus", "0=0-3;1=4-7")
	defer func() { stopPlugin(devlet) }()
	rt.waitSync("devlet external")
	goSocket := adaptationSocket
	gostub := startGoPlugin("gostub", "05", goSocket, false)
	rt.waitSync("go stub")

	scenario("RunPodSandbox / CreateContainer: merged adjustments of devlet and the Go plugin")
	p := pod("pod-gpu", report())
	must(rt.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: p}), "RunPodSandbox")
	app := container(p, "app")
	rsp, err := create(rt, p, app)
	if check(err == nil, "CreateContainer: %v", err) {
		adj := rsp.Adjust
		check(fmt.Sprint(cdiNames(adj)) == "[devlet.dev/gpu=gpu1]", "CDI devices %v", cdiNames(adj))
		m := findMount(adj, "/var/run/devlet/gpu.json")
		check(m != nil && m.Source == "/var/run/devlet/claim-gpu.json" && strings.Join(m.Options, ",") == "bind,ro",
			"metadata mount %v", m)
		cpu := adj.GetLinux().GetResources().GetCpu()
		check(cpu.GetCpus() == "4-7" && cpu.GetMems() == "1", "cpuset %q mems %q", cpu.GetCpus(), cpu.GetMems())
		check(adj.Annotations["devlet.test/events"] == "RunPodSandbox", "events %q", adj.Annotations["devlet.test/events"])
		check(adj.Annotations["go.devlet.test/seen"] == "pod-gpu", "go plugin annotation missing: %v", adj.Annotations)
		check(envOf(adj)["FROM_GO"] == "1", "go plugin env missing: %v", adj.GetEnv())
		check(len(rsp.Update) == 0, "updates %v", rsp.Update)
	}
	sidecar := container(p, "sidecar")
	rsp, err = create(rt, p, sidecar)
	if check(err == nil, "CreateContainer sidecar: %v", err) {
		check(len(cdiNames(rsp.Adjust)) == 0 && rsp.Adjust.GetLinux().GetResources().GetCpu().GetCpus() == "",
			"sidecar got devlet adjustments: %v", rsp.Adjust)
	}

	scenario("UpdateContainer: devlet re-asserts its cpuset over the kubelet's")
	urs, err := rt.a.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: p, Container: app,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-7"}, Memory: &api.LinuxMemory{}}})
	if check(err == nil && urs != nil, "UpdateContainer: %v %v", urs, err) {
		found := false
		for _, u := range urs.Update {
			if u.ContainerId == app.Id {
				found = u.GetLinux().GetResources().GetCpu().GetCpus() == "4-7" &&
					u.GetLinux().GetResources().GetCpu().GetMems() == "1"
			}
		}
		check(found, "no update keeping cpus 4-7 for %s: %v", app.Id, urs.Update)
	}

	scenario("UpdateContainers (unsolicited) reaches a runtime with NRI >= v0.12.1")
	pu := pod("pod-upd", map[string]string{"devlet.test/update-containers": "1"})
	must(rt.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pu}), "RunPodSandbox upd")
	cu := container(pu, "app")
	rsp, err = create(rt, pu, cu)
	if check(err == nil, "CreateContainer upd: %v", err) {
		got := rsp.Adjust.Annotations["devlet.test/update-containers"]
		check(got == "ok" || got == "pending", "UpdateContainers on v0.12.5: %q", got)
		select {
		case u := <-unsolicited:
			check(u.ContainerId == cu.Id && u.GetLinux().GetResources().GetCpu().GetShares().GetValue() == 1234,
				"unsolicited update %v", u)
		case <-time.After(5 * time.Second):
			check(false, "no UpdateContainers reached the runtime within 5s")
		}
	}

	scenario("StopContainer / RemoveContainer / StopPodSandbox / RemovePodSandbox")
	_, err = rt.a.StopContainer(ctx, &api.StopContainerRequest{Pod: p, Container: app})
	check(err == nil, "StopContainer: %v", err)
	check(rt.a.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: p, Container: app}) == nil, "RemoveContainer")
	check(rt.a.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: p}) == nil, "StopPodSandbox")
	check(rt.a.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: p}) == nil, "RemovePodSandbox")

	scenario("an unknown pod: no adjustment from devlet, no error")
	u := pod("never-prepared", nil)
	rsp, err = create(rt, u, container(u, "app"))
	if check(err == nil, "CreateContainer unknown pod: %v", err) {
		check(len(cdiNames(rsp.Adjust)) == 0 && len(rsp.Adjust.GetMounts()) == 0, "unexpected adjustment %v", rsp.Adjust)
	}

	scenario("fail closed: the container naming a claim devlet cannot resolve is not created; the claim is named")
	pb := pod("pod-broken", nil)
	_, err = create(rt, pb, container(pb, "app"))
	check(err != nil && strings.Contains(err.Error(), "claim default/broken") &&
		strings.Contains(err.Error(), "cannot be read"), "CreateContainer naming the broken claim: %v", err)
	rsp, err = create(rt, pb, container(pb, "init"))
	if check(err == nil, "CreateContainer of the init container, which names no claim: %v", err) {
		check(len(cdiNames(rsp.Adjust)) == 0 && len(rsp.Adjust.GetMounts()) == 0, "init container adjusted: %v", rsp.Adjust)
	}
	intruder := container(pb, "intruder")
	intruder.Env = append(intruder.Env, claimMarker("claim-gpu", "gpu", "node", "gpu1"))
	_, err = create(rt, pb, intruder)
	check(err != nil && strings.Contains(err.Error(), "claim claim-gpu") &&
		strings.Contains(err.Error(), "has not prepared that claim for this pod"),
		"CreateContainer naming a claim of another pod: %v", err)

	scenario("messages above 4 KiB and around 1 MiB, both directions")
	p4 := pod("pod-4k", map[string]string{"big": strings.Repeat("x", 5000)})
	rsp, err = create(rt, p4, container(p4, "app"))
	if check(err == nil, "CreateContainer 4k: %v", err) {
		check(len(rsp.Adjust.GetMounts()) == 40, "4k: %d mounts", len(rsp.Adjust.GetMounts()))
	}
	p1m := pod("pod-1m", map[string]string{"big": strings.Repeat("y", 1<<20)})
	rsp, err = create(rt, p1m, container(p1m, "app"))
	if check(err == nil, "CreateContainer 1 MiB: %v", err) {
		check(len(rsp.Adjust.GetMounts()) == 7000, "1m: %d mounts", len(rsp.Adjust.GetMounts()))
	}
	// Keep the runtime state small for the next syncs.
	rt.mu.Lock()
	rt.ctrs = nil
	rt.mu.Unlock()

	scenario("a handler slower than the request timeout: plugin dropped, creation proceeds, plugin reconnects")
	slow := pod("pod-slow", map[string]string{"devlet.test/create-delay-ms": "3000"})
	start := time.Now()
	rsp, err = create(rt, slow, container(slow, "app"))
	if check(err == nil, "CreateContainer slow: %v", err) {
		check(len(cdiNames(rsp.Adjust)) == 0, "slow plugin's adjustment should be missing: %v", rsp.Adjust)
		check(time.Since(start) < 3*requestTimeout, "slow create took %v", time.Since(start))
	}
	dropped := time.Now()
	rt.waitSync("devlet reconnect after timeout")
	// The handler still sleeps ~1 s more: reconnection must not wait for it.
	check(time.Since(dropped) < 900*time.Millisecond, "reconnection took %v", time.Since(dropped))
	after := pod("pod-after-restart", report())
	rsp, err = create(rt, after, container(after, "app"))
	if check(err == nil, "CreateContainer after reconnect: %v", err) {
		check(fmt.Sprint(cdiNames(rsp.Adjust)) == "[devlet.dev/gpu=gpu1]", "after reconnect CDI %v", cdiNames(rsp.Adjust))
		check(rsp.Adjust.Annotations["devlet.test/registrations"] == "2", "registrations %q",
			rsp.Adjust.Annotations["devlet.test/registrations"])
	}

	scenario("runtime restart: plugin reconnects and resyncs; the sync is split (> 4 MiB)")
	var bigPods []*api.PodSandbox
	var bigCtrs []*api.Container
	for i := 0; i < 250; i++ {
		bp := pod(fmt.Sprintf("sync-%d", i), nil)
		bigPods = append(bigPods, bp)
		for j := 0; j < 10; j++ {
			c := container(bp, fmt.Sprintf("c%d", j))
			c.State = api.ContainerState_CONTAINER_RUNNING
			c.Annotations["pad"] = strings.Repeat("z", 2048)
			bigCtrs = append(bigCtrs, c)
		}
	}
	stopGoPlugin(gostub)
	rt.a.Stop()
	adaptationSocket2 := filepath.Join(dir, "nri-2.sock")
	rt2 := newRuntime(dir, adaptationSocket2, bigPods, bigCtrs)
	rt2.start("adaptation 2 start")
	px.restart(adaptationSocket2)
	if n, ok := rt2.waitSync("devlet after restart"); ok {
		check(n == 2500, "synced %d containers", n)
	}
	app2 := container(after, "app")
	app2.Id += "-2"
	rsp, err = create(rt2, after, app2)
	if check(err == nil, "CreateContainer after restart: %v", err) {
		check(fmt.Sprint(cdiNames(rsp.Adjust)) == "[devlet.dev/gpu=gpu1]", "after restart CDI %v", cdiNames(rsp.Adjust))
		check(rsp.Adjust.Annotations["devlet.test/registrations"] == "3", "registrations %q",
			rsp.Adjust.Annotations["devlet.test/registrations"])
		check(rsp.Adjust.Annotations["devlet.test/synced"] == "2500", "plugin saw %q synced containers",
			rsp.Adjust.Annotations["devlet.test/synced"])
	}
	rt2.a.Stop()
	px.restart(filepath.Join(dir, "nowhere.sock"))
	stopPlugin(devlet)
	devlet = nil

	scenario("StateChange path: a plugin without dedicated event rpcs still sees pod events")
	rec := &recorder{}
	legacySocket := filepath.Join(dir, "nri-3.sock")
	rt3 := newRuntime(dir, legacySocket, nil, nil, adaptation.WithDeprecationRecorder(rec))
	rt3.start("adaptation 3 start")
	legacy := startPlugin(bin, "--socket", legacySocket, "--claims", claims, "--numa-cpus", "0=0-3;1=4-7",
		"--state-change-only", "--idx", "20")
	rt3.waitSync("legacy plugin")
	lp := pod("pod-legacy", report())
	check(rt3.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: lp}) == nil, "RunPodSandbox legacy")
	rsp, err = create(rt3, lp, container(lp, "app"))
	if check(err == nil, "CreateContainer legacy: %v", err) {
		check(rsp.Adjust.Annotations["devlet.test/events"] == "RunPodSandbox", "legacy events %q",
			rsp.Adjust.Annotations["devlet.test/events"])
	}
	check(rt3.a.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: lp}) == nil, "StopPodSandbox legacy")
	check(rt3.a.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: lp}) == nil, "RemovePodSandbox legacy")
	rec.mu.Lock()
	check(len(rec.warnings) > 0 && strings.Contains(strings.Join(rec.warnings, ";"), "StateChange"),
		"no StateChange deprecation recorded: %v", rec.warnings)
	rec.mu.Unlock()
	rt3.a.Stop()
	stopPlugin(legacy)

	scenario("failure policy fail_request + keep_connected: a timeout fails the creation, plugin stays")
	strictSocket := filepath.Join(dir, "nri-5.sock")
	rt5 := newRuntime(dir, strictSocket, nil, nil)
	rt5.start("adaptation 5 start")
	strict := startPlugin(bin, "--socket", strictSocket, "--claims", claims, "--numa-cpus", "0=0-3;1=4-7",
		"--fail-request", "--keep-connected", "--idx", "40")
	rt5.waitSync("strict plugin")
	sp := pod("pod-slow", map[string]string{"devlet.test/create-delay-ms": "3000"})
	_, err = create(rt5, sp, container(sp, "app"))
	check(err != nil && strings.Contains(err.Error(), "40-devlet"), "slow create with fail_request: %v", err)
	sa := pod("pod-after-restart", report())
	rsp, err = create(rt5, sa, container(sa, "app"))
	if check(err == nil, "CreateContainer after the timeout: %v", err) {
		check(fmt.Sprint(cdiNames(rsp.Adjust)) == "[devlet.dev/gpu=gpu1]", "still connected? CDI %v", cdiNames(rsp.Adjust))
		check(rsp.Adjust.Annotations["devlet.test/registrations"] == "1", "registrations %q",
			rsp.Adjust.Annotations["devlet.test/registrations"])
	}
	rt5.a.Stop()
	stopPlugin(strict)

	scenario("pre-launched plugin: fd 3, NRI_PLUGIN_* environment, config from conf.d, CDI edits policy")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --cdi-policy edits --numa-cpus '0=0-3;1=4-7'\n", bin)
	must(os.WriteFile(filepath.Join(dir, "plugins", "30-devlet"), []byte(script), 0o755), "plugin script")
	data, err := os.ReadFile(claims)
	must(err, "read claims")
	must(os.WriteFile(filepath.Join(dir, "conf.d", "30-devlet.conf"), data, 0o644), "plugin conf")
	rt4 := newRuntime(dir, filepath.Join(dir, "nri-4.sock"), nil, nil, adaptation.WithDisabledExternalConnections())
	rt4.start("adaptation 4 start (launches and syncs the plugin)")
	pp := pod("pod-pre", nil)
	check(rt4.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pp}) == nil, "RunPodSandbox pre")
	rsp, err = create(rt4, pp, container(pp, "app"))
	if check(err == nil, "CreateContainer pre-launched: %v", err) {
		adj := rsp.Adjust
		check(len(cdiNames(adj)) == 0, "edits policy must not send CDI names: %v", cdiNames(adj))
		check(envOf(adj)["DEVLET_GPU"] == "gpu1", "env %v", adj.GetEnv())
		devs := adj.GetLinux().GetDevices()
		check(len(devs) == 1 && devs[0].Path == "/dev/devlet-gpu1" && devs[0].Major == 240 && devs[0].Minor == 1 &&
			devs[0].Type == "c", "devices %v", devs)
		check(findMount(adj, "/usr/lib/devlet") != nil && findMount(adj, "/var/run/devlet/gpu.json") != nil,
			"mounts %v", adj.GetMounts())
		hooks := adj.GetHooks().GetCreateContainer()
		check(len(hooks) == 1 && hooks[0].Path == "/usr/bin/true", "hooks %v", adj.GetHooks())
		check(adj.GetLinux().GetResources().GetCpu().GetCpus() == "4-7", "cpus %q",
			adj.GetLinux().GetResources().GetCpu().GetCpus())
	}
	rt4.a.Stop()
	os.Remove(filepath.Join(dir, "plugins", "30-devlet"))
}
