package main

// `nri-harness node-gates`: what devlet-node's --feature-gates change, through the real sockets.
// devlet-node runs on the simulated GPU node in manifest mode, kubelet-harness (k8s.io/kubelet's
// clients) prepares a claim over the DRA socket, and this harness (containerd/nri's adaptation)
// creates the containers that name it.
//
//	nri-harness node-gates --plugin devlet-node --kubelet kubelet-harness --simnode devlet-simnode \
//	    --topology dgx-2s-8gpu-2nic.xml --examples examples/node
//
// KEP-5517 (DRANodeAllocatableResources): a claim of 4 CPUs and 8Gi from cpu-numa0 (consumable
// capacity, as the scheduler allocates it).
//   - gate on: the CPU devices publish nodeAllocatableResources (cpu <- cpus x 1, memory <- memory
//     x 1), the GPUs publish none; the kubelet then sizes the container itself (its own limit + the
//     claim's amount; no limit stays unlimited) and devlet's adjustment leaves the CFS quota and
//     memory limit as the kubelet set them, pinning only the cpuset to NUMA node 0.
//   - gate off: no nodeAllocatableResources in the slices, and devlet enforces the allocation
//     itself (quota 4 CPUs, memory limit 8Gi) on a container without limits.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/api"
)

const (
	cpuClaimUID = "5e0c1a10-0000-4000-8000-0000000c9001"
	cpuPodUID   = "6f1c2a10-0000-4000-8000-00000000c001"
	cpuShareID  = "3f6e2b1c-9a4d-4e7f-8c21-5b0d9e8a7c61"
	gib         = int64(1) << 30
)

func nodeGatesMain(args []string) {
	var f nodeFlags
	fs := flag.NewFlagSet("node-gates", flag.ExitOnError)
	fs.StringVar(&f.node, "plugin", "", "devlet-node binary")
	fs.StringVar(&f.kubelet, "kubelet", "", "kubelet-harness binary (integration/kubelet)")
	fs.StringVar(&f.simnode, "simnode", "", "devlet-simnode binary")
	fs.StringVar(&f.topology, "topology", "", "hwloc XML of the simulated node (dgx-2s-8gpu-2nic.xml)")
	fs.StringVar(&f.examples, "examples", "", "examples/node (manifests/, profiles.yaml)")
	fs.BoolVar(&f.keep, "keep", false, "keep the temp dirs")
	var vendorSpec string
	fs.StringVar(&vendorSpec, "vendor-spec", "", "a vendor CDI spec (cdi/tests/testdata/vendor/good/nvidia.yaml)")
	fs.Parse(args)
	if f.node == "" || f.kubelet == "" || f.simnode == "" || f.topology == "" || f.examples == "" {
		fmt.Fprintln(os.Stderr, "usage: nri-harness node-gates --plugin devlet-node --kubelet kubelet-harness "+
			"--simnode devlet-simnode --topology XML --examples DIR [--keep]")
		os.Exit(2)
	}
	nodeAllocatableCase(f, true)
	nodeAllocatableCase(f, false)
	publishGatesCase(f, true)
	publishGatesCase(f, false)
	if vendorSpec != "" {
		vendorCdiCase(f, vendorSpec)
	}
}

// vendorProfiles: the GPUs name the vendor's CDI devices by index (issue 13 §2 gap 6).
const vendorProfiles = `profiles:
- name: gpu
  kind: gpu
  match: {vendorIDs: ["0x10de"]}
  cdiDevices: ["nvidia.com/gpu={index}"]
- name: nic
  kind: nic
- name: cpu
  kind: cpu
`

