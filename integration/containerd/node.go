package main

// --node mode: the whole devlet-node agent in front of a real containerd. The node is simulated
// (the 2-socket 8-GPU hwloc topology and devlet-simnode's sysfs tree); its device nodes live
// below a dev root in the temp dir, created by this driver after prepare (as c 1:3, /dev/null's
// numbers: the host has no GPUs), so that containerd's CDI resolution and runc find them. The
// kubelet's side is kubelet-harness (k8s.io/kubelet's generated clients: registration, then
// NodePrepareResources over dra/v1); devlet-node joins containerd's NRI after the registration,
// with the CDI-names policy, so containerd itself resolves devlet's CDI specs.
//
// The trainer names the claim: its CRI config carries the CDI IDs the kubelet got from devlet (as
// the kubelet passes them), so containerd applies them, devlet's markers included; the pod's
// log-shipper sidecar names none and gets none of the claim (devices, metadata, cpuset).
// Checked in the created container's OCI spec and the running process: the GPUs' device nodes
// (/dev/dri/card1, card2) with device-cgroup rules, the CDI environment of each device, the
// KEP-5304 metadata files mounted read-only and readable inside, cpuset.mems of the devices'
// NUMA node; a container of a pod without claims untouched; unprepare removes the CDI specs;
// SIGTERM: devlet-node exits 0.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	simNode     = "sim-node-1"
	trainingUID = "5e0c1a10-0000-4000-8000-0000000c1a02"
	trainingPod = "6f1c2a10-0000-4000-8000-00000000a001" // examples/node/manifests/pod-training.yaml
)

type nodeBins struct{ node, kubelet, simnode, topology, examples string }

