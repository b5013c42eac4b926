package main

// `nri-harness node`: the whole devlet-node agent between the Go peers of both plugin protocols.
// The kubelet's side is kubelet-harness (k8s.io/kubelet v0.37.2's generated clients: plugin
// registration, then NodePrepareResources / NodeUnprepareResources over dra/v1); the runtime's
// side is this harness around github.com/containerd/nri/pkg/adaptation, which devlet-node joins
// as an external NRI plugin once the kubelet has registered it. The node is simulated: the
// 2-socket 8-GPU hwloc topology and devlet-simnode's sysfs tree, device nodes below --dev-root.
//
//	nri-harness node --plugin devlet-node --kubelet kubelet-harness --simnode devlet-simnode \
//	    --topology dgx-2s-8gpu-2nic.xml --examples examples/node
//
// Checked: the slices devlet-node publishes; the claim examples/node/allocated/training.json
// (gpu-0, gpu-1, nic-0 on NUMA node 0) prepared through the kubelet's client with CDI ids for
// every device; NRI registration only after the kubelet's registration; at CreateContainer the
// trainer gets exactly the prepared CDI devices, whose specs (in --cdi-root) carry the devices'
// nodes with host paths below the dev root and the KEP-5304 metadata file, and a cpuset of the
// devices' NUMA node, while the pod's init container and sidecar, which name no claim (no CDI
// device from the kubelet, so no devlet marker in their environment), get nothing; with the
// node's prepared-claim checkpoint unreadable the trainer's creation fails naming the claim
// (fail closed; the claim's CDI spec is not read on the container path), as
// does a container naming a claim devlet never prepared; a container of a pod without claims is
// left alone; unprepare removes the
// claim's CDI specs and metadata; SIGTERM removes both sockets and exits 0.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/api"
)

const (
	nodeName     = "sim-node-1"
	nodeDriver   = "devlet.io"
	trainingUID  = "5e0c1a10-0000-4000-8000-0000000c1a01"
	trainingPod  = "6f1c2a10-0000-4000-8000-00000000a001" // examples/node/manifests/pod-training.yaml
	numa0CPUs    = "0-7,16-23"                            // NUMA node 0 of dgx-2s-8gpu-2nic.xml
	simDevRoot   = "/run/devlet-sim/dev"
	kubeletLimit = 60 * time.Second
)

type nodeFlags struct {
	node, kubelet, simnode, topology, examples string
	keep                                       bool
}