// vendorCdiCase: devlet-node with --vendor-cdi-spec-dirs holding an NVIDIA-toolkit-style spec
// (cdi/tests/testdata/vendor/good/nvidia.yaml, devices "0", "1", UUIDs, "all"). The kubelet's
// prepare of ml/training (gpu-0, gpu-1, nic-0) returns nvidia.com/gpu=0 and =1 beside devlet's
// own CDI devices, and the trainer's CreateContainer names them to the runtime. A vendor spec that
// does not parse, or one that lacks the device, fails the prepare with an error naming the file
// or the device: the pod never gets a container without the vendor's libraries.
func vendorCdiCase(f nodeFlags, spec string) {
	ctx := context.Background()
	scenario("vendor CDI devices: nvidia.com/gpu={index} from the vendor's own spec")
	profiles := filepath.Join(os.TempDir(), fmt.Sprintf("nri-vendor-profiles-%d.yaml", os.Getpid()))
	must(os.WriteFile(profiles, []byte(vendorProfiles), 0o644), "write profiles")
	defer os.Remove(profiles)
	vendorDir, err := os.MkdirTemp("/tmp", "nri-vendor-cdi-")
	must(err, "vendor dir")
	defer os.RemoveAll(vendorDir)
	good, err := os.ReadFile(spec)
	must(err, "read vendor spec")
	must(os.WriteFile(filepath.Join(vendorDir, "nvidia.yaml"), good, 0o644), "write vendor spec")
	n := startGatedNode(f, "vendor", []string{"--profiles", profiles, "--vendor-cdi-spec-dirs",
		"/nonexistent/etc-cdi," + vendorDir}, func(manifests string) {
		data, err := os.ReadFile(filepath.Join(f.examples, "manifests", "pod-training.yaml"))
		must(err, "read pod")
		must(os.WriteFile(filepath.Join(manifests, "pod-training.yaml"), data, 0o644), "write pod")
		writeTrainingClaim(f.examples, manifests)
	})
	defer n.stop(f.keep)
	ref := "ml/training/" + trainingUID
	out := runKubelet(f.kubelet, "--registry-dir", n.registry, "--claim", ref)
	var prepared struct {
		Claims map[string]struct {
			Devices []struct {
				DeviceName   string   `json:"deviceName"`
				CdiDeviceIds []string `json:"cdiDeviceIds"`
			} `json:"devices"`
		} `json:"claims"`
	}
	must(json.Unmarshal(out, &prepared), "decode kubelet-harness output")
	byDevice := map[string][]string{}
	var ids []string
	for _, d := range prepared.Claims[trainingUID].Devices {
		byDevice[d.DeviceName] = d.CdiDeviceIds
		ids = append(ids, d.CdiDeviceIds...)
	}
	check(contains(byDevice["gpu-0"], "nvidia.com/gpu=0") && contains(byDevice["gpu-1"], "nvidia.com/gpu=1") &&
		!contains(byDevice["gpu-0"], "nvidia.com/gpu=1"), "CDI ids per device %v", byDevice)
	for _, id := range byDevice["nic-0"] {
		check(!strings.HasPrefix(id, "nvidia.com/"), "nic-0 got vendor CDI device %s", id)
	}
	n.rt.waitSync("devlet-node (vendor)")
	p := pod(trainingPod, nil)
	p.Name, p.Namespace = "training", "ml"
	must(n.rt.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: p}), "RunPodSandbox")
	var own []string
	for _, id := range ids {
		if !strings.HasPrefix(id, "nvidia.com/") {
			own = append(own, id)
		}
	}
	trainer := container(p, "trainer")
	trainer.Env = append(trainer.Env, cdiEnv(n.cdiRoot, uniqueSorted(own))...)
	rsp, err := create(n.rt, p, trainer)
	if check(err == nil, "CreateContainer trainer: %v", err) {
		names := cdiNames(rsp.GetAdjust())
		check(contains(names, "nvidia.com/gpu=0") && contains(names, "nvidia.com/gpu=1"),
			"the trainer's CDI devices %v lack the vendor's", names)
	}
	runKubelet(f.kubelet, "--registry-dir", n.registry, "--unprepare", "--claim", ref)

	scenario("vendor CDI devices: a vendor spec that does not parse fails the prepare, naming the file")
	broken := strings.Replace(string(good), "\ndevices:\n", "\ndevicez: []\ndevices:\n", 1)
	must(os.WriteFile(filepath.Join(vendorDir, "nvidia.yaml"), []byte(broken), 0o644), "write broken spec")
	msg := kubeletError(f.kubelet, "--registry-dir", n.registry, "--claim", ref)
	check(strings.Contains(msg, filepath.Join(vendorDir, "nvidia.yaml")) && strings.Contains(msg, "devicez") &&
		strings.Contains(msg, "nvidia.com/gpu=0") && strings.Contains(msg, "device gpu-0"),
		"prepare with a broken vendor spec: %s", msg)

	scenario("vendor CDI devices: a spec without the device fails the prepare, naming the device")
	must(os.WriteFile(filepath.Join(vendorDir, "nvidia.yaml"),
		[]byte(strings.Replace(string(good), `- name: "0"`, `- name: "9"`, 1)), 0o644), "write spec without 0")
	msg = kubeletError(f.kubelet, "--registry-dir", n.registry, "--claim", ref)
	check(strings.Contains(msg, "nvidia.com/gpu=0") && strings.Contains(msg, "is defined by no spec in") &&
		strings.Contains(msg, "nvidia.com/gpu defines: 1, 9, GPU-"), "prepare without the vendor device: %s", msg)
	left, _ := filepath.Glob(filepath.Join(n.cdiRoot, "*"+trainingUID+"*"))
	check(len(left) == 0, "a failed prepare left CDI files %v", left)
}