func (h *harness) runNode(b nodeBins) {
	d := h.dir
	devRoot := filepath.Join(d, "dev")
	manifests := filepath.Join(d, "manifests")
	registry := filepath.Join(d, "registry")
	for _, sub := range []string{devRoot, manifests, registry, filepath.Join(d, "kubelet-plugins")} {
		os.MkdirAll(sub, 0o755)
	}
	if out, err := exec.Command(b.simnode, filepath.Join(d, "sys")).CombinedOutput(); err != nil {
		h.fatal("devlet-simnode: %v: %s", err, out)
	}
	for _, name := range []string{"device-classes.yaml", "pod-training.yaml"} {
		data, err := os.ReadFile(filepath.Join(b.examples, "manifests", name))
		if err != nil {
			h.fatal("example manifest: %v", err)
		}
		os.WriteFile(filepath.Join(manifests, name), data, 0o644)
	}
	h.writeTrainingClaim(b.examples, manifests)
	h.boot()

	fmt.Println("--- devlet-node on the simulated GPU node, NRI socket of containerd, CDI policy names")
	h.pluginLog = filepath.Join(d, "devlet-node.log")
	logFile, err := os.Create(h.pluginLog)
	if err != nil {
		h.fatal("log: %v", err)
	}
	cmd := exec.Command(b.node, "--node-name", simNode, "--driver-name", "devlet.io",
		"--manifests", manifests, "--topology-xml", b.topology, "--sysfs-root", filepath.Join(d, "sys"),
		"--dev-root", devRoot, "--profiles", filepath.Join(b.examples, "profiles.yaml"),
		"--cdi-root", filepath.Join(d, "cdi"), "--kubelet-registrar-directory-path", registry,
		"--kubelet-plugins-directory-path", filepath.Join(d, "kubelet-plugins"),
		"--nri-socket", filepath.Join(d, "nri.sock"), "--cdi-policy", "names",
		"--healthcheck-port", "0", "-v", "2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		h.fatal("start devlet-node: %v", err)
	}
	h.plugin = cmd

	fmt.Println("--- kubelet-harness: registration, NodePrepareResources of ml/training (gpu-0, gpu-1, nic-0)")
	claimRef := "ml/training/" + trainingUID
	out := h.kubelet(b.kubelet, "--registry-dir", registry, "--claim", claimRef)
	check(strings.Contains(out, `"gpu-0"`) && strings.Contains(out, `"gpu-1"`) &&
		strings.Contains(out, `"nic-0"`), "prepared devices: %s", out)
	// What the kubelet passes containerd for the trainer, which names the claim (every request):
	// the CDI IDs of all its prepared devices.
	var prepared struct {
		Claims map[string]struct {
			Devices []struct {
				CdiDeviceIds []string `json:"cdiDeviceIds"`
			} `json:"devices"`
		} `json:"claims"`
	}
	if err := json.Unmarshal([]byte(out), &prepared); err != nil {
		h.fatal("kubelet-harness output: %v", err)
	}
	var trainerCDI []any
	for _, dev := range prepared.Claims[trainingUID].Devices {
		for _, id := range dev.CdiDeviceIds {
			trainerCDI = append(trainerCDI, map[string]any{"name": id})
		}
	}
	nodes := h.makeDeviceNodes(devRoot)
	check(len(nodes) >= 2, "device nodes in devlet's CDI specs: %v", nodes)
	h.waitSynced(1)

	fmt.Println("--- crictl runp / create / start: the training pod's trainer, and a pod without claims")
	podJSON := filepath.Join(d, "pod-training.json")
	writeJSON(podJSON, map[string]any{
		"metadata":      map[string]any{"name": "training", "namespace": "ml", "uid": trainingPod},
		"log_directory": filepath.Join(d, "logs"),
		"linux": map[string]any{"cgroup_parent": h.cgroupParent,
			"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}},
	})
	pod := h.crictl("runp", podJSON)
	// The kubelet's shared CPU pool is every CPU of this (real) machine; devlet narrows it to the
	// devices' NUMA node of the simulated one, within what the machine has.
	trainerJSON := filepath.Join(d, "ctr-trainer.json")
	writeJSON(trainerJSON, map[string]any{
		"metadata":    map[string]any{"name": "trainer"},
		"image":       map[string]any{"image": boxImage},
		"command":     []string{"/bin/sleep", "2147483647"},
		"log_path":    "trainer.log",
		"linux":       map[string]any{"resources": map[string]any{"cpuset_cpus": h.nodeCPUs}},
		"CDI_devices": trainerCDI,
	})
	trainer := h.crictl("create", pod, trainerJSON, podJSON)
	h.crictl("start", trainer)
	// The pod's log-shipper sidecar names no claim: the kubelet passes it no CDI device.
	sidecarJSON := filepath.Join(d, "ctr-log-shipper.json")
	writeJSON(sidecarJSON, map[string]any{
		"metadata": map[string]any{"name": "log-shipper"},
		"image":    map[string]any{"image": boxImage},
		"command":  []string{"/bin/sleep", "2147483647"},
		"log_path": "log-shipper.log",
		"linux":    map[string]any{"resources": map[string]any{"cpuset_cpus": h.nodeCPUs}},
	})
	sidecar := h.crictl("create", pod, sidecarJSON, podJSON)
	h.crictl("start", sidecar)
	plainPod := h.crictl("runp", filepath.Join(d, "pod.json"))
	plain := h.crictl("create", plainPod, h.containerConfig("plain", 0), filepath.Join(d, "pod.json"))
	h.crictl("start", plain)

	fmt.Println("--- trainer: GPU device nodes, CDI env, metadata files, NUMA node 0, applied by runc")
	info := h.inspect(trainer)
	spec := &info.Info.RuntimeSpec
	for _, card := range []string{"/dev/dri/card1", "/dev/dri/card2"} {
		check(hasDevice(spec, card, 1, 3), "device %s (c 1:3 below the dev root) missing: %+v", card,
			spec.Linux.Devices)
	}
	check(allowsDevice(spec, 1, 3), "no device cgroup rule allows c 1:3")
	for _, env := range []string{"DEVLET_DEVICE_GPU_0=" + simNode + "/gpu-0",
		"DEVLET_DEVICE_GPU_1=" + simNode + "/gpu-1", "DEVLET_DEVICE_NIC_0=" + simNode + "/nic-0"} {
		check(hasEnv(spec, env), "env %s missing: %v", env, spec.Process.Env)
	}
	var metadata []string
	for _, m := range spec.Mounts {
		if strings.HasSuffix(m.Destination, "-metadata.json") {
			check(contains(m.Options, "ro"), "metadata mount %s not read-only: %v", m.Destination, m.Options)
			metadata = append(metadata, m.Destination)
		}
	}
	check(len(metadata) == 2, "metadata mounts %v, want one per request (gpus, nic)", metadata)
	check(spec.Linux.Resources.CPU.Mems == "0", "cpuset.mems %q, want the devices' NUMA node 0",
		spec.Linux.Resources.CPU.Mems)
	var devices []string
	for _, dev := range spec.Linux.Devices {
		devices = append(devices, dev.Path)
	}
	fmt.Printf("    device nodes %v\n    cpuset.cpus %q cpuset.mems %q\n    metadata %v\n", devices,
		spec.Linux.Resources.CPU.Cpus, spec.Linux.Resources.CPU.Mems, metadata)
	if pid := info.Info.Pid; check(pid > 0, "no pid for the trainer") {
		var st syscall.Stat_t
		err := syscall.Stat(fmt.Sprintf("/proc/%d/root/dev/dri/card1", pid), &st)
		check(err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == (1<<8|3),
			"/dev/dri/card1 inside the container: %v mode %o rdev %x", err, st.Mode, st.Rdev)
		check(contains(procEnv(pid), "DEVLET_DEVICE_GPU_0="+simNode+"/gpu-0"), "process env lacks gpu-0")
		var text string
		for _, m := range metadata {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", pid, m))
			check(err == nil, "metadata %s inside the container: %v", m, err)
			text += string(data)
		}
		for _, want := range []string{`"name":"gpu-0"`, `"name":"nic-0"`, `"resource.kubernetes.io/pciBusID"`} {
			check(strings.Contains(text, want), "metadata inside the container lacks %s", want)
		}
		check(cgroupFile(pid, "cpuset", "cpuset.mems") == "0", "cgroup cpuset.mems %q",
			cgroupFile(pid, "cpuset", "cpuset.mems"))
	}
	sidecarInfo := h.inspect(sidecar)
	spec = &sidecarInfo.Info.RuntimeSpec
	sidecarMetadata := false
	for _, m := range spec.Mounts {
		sidecarMetadata = sidecarMetadata || strings.HasSuffix(m.Destination, "-metadata.json")
	}
	check(!hasDevice(spec, "/dev/dri/card1", 1, 3) && !hasEnv(spec, "DEVLET_DEVICE_GPU_0="+simNode+"/gpu-0") &&
		!sidecarMetadata && spec.Linux.Resources.CPU.Cpus == h.nodeCPUs,
		"the sidecar, which names no claim, got the claim's devices, metadata or cpuset: cpus %q mounts %v",
		spec.Linux.Resources.CPU.Cpus, spec.Mounts)
	plainInfo := h.inspect(plain)
	spec = &plainInfo.Info.RuntimeSpec
	check(!hasDevice(spec, "/dev/dri/card1", 1, 3) && !hasEnv(spec, "DEVLET_DEVICE_GPU_0="+simNode+"/gpu-0"),
		"devlet touched a container of a pod without claims")

	fmt.Println("--- pods removed, NodeUnprepareResources, SIGTERM")
	for _, p := range []string{pod, plainPod} {
		h.crictl("stopp", p)
		h.crictl("rmp", p)
	}
	h.kubelet(b.kubelet, "--registry-dir", registry, "--unprepare", "--claim", claimRef)
	left, _ := filepath.Glob(filepath.Join(d, "cdi", "*"+trainingUID+"*"))
	check(len(left) == 0, "CDI specs left after unprepare: %v", left)
	h.plugin.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- h.plugin.Wait() }()
	select {
	case err := <-done:
		check(err == nil, "devlet-node exit: %v", err)
	case <-time.After(20 * time.Second):
		check(false, "devlet-node did not exit within 20 s of SIGTERM")
		h.plugin.Process.Kill()
		<-done
	}
	h.plugin = nil
}