func nodeMain(args []string) {
	var f nodeFlags
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	fs.StringVar(&f.node, "plugin", "", "devlet-node binary")
	fs.StringVar(&f.kubelet, "kubelet", "", "kubelet-harness binary (integration/kubelet)")
	fs.StringVar(&f.simnode, "simnode", "", "devlet-simnode binary")
	fs.StringVar(&f.topology, "topology", "", "hwloc XML of the simulated node (dgx-2s-8gpu-2nic.xml)")
	fs.StringVar(&f.examples, "examples", "", "examples/node (manifests/, allocated/training.json)")
	fs.BoolVar(&f.keep, "keep", false, "keep the temp dir")
	fs.Parse(args)
	if f.node == "" || f.kubelet == "" || f.simnode == "" || f.topology == "" || f.examples == "" {
		fmt.Fprintln(os.Stderr, "usage: nri-harness node --plugin devlet-node --kubelet kubelet-harness "+
			"--simnode devlet-simnode --topology XML --examples DIR [--keep]")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("/tmp", "nri-node-")
	must(err, "tempdir")
	if f.keep {
		fmt.Println("keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	for _, sub := range []string{"plugins", "conf.d", "manifests", "cdi", "registry", "kubelet-plugins"} {
		must(os.MkdirAll(filepath.Join(dir, sub), 0o755), "mkdir")
	}
	runNodeScenario(f, dir)
}

func runNodeScenario(f nodeFlags, dir string) {
	ctx := context.Background()
	manifests := filepath.Join(dir, "manifests")
	cdiRoot := filepath.Join(dir, "cdi")
	registry := filepath.Join(dir, "registry")

	scenario("simulated node, manifests, and the runtime's NRI socket")
	if out, err := exec.Command(f.simnode, filepath.Join(dir, "sys")).CombinedOutput(); err != nil {
		must(err, "devlet-simnode: "+string(out))
	}
	for _, name := range []string{"device-classes.yaml", "pod-training.yaml"} {
		data, err := os.ReadFile(filepath.Join(f.examples, "manifests", name))
		must(err, "read example")
		must(os.WriteFile(filepath.Join(manifests, name), data, 0o644), "write manifest")
	}
	writeTrainingClaim(f.examples, manifests)
	rt := newRuntime(dir, filepath.Join(dir, "nri.sock"), nil, nil)
	rt.start("runtime")
	defer rt.a.Stop()

	scenario("devlet-node starts: slices published, registration socket, no NRI before registration")
	logPath := filepath.Join(dir, "devlet-node.log")
	logFile, err := os.Create(logPath)
	must(err, "log file")
	node := exec.Command(f.node, "--node-name", nodeName, "--driver-name", nodeDriver,
		"--manifests", manifests, "--topology-xml", f.topology, "--sysfs-root", filepath.Join(dir, "sys"),
		"--dev-root", simDevRoot, "--profiles", filepath.Join(f.examples, "profiles.yaml"),
		"--cdi-root", cdiRoot, "--kubelet-registrar-directory-path", registry,
		"--kubelet-plugins-directory-path", filepath.Join(dir, "kubelet-plugins"),
		"--nri-socket", filepath.Join(dir, "nri.sock"), "--cdi-policy", "names",
		"--healthcheck-port", "0", "-v", "2")
	node.Stdout, node.Stderr = logFile, logFile
	must(node.Start(), "start devlet-node")
	exited := make(chan error, 1)
	go func() { exited <- node.Wait() }()
	defer func() {
		if node.ProcessState == nil {
			node.Process.Kill()
			<-exited
		}
		if failures > 0 {
			data, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			fmt.Printf("--- last lines of devlet-node's log:\n%s\n", strings.Join(lines, "\n"))
		}
	}()
	regSocket := filepath.Join(registry, nodeDriver+"-reg.sock")
	waitFor(func() bool { _, err := os.Stat(regSocket); return err == nil }, 30*time.Second,
		"devlet-node's registration socket "+regSocket, exited)
	slices, _ := filepath.Glob(filepath.Join(manifests, "resourceslice-*.json"))
	devices := publishedDevices(slices)
	check(len(slices) == 1 && devices["gpu-0"] && devices["gpu-1"] && devices["nic-0"],
		"published slices %v with devices %v", slices, devices)
	select {
	case n := <-rt.synced:
		check(false, "devlet-node synchronized with the runtime (%d) before the kubelet registered it", n)
	case <-time.After(500 * time.Millisecond):
	}

	scenario("kubelet: registration and NodePrepareResources (dra/v1) of ml/training")
	claimRef := "ml/training/" + trainingUID
	out := runKubelet(f.kubelet, "--registry-dir", registry, "--claim", claimRef)
	var prepared struct {
		Claims map[string]struct {
			Devices []struct {
				RequestNames []string `json:"requestNames"`
				PoolName     string   `json:"poolName"`
				DeviceName   string   `json:"deviceName"`
				CdiDeviceIds []string `json:"cdiDeviceIds"`
			} `json:"devices"`
			Error string `json:"error"`
		} `json:"claims"`
	}
	must(json.Unmarshal(out, &prepared), "decode kubelet-harness output")
	var gotDevices, wantCDI []string
	for _, d := range prepared.Claims[trainingUID].Devices {
		gotDevices = append(gotDevices, d.PoolName+"/"+d.DeviceName)
		check(len(d.CdiDeviceIds) > 0, "device %s has no CDI ids", d.DeviceName)
		wantCDI = append(wantCDI, d.CdiDeviceIds...)
	}
	sort.Strings(gotDevices)
	check(strings.Join(gotDevices, ",") == nodeName+"/gpu-0,"+nodeName+"/gpu-1,"+nodeName+"/nic-0",
		"prepared devices %v", gotDevices)
	wantCDI = uniqueSorted(wantCDI)

	scenario("NRI: devlet-node joins the runtime once registered")
	rt.waitSync("devlet-node")

	scenario("RunPodSandbox; the init container and the sidecar name no claim: left alone")
	p := pod(trainingPod, nil)
	p.Name, p.Namespace = "training", "ml"
	must(rt.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: p}), "RunPodSandbox")
	for _, name := range []string{"fetch-dataset", "log-shipper"} {
		c := container(p, name) // the kubelet gives it no CDI device: no marker
		c.Linux.Resources.Cpu = &api.LinuxCPU{Cpus: "0-31", Mems: "0-1"}
		rsp, err := create(rt, p, c)
		if check(err == nil, "CreateContainer %s: %v", name, err) {
			a := rsp.GetAdjust()
			res := a.GetLinux().GetResources()
			check(len(a.GetCDIDevices()) == 0 && len(a.GetMounts()) == 0 && len(a.GetEnv()) == 0 &&
				res.GetCpu().GetCpus() == "" && res.GetCpu().GetMems() == "" && res.GetCpu().GetQuota() == nil &&
				res.GetMemory().GetLimit() == nil, "%s (names no claim) was adjusted: %v", name, a)
		}
	}

	scenario("CreateContainer: the trainer gets the prepared devices on their NUMA node")
	// The trainer names the claim: the kubelet passes it every device's CDI IDs and the runtime
	// applies them, devlet's markers included, before NRI's CreateContainer.
	trainerEnv := cdiEnv(cdiRoot, wantCDI)
	markers := 0
	for _, e := range trainerEnv {
		if strings.HasPrefix(e, "DEVLET_CLAIM_") && strings.Contains(e, "claim="+trainingUID+" ") {
			markers++
		}
	}
	check(markers == 3, "markers of the claim's 3 devices in the CDI env %v", trainerEnv)
	trainer := container(p, "trainer")
	trainer.Env = append(trainer.Env, trainerEnv...)
	// The kubelet's shared pool: every CPU of the (simulated) machine.
	trainer.Linux.Resources.Cpu = &api.LinuxCPU{Cpus: "0-31", Mems: "0-1"}
	rsp, err := create(rt, p, trainer)
	if check(err == nil, "CreateContainer trainer: %v", err) {
		adjust := rsp.GetAdjust()
		check(strings.Join(cdiNames(adjust), " ") == strings.Join(wantCDI, " "),
			"CDI devices %v, want the prepared ids %v", cdiNames(adjust), wantCDI)
		cpu := adjust.GetLinux().GetResources().GetCpu()
		check(cpu.GetCpus() == numa0CPUs && cpu.GetMems() == "0", "cpuset %q mems %q, want %s / 0",
			cpu.GetCpus(), cpu.GetMems(), numa0CPUs)
		checkCDISpecs(cdiRoot, wantCDI)
	}

	// The container path reads the edits recorded in state/ (no CDI spec is read again), so what
	// must fail closed is the record itself: a checkpoint that cannot be read.
	scenario("fail closed: the prepared-claim record unreadable, the container naming the claim is not created")
	checkpoint := filepath.Join(dir, "kubelet-plugins", nodeDriver, "checkpoint.json")
	saved, readErr := os.ReadFile(checkpoint)
	must(os.WriteFile(checkpoint+".tmp", []byte("{\"kind\":\"DevletCheckpoint\",\"version\":2,"+
		"\"checksum\":\"crc32:00000000\",\"data\":{}}\n"), 0o600), "write a damaged checkpoint")
	must(os.Rename(checkpoint+".tmp", checkpoint), "damage the checkpoint")
	again := container(p, "trainer")
	again.Id += "-again"
	again.Env = append(again.Env, trainerEnv...)
	_, err = create(rt, p, again)
	check(err != nil && strings.Contains(err.Error(), "claim "+trainingUID) &&
		strings.Contains(err.Error(), "corrupted"), "CreateContainer with the checkpoint unreadable: %v", err)
	c := container(p, "log-shipper")
	c.Id += "-again"
	_, err = create(rt, p, c)
	check(err == nil, "a container naming no claim must not fail with the claim: %v", err)
	if readErr == nil {
		must(os.WriteFile(checkpoint+".tmp", saved, 0o600), "restore the checkpoint")
		must(os.Rename(checkpoint+".tmp", checkpoint), "restore the checkpoint")
	} else {
		must(os.Remove(checkpoint), "remove the damaged checkpoint")
	}
	_, err = create(rt, p, again)
	check(err == nil, "CreateContainer once the checkpoint is back: %v", err)
	// Nor does a claim spec that is gone matter to it any more: the runtime resolves the CDI
	// names itself, the NRI plugin gives what state/ recorded.
	claimSpec := filepath.Join(cdiRoot, "k8s."+nodeDriver+"-claim_"+trainingUID+".json")
	must(os.Rename(claimSpec, claimSpec+".away"), "move the claim's CDI spec away")
	again.Id += "-nospec"
	_, err = create(rt, p, again)
	check(err == nil, "CreateContainer without re-reading the claim's CDI spec: %v", err)
	must(os.Rename(claimSpec+".away", claimSpec), "restore the claim's CDI spec")

	scenario("fail closed: a container naming a claim devlet never prepared is not created")
	intruder := container(p, "intruder")
	intruder.Env = append(intruder.Env, "DEVLET_CLAIM_0BAD_0=claim=0bad request=gpus device="+nodeName+"/gpu-7")
	_, err = create(rt, p, intruder)
	check(err != nil && strings.Contains(err.Error(), "claim 0bad") &&
		strings.Contains(err.Error(), "has not prepared that claim"), "CreateContainer naming claim 0bad: %v", err)

	other := pod("7a2b3c4d-0000-4000-8000-0000000000ff", nil)
	must(rt.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: other}), "RunPodSandbox other")
	rsp, err = create(rt, other, container(other, "plain"))
	if check(err == nil, "CreateContainer plain: %v", err) {
		adjust := rsp.GetAdjust()
		check(len(adjust.GetCDIDevices()) == 0 && len(adjust.GetMounts()) == 0 &&
			adjust.GetLinux().GetResources().GetCpu().GetCpus() == "",
			"a pod without claims was adjusted: %v", adjust)
	}
	for _, c := range []*api.Container{trainer} {
		_, err := rt.a.StopContainer(ctx, &api.StopContainerRequest{Pod: p, Container: c})
		check(err == nil, "StopContainer: %v", err)
		check(rt.a.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: p, Container: c}) == nil, "RemoveContainer")
	}
	check(rt.a.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: p}) == nil, "StopPodSandbox")
	check(rt.a.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: p}) == nil, "RemovePodSandbox")

	scenario("kubelet: NodeUnprepareResources removes the claim's CDI specs and metadata")
	runKubelet(f.kubelet, "--registry-dir", registry, "--unprepare", "--claim", claimRef)
	left, _ := filepath.Glob(filepath.Join(cdiRoot, "*"+trainingUID+"*"))
	check(len(left) == 0, "CDI files of the claim left after unprepare: %v", left)
	meta, _ := filepath.Glob(filepath.Join(dir, "kubelet-plugins", "*", "*", "*training*"))
	check(len(meta) == 0, "metadata left after unprepare: %v", meta)

	scenario("SIGTERM: devlet-node exits 0 and removes its sockets")
	must(node.Process.Signal(syscall.SIGTERM), "SIGTERM")
	select {
	case err := <-exited:
		check(err == nil, "devlet-node exit: %v", err)
	case <-time.After(20 * time.Second):
		check(false, "devlet-node did not exit within 20 s of SIGTERM")
		node.Process.Kill()
		<-exited
	}
	_, err = os.Stat(regSocket)
	check(os.IsNotExist(err), "registration socket left: %v", err)
	dra, _ := filepath.Glob(filepath.Join(dir, "kubelet-plugins", nodeDriver, "*.sock"))
	check(len(dra) == 0, "DRA socket left: %v", dra)
}