// kubeletError runs a prepare that must fail and returns what kubelet-harness said.
func kubeletError(bin string, args ...string) string {
	cmd := exec.Command(bin, append([]string{"kubelet", "--timeout", kubeletLimit.String()}, args...)...)
	out, err := cmd.CombinedOutput()
	check(err != nil, "kubelet-harness %v succeeded: %s", args, out)
	return string(out)
}

// gateProfiles: a GPU in 4 partitions, a consumable NIC that needs no node operation and has
// list attributes, the other GPUs, NICs and CPUs as usual.
const gateProfiles = `profiles:
- name: part
  kind: gpu
  match: {pciAddresses: ["0000:b9:00.0"]}
  sharing: {mode: partitions, partitions: 4}
- name: gpu
  kind: gpu
  match: {vendorIDs: ["0x10de"]}
- name: shared-nic
  kind: nic
  match: {interfaces: [ens2f0np0]}
  sharing: {mode: consumable, bandwidthShare: 10G}
  skipNodeOperations: true
  attributes: {zones: [a, b]}
- name: nic
  kind: nic
- name: cpu
  kind: cpu
`

// publishGatesCase: DRAListTypeAttributes, DRAPartitionableDevicesType and
// DRAOptionalNodeOperations decide what the slices devlet-node writes carry.
func publishGatesCase(f nodeFlags, gate bool) {
	gates := fmt.Sprintf("DRAListTypeAttributes=%v,DRAPartitionableDevicesType=%v,DRAOptionalNodeOperations=%v",
		gate, gate, gate)
	scenario(gates + ": the published slices")
	profiles := filepath.Join(os.TempDir(), fmt.Sprintf("nri-gates-profiles-%d.yaml", os.Getpid()))
	must(os.WriteFile(profiles, []byte(gateProfiles), 0o644), "write profiles")
	defer os.Remove(profiles)
	n := startGatedNode(f, gates, []string{"--feature-gates", gates, "--profiles", profiles},
		func(string) {})
	defer n.stop(f.keep)
	type slice struct {
		Spec struct {
			PartitionTypeAttribute string           `json:"partitionTypeAttribute"`
			SkipNodeOperations     []string         `json:"skipNodeOperations"`
			Devices                []map[string]any `json:"devices"`
		} `json:"spec"`
	}
	files, _ := filepath.Glob(filepath.Join(n.manifests, "resourceslice-*.json"))
	bySlice := map[string]*slice{}       // device -> its slice
	attrs := map[string]map[string]any{} // device -> attributes
	for _, path := range files {
		var s slice
		data, err := os.ReadFile(path)
		if !check(err == nil && json.Unmarshal(data, &s) == nil, "slice %s: %v", path, err) {
			continue
		}
		for _, d := range s.Spec.Devices {
			name := fmt.Sprint(d["name"])
			bySlice[name] = &s
			a, _ := d["attributes"].(map[string]any)
			attrs[name] = a
		}
	}
	if !check(bySlice["part-0"] != nil && bySlice["part-0-part-3"] != nil && bySlice["shared-nic-0"] != nil &&
		bySlice["nic-0"] != nil, "published devices %v", len(bySlice)) {
		return
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if gate {
		check(js(attrs["nic-0"]["rdmaDevices"]) == `{"strings":["mlx5_0"]}`, "nic-0 rdmaDevices %s", js(attrs["nic-0"]["rdmaDevices"]))
		check(js(attrs["shared-nic-0"]["zones"]) == `{"strings":["a","b"]}`, "shared-nic-0 zones %s", js(attrs["shared-nic-0"]["zones"]))
		check(js(attrs["part-0"]["partitionType"]) == `{"string":"memory80Gi-slices4"}` &&
			js(attrs["part-0-part-3"]["partitionType"]) == `{"string":"memory20Gi-slices1"}`,
			"partition types %s / %s", js(attrs["part-0"]["partitionType"]), js(attrs["part-0-part-3"]["partitionType"]))
		check(bySlice["part-0"].Spec.PartitionTypeAttribute == nodeDriver+"/partitionType",
			"partitionTypeAttribute %q", bySlice["part-0"].Spec.PartitionTypeAttribute)
		skip := bySlice["shared-nic-0"]
		check(js(skip.Spec.SkipNodeOperations) == `["*"]` && len(skip.Spec.Devices) == 1,
			"shared-nic-0's slice: skipNodeOperations %v with %d devices", skip.Spec.SkipNodeOperations, len(skip.Spec.Devices))
		check(len(bySlice["nic-0"].Spec.SkipNodeOperations) == 0, "nic-0's slice skips node operations")
	} else {
		for _, name := range []string{"nic-0", "shared-nic-0", "part-0", "part-0-part-3"} {
			for _, a := range []string{"rdmaDevices", "zones", "partitionType"} {
				check(attrs[name][a] == nil, "%s publishes %s with the gates off", name, a)
			}
		}
		check(bySlice["shared-nic-0"] == bySlice["nic-0"] && len(bySlice["nic-0"].Spec.SkipNodeOperations) == 0 &&
			bySlice["part-0"].Spec.PartitionTypeAttribute == "", "slice-level fields with the gates off")
		check(js(attrs["nic-0"]["rdmaDevice"]) == `{"string":"mlx5_0"}`, "nic-0 rdmaDevice %s", js(attrs["nic-0"]["rdmaDevice"]))
	}
}

// gatedNode is one devlet-node process with its directories and its runtime.
type gatedNode struct {
	dir, manifests, cdiRoot, registry string
	rt                                *fakeRuntime
	cmd                               *exec.Cmd
	exited                            chan error
	logPath                           string
}

// startGatedNode prepares a temp dir (simulated sysfs, the example device classes, `manifests`
// written by the caller's callback) and starts devlet-node with `extra` flags; it returns once the
// registration socket exists.
func startGatedNode(f nodeFlags, name string, extra []string, write func(manifests string)) *gatedNode {
	dir, err := os.MkdirTemp("/tmp", "nri-gates-")
	must(err, "tempdir")
	if f.keep {
		fmt.Println("keeping", dir)
	}
	for _, sub := range []string{"plugins", "conf.d", "manifests", "cdi", "registry", "kubelet-plugins"} {
		must(os.MkdirAll(filepath.Join(dir, sub), 0o755), "mkdir")
	}
	n := &gatedNode{dir: dir, manifests: filepath.Join(dir, "manifests"), cdiRoot: filepath.Join(dir, "cdi"),
		registry: filepath.Join(dir, "registry"), logPath: filepath.Join(dir, "devlet-node.log")}
	if out, err := exec.Command(f.simnode, filepath.Join(dir, "sys")).CombinedOutput(); err != nil {
		must(err, "devlet-simnode: "+string(out))
	}
	data, err := os.ReadFile(filepath.Join(f.examples, "manifests", "device-classes.yaml"))
	must(err, "read device classes")
	must(os.WriteFile(filepath.Join(n.manifests, "device-classes.yaml"), data, 0o644), "write classes")
	write(n.manifests)
	n.rt = newRuntime(dir, filepath.Join(dir, "nri.sock"), nil, nil)
	n.rt.start("runtime " + name)
	logFile, err := os.Create(n.logPath)
	must(err, "log file")
	args := append([]string{"--node-name", nodeName, "--driver-name", nodeDriver,
		"--manifests", n.manifests, "--topology-xml", f.topology, "--sysfs-root", filepath.Join(dir, "sys"),
		"--dev-root", simDevRoot, "--cdi-root", n.cdiRoot, "--kubelet-registrar-directory-path", n.registry,
		"--kubelet-plugins-directory-path", filepath.Join(dir, "kubelet-plugins"),
		"--nri-socket", filepath.Join(dir, "nri.sock"), "--cdi-policy", "names",
		"--healthcheck-port", "-1", "-v", "2"}, extra...)
	if !contains(extra, "--profiles") {
		args = append(args, "--profiles", filepath.Join(f.examples, "profiles.yaml"))
	}
	n.cmd = exec.Command(f.node, args...)
	n.cmd.Stdout, n.cmd.Stderr = logFile, logFile
	must(n.cmd.Start(), "start devlet-node")
	n.exited = make(chan error, 1)
	go func() { n.exited <- n.cmd.Wait() }()
	waitFor(func() bool {
		_, err := os.Stat(filepath.Join(n.registry, nodeDriver+"-reg.sock"))
		return err == nil
	}, 30*time.Second, "devlet-node's registration socket ("+name+")", n.exited)
	return n
}

// stop sends SIGTERM, waits, prints the log's tail when checks failed, removes the dir.
func (n *gatedNode) stop(keep bool) {
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-n.exited:
		check(err == nil, "devlet-node exit: %v", err)
	case <-time.After(20 * time.Second):
		check(false, "devlet-node did not exit within 20 s of SIGTERM")
		n.cmd.Process.Kill()
		<-n.exited
	}
	n.rt.a.Stop()
	if failures > 0 {
		data, _ := os.ReadFile(n.logPath)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Printf("--- last lines of devlet-node's log:\n%s\n", strings.Join(lines, "\n"))
	}
	if !keep {
		os.RemoveAll(n.dir)
	}
}