// writeTrainingClaim: examples/node/allocated/training.json's claim with a UID, reserved for the
// training pod, as the scheduler leaves it.
func (h *harness) writeTrainingClaim(examples, manifests string) {
	data, err := os.ReadFile(filepath.Join(examples, "allocated", "training.json"))
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err == nil {
		err = json.Unmarshal(data, &list)
	}
	if err != nil || len(list.Items) != 1 {
		h.fatal("training.json: %v (%d items)", err, len(list.Items))
	}
	claim := list.Items[0]
	claim["metadata"].(map[string]any)["uid"] = trainingUID
	claim["status"].(map[string]any)["reservedFor"] = []any{map[string]any{
		"resource": "pods", "name": "training", "uid": trainingPod}}
	writeJSON(filepath.Join(manifests, "resourceclaim-ml-training.json"), claim)
}

// makeDeviceNodes creates, as the simulated host's /dev, every device node devlet's CDI specs
// name below devRoot: character devices 1:3, mode 0666.
func (h *harness) makeDeviceNodes(devRoot string) []string {
	files, _ := filepath.Glob(filepath.Join(h.dir, "cdi", "*.json"))
	var made []string
	for _, path := range files {
		var spec struct {
			Devices []struct {
				ContainerEdits struct {
					DeviceNodes []struct {
						HostPath string `json:"hostPath"`
					} `json:"deviceNodes"`
				} `json:"containerEdits"`
			} `json:"devices"`
		}
		data, err := os.ReadFile(path)
		if err != nil || json.Unmarshal(data, &spec) != nil {
			continue
		}
		for _, dev := range spec.Devices {
			for _, n := range dev.ContainerEdits.DeviceNodes {
				if !strings.HasPrefix(n.HostPath, devRoot+"/") {
					continue
				}
				os.MkdirAll(filepath.Dir(n.HostPath), 0o755)
				if err := syscall.Mknod(n.HostPath, syscall.S_IFCHR|0o666, 1<<8|3); err != nil && !os.IsExist(err) {
					h.fatal("mknod %s: %v", n.HostPath, err)
				}
				made = append(made, strings.TrimPrefix(n.HostPath, devRoot))
			}
		}
	}
	return made
}

func (h *harness) kubelet(bin string, args ...string) string {
	cmd := exec.Command(bin, append([]string{"kubelet"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	check(err == nil, "kubelet-harness %v: %v\n%s%s", args, err, out, stderr.String())
	return string(out)
}