// writeTrainingClaim writes examples/node/allocated/training.json's claim with a UID and
// reserved for the training pod, as the scheduler leaves it.
func writeTrainingClaim(examples, manifests string) {
	data, err := os.ReadFile(filepath.Join(examples, "allocated", "training.json"))
	must(err, "read training.json")
	var list struct {
		Items []map[string]any `json:"items"`
	}
	must(json.Unmarshal(data, &list), "decode training.json")
	if len(list.Items) != 1 {
		must(fmt.Errorf("%d items", len(list.Items)), "training.json")
	}
	claim := list.Items[0]
	claim["metadata"].(map[string]any)["uid"] = trainingUID
	claim["status"].(map[string]any)["reservedFor"] = []any{map[string]any{
		"resource": "pods", "name": "training", "uid": trainingPod}}
	out, err := json.MarshalIndent(claim, "", "  ")
	must(err, "encode claim")
	must(os.WriteFile(filepath.Join(manifests, "resourceclaim-ml-training.json"), out, 0o644), "write claim")
}

func publishedDevices(slices []string) map[string]bool {
	out := map[string]bool{}
	for _, path := range slices {
		var slice struct {
			Spec struct {
				Devices []struct {
					Name string `json:"name"`
				} `json:"devices"`
			} `json:"spec"`
		}
		data, err := os.ReadFile(path)
		if check(err == nil && json.Unmarshal(data, &slice) == nil, "slice %s: %v", path, err) {
			for _, d := range slice.Spec.Devices {
				out[d.Name] = true
			}
		}
	}
	return out
}

