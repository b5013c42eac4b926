// nri-legacy-harness: devlet's NRI plugin against the runtime side of NRI v0.6.1
// (github.com/containerd/nri/pkg/adaptation as vendored by containerd 1.7.16-1.7.25). That
// runtime knows no dedicated per-event rpcs (pod events, RemoveContainer, ... arrive through
// StateChange), no NRI_version (the plugin infers v0.6.1 from "containerd v1.7.20"), no CDI device
// adjustment (devlet falls back to CDI edits) and rejects subscriptions beyond its 11 events
// (the plugin is told to want all 14 and must restrict itself).
//
//	nri-legacy-harness --plugin path/to/devlet-nri-test-plugin
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
)

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

func main() {
	plugin := flag.String("plugin", "", "devlet-nri-test-plugin binary")
	verbose := flag.Bool("v", false, "adaptation logs")
	flag.Parse()
	if *plugin == "" {
		fmt.Fprintln(os.Stderr, "usage: nri-legacy-harness --plugin PATH")
		os.Exit(2)
	}
	if !*verbose {
		logrus.SetLevel(logrus.ErrorLevel)
	}
	dir, err := os.MkdirTemp("/tmp", "nri-l-")
	must(err, "tempdir")
	defer os.RemoveAll(dir)
	for _, d := range []string{"plugins", "conf.d"} {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755), "mkdir")
	}
	adaptation.SetPluginRegistrationTimeout(5 * time.Second)
	adaptation.SetPluginRequestTimeout(2 * time.Second)

	gpu := map[string]any{
		"uid": "claim-gpu", "namespace": "default", "name": "gpu",
		"devices": []any{map[string]any{
			"request": "gpu", "device": "gpu1", "cdiDevices": []string{"devlet.dev/gpu=gpu1"}, "numaNodes": []int{1},
			"edits": map[string]any{
				"env":         []string{"DEVLET_GPU=gpu1"},
				"deviceNodes": []any{map[string]any{"path": "/dev/devlet-gpu1", "type": "c", "major": 240, "minor": 1}},
				"mounts": []any{map[string]any{"hostPath": "/opt/devlet/lib", "containerPath": "/usr/lib/devlet",
					"options": []string{"ro", "bind"}}},
			},
		}},
		"metadataMounts": []any{map[string]any{"hostPath": "/var/run/devlet/claim-gpu.json",
			"containerPath": "/var/run/devlet/gpu.json"}},
	}
	data, err := json.Marshal(map[string]any{"pod-gpu": []any{gpu}})
	must(err, "claims")
	claims := filepath.Join(dir, "claims.json")
	must(os.WriteFile(claims, data, 0o644), "claims")

	var mu sync.Mutex
	synced := make(chan int, 8)
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := cb(ctx, nil, nil); err != nil {
			return err
		}
		synced <- 0
		return nil
	}
	var unsolicited int
	updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		mu.Lock()
		unsolicited++
		mu.Unlock()
		return nil, nil
	}
	socket := filepath.Join(dir, "nri.sock")
	a, err := adaptation.New("containerd", "v1.7.20", syncFn, updateFn,
		adaptation.WithSocketPath(socket), adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")))
	must(err, "adaptation.New")
	must(a.Start(), "adaptation start") // v0.6.1 syncs only external plugins

	fmt.Println("--- external plugin (wants every event) registers with a v0.6.1 runtime")
	cmd := exec.Command(*plugin, "--socket", socket, "--claims", claims, "--numa-cpus", "0=0-3;1=4-7",
		"--subscribe-all")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	must(cmd.Start(), "start plugin")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	select {
	case <-synced:
	case <-time.After(15 * time.Second):
		check(false, "plugin did not synchronize")
		os.Exit(1)
	}
	time.Sleep(200 * time.Millisecond) // joins the plugin list right after its sync

	ctx := context.Background()
	p := &api.PodSandbox{Id: "sb-gpu", Uid: "pod-gpu", Name: "gpu", Namespace: "default",
		Annotations: map[string]string{"devlet.test/report": "1"}, Labels: map[string]string{},
		Linux: &api.LinuxPodSandbox{}}
	c := &api.Container{Id: "ctr-app", PodSandboxId: p.Id, Name: "app", Labels: map[string]string{},
		// The marker of devlet's CDI device for gpu1 (state/container_marker.h): the container
		// names the claim, so a runtime that applies the kubelet's CDI devices copied it in.
		Annotations: map[string]string{}, Env: []string{"PATH=/bin",
			"DEVLET_CLAIM_CLAIM_GPU_0=claim=claim-gpu request=gpu device=/gpu1"},
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu: &api.LinuxCPU{Cpus: "0-7"}, Memory: &api.LinuxMemory{}}}}

	fmt.Println("--- RunPodSandbox (StateChange) and CreateContainer (CDI edits, cpuset)")
	check(a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: p}) == nil, "RunPodSandbox")
	rsp, err := a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: p, Container: c})
	if check(err == nil, "CreateContainer: %v", err) {
		adj := rsp.Adjust
		env := map[string]string{}
		for _, kv := range adj.GetEnv() {
			env[kv.Key] = kv.Value
		}
		check(env["DEVLET_GPU"] == "gpu1", "env %v", adj.GetEnv())
		devs := adj.GetLinux().GetDevices()
		check(len(devs) == 1 && devs[0].Path == "/dev/devlet-gpu1" && devs[0].Major == 240, "devices %v", devs)
		dests := []string{}
		for _, m := range adj.GetMounts() {
			dests = append(dests, m.Destination)
		}
		check(strings.Join(dests, ",") == "/usr/lib/devlet,/var/run/devlet/gpu.json", "mounts %v", dests)
		cpu := adj.GetLinux().GetResources().GetCpu()
		check(cpu.GetCpus() == "4-7" && cpu.GetMems() == "1", "cpuset %q mems %q", cpu.GetCpus(), cpu.GetMems())
		check(adj.Annotations["devlet.test/events"] == "RunPodSandbox", "pod events via StateChange: %q",
			adj.Annotations["devlet.test/events"])
	}

	fmt.Println("--- UpdateContainer, StartContainer, StopContainer, RemoveContainer, pod teardown")
	urs, err := a.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: p, Container: c,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-7"}, Memory: &api.LinuxMemory{}}})
	if check(err == nil && urs != nil, "UpdateContainer: %v", err) {
		ok := false
		for _, u := range urs.Update {
			ok = ok || (u.ContainerId == c.Id && u.GetLinux().GetResources().GetCpu().GetCpus() == "4-7")
		}
		check(ok, "no re-pinning update: %v", urs.Update)
	}
	check(a.StartContainer(ctx, &api.StartContainerRequest{Pod: p, Container: c}) == nil, "StartContainer")
	_, err = a.StopContainer(ctx, &api.StopContainerRequest{Pod: p, Container: c})
	check(err == nil, "StopContainer: %v", err)
	check(a.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: p, Container: c}) == nil, "RemoveContainer")
	check(a.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: p}) == nil, "StopPodSandbox")
	check(a.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: p}) == nil, "RemovePodSandbox")

	fmt.Println("--- UpdateContainers is never sent to a runtime older than NRI v0.12.1 (it may deadlock)")
	pu := &api.PodSandbox{Id: "sb-upd", Uid: "pod-upd", Name: "upd", Namespace: "default",
		Annotations: map[string]string{"devlet.test/update-containers": "1"}, Labels: map[string]string{},
		Linux: &api.LinuxPodSandbox{}}
	check(a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pu}) == nil, "RunPodSandbox upd")
	cu := &api.Container{Id: "ctr-upd", PodSandboxId: pu.Id, Name: "app", Labels: map[string]string{},
		Annotations: map[string]string{}, Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu: &api.LinuxCPU{}, Memory: &api.LinuxMemory{}}}}
	rsp, err = a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pu, Container: cu})
	if check(err == nil, "CreateContainer upd: %v", err) {
		got := rsp.Adjust.Annotations["devlet.test/update-containers"]
		check(strings.HasPrefix(got, "refused: ") && strings.Contains(got, "v0.12.1"),
			"UpdateContainers on NRI v0.6.1: %q, want refused naming v0.12.1", got)
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	check(unsolicited == 0, "the runtime received %d UpdateContainers call(s)", unsolicited)
	mu.Unlock()

	fmt.Println("--- the plugin is still connected: a new pod gets its adjustments")
	c2 := &api.Container{Id: "ctr-app-2", PodSandboxId: p.Id, Name: "app", Labels: map[string]string{},
		Annotations: map[string]string{}, Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu: &api.LinuxCPU{}, Memory: &api.LinuxMemory{}}}}
	rsp, err = a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: p, Container: c2})
	if check(err == nil, "CreateContainer 2: %v", err) {
		check(rsp.Adjust.Annotations["devlet.test/events"] == "RunPodSandbox,StopPodSandbox,RemovePodSandbox",
			"events %q", rsp.Adjust.Annotations["devlet.test/events"])
		check(rsp.Adjust.Annotations["devlet.test/registrations"] == "1", "registrations %q",
			rsp.Adjust.Annotations["devlet.test/registrations"])
	}
	a.Stop()
	if failures > 0 {
		fmt.Printf("%d check(s) failed\n", failures)
		os.Exit(1)
	}
	fmt.Println("PASS")
}