// publishedSliceDevices returns the devices of the slices devlet-node wrote, by name, as JSON
// objects.
func publishedSliceDevices(manifests string) map[string]map[string]any {
	out := map[string]map[string]any{}
	files, _ := filepath.Glob(filepath.Join(manifests, "resourceslice-*.json"))
	for _, path := range files {
		var slice struct {
			Spec struct {
				Devices []map[string]any `json:"devices"`
			} `json:"spec"`
		}
		data, err := os.ReadFile(path)
		if check(err == nil && json.Unmarshal(data, &slice) == nil, "slice %s: %v", path, err) {
			for _, d := range slice.Spec.Devices {
				out[fmt.Sprint(d["name"])] = d
			}
		}
	}
	return out
}

// writeCPUClaim writes the pod cpu/pinned and its claim: 4 CPUs and 8Gi of cpu-numa0, allocated
// and reserved for the pod, as the scheduler leaves it.
func writeCPUClaim(manifests string) {
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pinned","namespace":"cpu","uid":%q},
"spec":{"nodeName":%q,"resourceClaims":[{"name":"cpus","resourceClaimName":"pinned"}],
"containers":[{"name":"app","image":"registry.example.com/app:1","resources":{"claims":[{"name":"cpus"}]}}]}}`,
		cpuPodUID, nodeName)
	claim := fmt.Sprintf(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
"metadata":{"name":"pinned","namespace":"cpu","uid":%q},
"spec":{"devices":{"requests":[{"name":"cpus","exactly":{"deviceClassName":"cpu.devlet.io",
  "capacity":{"requests":{"cpus":"4","memory":"8Gi"}}}}]}},
"status":{"allocation":{"devices":{"results":[{"request":"cpus","driver":%q,"pool":%q,"device":"cpu-numa0",
  "shareID":%q,"consumedCapacity":{"cpus":"4","memory":"8Gi"}}]},
  "nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":[%q]}]}]}},
 "reservedFor":[{"resource":"pods","name":"pinned","uid":%q}]}}`,
		cpuClaimUID, nodeDriver, nodeName, cpuShareID, nodeName, cpuPodUID)
	must(os.WriteFile(filepath.Join(manifests, "pod-cpu-pinned.json"), []byte(pod), 0o644), "write pod")
	must(os.WriteFile(filepath.Join(manifests, "resourceclaim-cpu-pinned.json"), []byte(claim), 0o644), "write claim")
}