// checkCDISpecs: every CDI id resolves to a device in a spec under cdiRoot; the GPUs bring their
// /dev/dri nodes with host paths below the dev root, and one device brings the metadata file.
func checkCDISpecs(cdiRoot string, ids []string) {
	type edits struct {
		DeviceNodes []struct {
			Path     string `json:"path"`
			HostPath string `json:"hostPath"`
		} `json:"deviceNodes"`
		Mounts []struct {
			HostPath      string `json:"hostPath"`
			ContainerPath string `json:"containerPath"`
		} `json:"mounts"`
	}
	devices := map[string]edits{} // "vendor/class=name" -> edits
	files, _ := filepath.Glob(filepath.Join(cdiRoot, "*.json"))
	for _, path := range files {
		var spec struct {
			Kind    string `json:"kind"`
			Devices []struct {
				Name           string `json:"name"`
				ContainerEdits edits  `json:"containerEdits"`
			} `json:"devices"`
		}
		data, err := os.ReadFile(path)
		if !check(err == nil && json.Unmarshal(data, &spec) == nil, "CDI spec %s: %v", path, err) {
			continue
		}
		for _, d := range spec.Devices {
			devices[spec.Kind+"="+d.Name] = d.ContainerEdits
		}
	}
	var nodes, metadata []string
	var metadataText string
	for _, id := range ids {
		e, ok := devices[id]
		if !check(ok, "CDI device %s is in no spec under %s", id, cdiRoot) {
			continue
		}
		for _, n := range e.DeviceNodes {
			check(n.HostPath == simDevRoot+n.Path, "device node %s has host path %q, want it below %s",
				n.Path, n.HostPath, simDevRoot)
			nodes = append(nodes, n.Path)
		}
		for _, m := range e.Mounts {
			if strings.HasSuffix(m.ContainerPath, "-metadata.json") {
				data, err := os.ReadFile(m.HostPath)
				check(err == nil && strings.Contains(string(data), `"kind":"DeviceMetadata"`),
					"metadata file %s: %v %s", m.HostPath, err, data)
				metadataText += string(data)
				metadata = append(metadata, m.ContainerPath)
			}
		}
	}
	check(contains(nodes, "/dev/dri/card1") && contains(nodes, "/dev/dri/card2"),
		"GPU device nodes /dev/dri/card1, card2 not in the CDI edits: %v", nodes)
	check(len(metadata) == 2, "device-metadata mounts %v, want one per request (gpus, nic)", metadata)
	for _, want := range []string{`"name":"gpu-0"`, `"name":"gpu-1"`, `"name":"nic-0"`,
		`"resource.kubernetes.io/pciBusID"`, `"resource.kubernetes.io/pcieRoot":{"string":"pci0000:15"}`} {
		check(strings.Contains(metadataText, want), "device metadata lacks %s", want)
	}
}

// cdiEnv is the environment a runtime that applies CDI (containerd, CRI-O) gives a container
// from the CDI devices `ids` the kubelet passes for it: each spec's and each device's env.
func cdiEnv(cdiRoot string, ids []string) []string {
	type edits struct {
		Env []string `json:"env"`
	}
	byID := map[string][]string{}
	files, _ := filepath.Glob(filepath.Join(cdiRoot, "*.json"))
	for _, path := range files {
		var spec struct {
			Kind           string `json:"kind"`
			ContainerEdits edits  `json:"containerEdits"`
			Devices        []struct {
				Name           string `json:"name"`
				ContainerEdits edits  `json:"containerEdits"`
			} `json:"devices"`
		}
		data, err := os.ReadFile(path)
		if !check(err == nil && json.Unmarshal(data, &spec) == nil, "CDI spec %s: %v", path, err) {
			continue
		}
		for _, d := range spec.Devices {
			byID[spec.Kind+"="+d.Name] = append(append([]string{}, spec.ContainerEdits.Env...), d.ContainerEdits.Env...)
		}
	}
	var env []string
	for _, id := range ids {
		e, ok := byID[id]
		check(ok, "CDI device %s is in no spec under %s", id, cdiRoot)
		env = append(env, e...)
	}
	return env
}

func runKubelet(bin string, args ...string) []byte {
	cmd := exec.Command(bin, append([]string{"kubelet", "--timeout", kubeletLimit.String()}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if !check(err == nil, "kubelet-harness %v: %v\n%s", args, err, out) {
		return []byte("{}")
	}
	return out
}

func waitFor(cond func() bool, limit time.Duration, what string, exited <-chan error) {
	deadline := time.Now().Add(limit)
	for !cond() {
		select {
		case err := <-exited:
			must(fmt.Errorf("exited: %v", err), "devlet-node before "+what)
		default:
		}
		if time.Now().After(deadline) {
			must(fmt.Errorf("not within %v", limit), what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func uniqueSorted(list []string) []string {
	sort.Strings(list)
	out := list[:0]
	for i, s := range list {
		if i == 0 || s != list[i-1] {
			out = append(out, s)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