// prepareClaim runs the kubelet's NodePrepareResources for one claim and returns its CDI ids.
func prepareClaim(f nodeFlags, registry, ref, uid string) []string {
	out := runKubelet(f.kubelet, "--registry-dir", registry, "--claim", ref)
	var prepared struct {
		Claims map[string]struct {
			Devices []struct {
				CdiDeviceIds []string `json:"cdiDeviceIds"`
			} `json:"devices"`
			Error string `json:"error"`
		} `json:"claims"`
	}
	must(json.Unmarshal(out, &prepared), "decode kubelet-harness output")
	c := prepared.Claims[uid]
	check(c.Error == "", "prepare %s: %s", ref, c.Error)
	var ids []string
	for _, d := range c.Devices {
		ids = append(ids, d.CdiDeviceIds...)
	}
	check(len(ids) > 0, "prepare %s: no CDI ids (%s)", ref, out)
	return uniqueSorted(ids)
}

func nodeAllocatableCase(f nodeFlags, gate bool) {
	ctx := context.Background()
	name := fmt.Sprintf("DRANodeAllocatableResources=%v", gate)
	scenario(name + ": devlet-node publishes, the kubelet prepares 4 CPUs + 8Gi of cpu-numa0")
	n := startGatedNode(f, name, []string{"--feature-gates", name}, writeCPUClaim)
	defer n.stop(f.keep)

	devices := publishedSliceDevices(n.manifests)
	cpu, gpu := devices["cpu-numa0"], devices["gpu-0"]
	if check(cpu != nil && gpu != nil, "published devices %v", keys(devices)) {
		got, _ := json.Marshal(cpu["nodeAllocatableResources"])
		if gate {
			check(string(got) == `{"cpu":{"mapping":{"capacityKey":"cpus","capacityMultiplier":"1"}},`+
				`"memory":{"mapping":{"capacityKey":"memory","capacityMultiplier":"1"}}}`,
				"cpu-numa0 nodeAllocatableResources %s", got)
		} else {
			check(string(got) == "null", "cpu-numa0 publishes nodeAllocatableResources %s with the gate off", got)
		}
		check(gpu["nodeAllocatableResources"] == nil, "gpu-0 publishes nodeAllocatableResources %v",
			gpu["nodeAllocatableResources"])
	}
	ids := prepareClaim(f, n.registry, "cpu/pinned/"+cpuClaimUID, cpuClaimUID)
	n.rt.waitSync("devlet-node (" + name + ")")

	p := pod(cpuPodUID, nil)
	p.Name, p.Namespace = "pinned", "cpu"
	must(n.rt.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: p}), "RunPodSandbox")
	env := cdiEnv(n.cdiRoot, ids)

	// A container with limits of its own (1 CPU, 1Gi). With the gate, the kubelet adds the
	// claim's 4 CPUs and 8Gi to them (KEP-5517): quota 5 CPUs, 9Gi.
	limited := container(p, "limited")
	limited.Env = append(limited.Env, env...)
	quota, limit := int64(100000), 1*gib
	if gate {
		quota, limit = 500000, 9*gib
	}
	limited.Linux.Resources.Cpu = &api.LinuxCPU{Cpus: "0-31", Mems: "0-1", Quota: &api.OptionalInt64{Value: quota},
		Period: &api.OptionalUInt64{Value: 100000}, Shares: &api.OptionalUInt64{Value: 1024}}
	limited.Linux.Resources.Memory = &api.LinuxMemory{Limit: &api.OptionalInt64{Value: limit}}
	rsp, err := create(n.rt, p, limited)
	if check(err == nil, "%s: CreateContainer limited: %v", name, err) {
		res := rsp.GetAdjust().GetLinux().GetResources()
		check(res.GetCpu().GetCpus() == numa0CPUs && res.GetCpu().GetMems() == "0",
			"%s: limited cpuset %q mems %q, want %s / 0", name, res.GetCpu().GetCpus(), res.GetCpu().GetMems(), numa0CPUs)
		// Gate on: the kubelet's 5 CPUs / 9Gi stand. Gate off: the container's own 1 CPU / 1Gi is
		// stricter than the allocation and stands too.
		check(res.GetCpu().GetQuota() == nil && res.GetMemory().GetLimit() == nil,
			"%s: limited container's quota/limit changed: quota %v memory %v (kubelet set %d / %d)",
			name, res.GetCpu().GetQuota(), res.GetMemory().GetLimit(), quota, limit)
	}

	// A container without limits: the kubelet leaves it unlimited either way.
	open := container(p, "open")
	open.Env = append(open.Env, env...)
	open.Linux.Resources.Cpu = &api.LinuxCPU{Cpus: "0-31", Mems: "0-1"}
	rsp, err = create(n.rt, p, open)
	if check(err == nil, "%s: CreateContainer open: %v", name, err) {
		res := rsp.GetAdjust().GetLinux().GetResources()
		check(res.GetCpu().GetCpus() == numa0CPUs, "%s: open cpuset %q", name, res.GetCpu().GetCpus())
		if gate {
			check(res.GetCpu().GetQuota() == nil && res.GetMemory().GetLimit() == nil,
				"%s: devlet sized the open container (quota %v, memory %v) although the kubelet does",
				name, res.GetCpu().GetQuota(), res.GetMemory().GetLimit())
		} else {
			check(res.GetCpu().GetQuota().GetValue() == 400000 && res.GetMemory().GetLimit().GetValue() == 8*gib,
				"%s: open container quota %v memory %v, want devlet's 400000 / 8Gi", name,
				res.GetCpu().GetQuota(), res.GetMemory().GetLimit())
		}
	}
	runKubelet(f.kubelet, "--registry-dir", n.registry, "--unprepare", "--claim", "cpu/pinned/"+cpuClaimUID)
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return uniqueSorted(out)
}
