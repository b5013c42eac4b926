// containerd-nri-test: devlet's NRI plugin against a real containerd 2.x (CRI + NRI enabled in a
// generated config, runc from Debian, images built locally and imported with ctr), driven with
// crictl the way the kubelet drives the runtime: runp, create, start. It checks that the OCI spec
// of each created container carries devlet's adjustments and that runc applied them to the
// running process (cpuset, memory limit, device node, mounts, env), then restarts containerd
// (the plugin reconnects and resynchronizes), switches the plugin to the CDI-names policy (the
// runtime resolves the names from its CDI spec dirs) and times `crictl create` with and without
// the plugin attached.
//
//	containerd-nri-test --bin DIR --plugin devlet-nri-test-plugin [--timings 7] [--keep]
//	containerd-nri-test --bin DIR --node devlet-node --kubelet kubelet-harness --simnode S \
//	    --topology XML --examples examples/node      (the whole agent: node.go)
//
// DIR holds containerd, ctr, containerd-shim-runc-v2 and crictl (build.sh). Exit status 0: pass,
// 1: a check failed, 77: this machine cannot run containers (the reason is printed).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	skipCode    = 77
	pauseImage  = "docker.io/devlet/pause:test"
	boxImage    = "docker.io/devlet/busybox:test"
	podUID      = "devlet-pod-uid-0001"
	gpuEnv      = "DEVLET_GPU=gpu0"
	gpuPath     = "/dev/devlet-gpu0"
	libPath     = "/usr/lib/devlet"
	metaPath    = "/var/run/devlet/gpu.json"
	memoryLimit = 64 << 20
)

var failures int

func check(cond bool, format string, args ...any) bool {
	if !cond {
		failures++
		fmt.Printf("    FAIL: "+format+"\n", args...)
	}
	return cond
}

// tempDir is removed by skip (nothing is mounted there yet when prerequisites are checked).
var tempDir string

func skip(format string, args ...any) {
	fmt.Printf("SKIP: "+format+"\n", args...)
	if tempDir != "" {
		os.RemoveAll(tempDir)
	}
	os.Exit(skipCode)
}

type harness struct {
	dir, bin, pluginBin, runc string
	snapshotter               string
	cgroupParent              string
	numaNode                  int
	nodeCPUs                  string // CPUs of numaNode (cpulist)
	cpuClaimCPU               string // the CPU the CPU claim allocates
	containerd                *exec.Cmd
	plugin                    *exec.Cmd
	pluginLog                 string
	keep                      bool
}

func (h *harness) sock() string { return filepath.Join(h.dir, "containerd.sock") }

func (h *harness) fatal(format string, args ...any) {
	fmt.Printf("FATAL: "+format+"\n", args...)
	h.dumpLogs()
	h.cleanup()
	os.Exit(1)
}

func (h *harness) dumpLogs() {
	for _, name := range []string{"containerd.log", "plugin.log"} {
		data, _ := os.ReadFile(filepath.Join(h.dir, name))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Printf("--- last lines of %s:\n%s\n", name, strings.Join(lines, "\n"))
	}
}

// prerequisites: root, runc, a snapshotter that can mount here, cgroup v1 cpuset or cgroup v2.
func (h *harness) prerequisites() {
	if os.Geteuid() != 0 {
		skip("containerd and runc need root (euid %d)", os.Geteuid())
	}
	if h.runc == "" {
		path, err := exec.LookPath("runc")
		if err != nil {
			skip("runc is not installed (Debian package runc, scripts/install-deps.sh)")
		}
		h.runc = path
	}
	if info, err := os.Stat("/bin/busybox"); err != nil || info.Mode()&0o111 == 0 {
		skip("/bin/busybox is missing (Debian package busybox-static): it is the test image")
	}
	if out, err := exec.Command("file", "-L", "/bin/busybox").Output(); err == nil &&
		!strings.Contains(string(out), "statically linked") {
		skip("/bin/busybox is not statically linked (install busybox-static, not busybox)")
	}
	for _, b := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "crictl"} {
		if _, err := os.Stat(filepath.Join(h.bin, b)); err != nil {
			h.fatal("%s not in --bin %s (build.sh builds it)", b, h.bin)
		}
	}
	_, errV1 := os.Stat("/sys/fs/cgroup/cpuset/cpuset.cpus")
	_, errV2 := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	if errV1 != nil && errV2 != nil {
		skip("no cgroup cpuset controller mounted at /sys/fs/cgroup")
	}
	// overlayfs when this kernel and mount namespace allow it, else the native snapshotter.
	probe := filepath.Join(h.dir, "probe")
	for _, d := range []string{"l", "u", "w", "m"} {
		os.MkdirAll(filepath.Join(probe, d), 0o755)
	}
	opts := fmt.Sprintf("lowerdir=%s/l,upperdir=%s/u,workdir=%s/w", probe, probe, probe)
	if err := syscall.Mount("overlay", probe+"/m", "overlay", 0, opts); err == nil {
		syscall.Unmount(probe+"/m", 0)
		h.snapshotter = "overlayfs"
	} else if err := syscall.Mount(probe+"/l", probe+"/m", "", syscall.MS_BIND, ""); err == nil {
		syscall.Unmount(probe+"/m", 0)
		h.snapshotter = "native"
		fmt.Printf("overlay mount failed (%v): using the native snapshotter\n", err)
	} else {
		skip("cannot mount here (bind mount: %v): containers cannot run", err)
	}
	os.RemoveAll(probe)
}

// topology: the first NUMA node and its CPUs; the CPU claim takes that node's last CPU.
func (h *harness) topology() {
	h.numaNode = 0
	data, err := os.ReadFile("/sys/devices/system/node/node0/cpulist")
	if err != nil {
		data, err = os.ReadFile("/sys/fs/cgroup/cpuset/cpuset.cpus")
	}
	if err != nil {
		h.fatal("cannot read the CPU topology: %v", err)
	}
	h.nodeCPUs = strings.TrimSpace(string(data))
	cpus := expandCPUs(h.nodeCPUs)
	if len(cpus) == 0 {
		h.fatal("empty cpulist %q", h.nodeCPUs)
	}
	h.cpuClaimCPU = strconv.Itoa(cpus[len(cpus)-1])
}

func expandCPUs(list string) []int {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		if part == "" {
			continue
		}
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if found {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil {
			return nil
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}

func sameCPUs(a, b string) bool {
	return fmt.Sprint(expandCPUs(a)) == fmt.Sprint(expandCPUs(b))
}

func writeJSON(path string, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		fmt.Printf("FATAL: writing %s: %v\n", path, err)
		os.Exit(1)
	}
}

// files: containerd config, CDI spec, claims, metadata file, the host directory devlet mounts.
func (h *harness) files() {
	d := h.dir
	for _, sub := range []string{"root", "state", "cdi", "nri-plugins", "nri-conf.d", "logs", "lib",
		"metadata", "opt", "cni-bin", "cni-conf"} {
		os.MkdirAll(filepath.Join(d, sub), 0o755)
	}
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  level = "info"
[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %[5]q
  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    socket_path = %[6]q
    plugin_path = %[7]q
    plugin_config_path = %[8]q
    plugin_registration_timeout = "5s"
    plugin_request_timeout = "2s"
    disable_connections = false
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = %[9]q
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[10]q
  [plugins.'io.containerd.cri.v1.runtime']
    # Sandboxes ask for oom_score_adj -998, which needs CAP_SYS_RESOURCE; test machines (a
    # container themselves) may lack it. Restricted, no container goes below containerd's own.
    restrict_oom_score_adj = true
    enable_cdi = true
    cdi_spec_dirs = [%[11]q]
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[12]q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[13]q]
      conf_dir = %[14]q
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`, filepath.Join(d, "root"), filepath.Join(d, "state"), h.sock(), h.sock()+".ttrpc",
		filepath.Join(d, "opt"), filepath.Join(d, "nri.sock"), filepath.Join(d, "nri-plugins"),
		filepath.Join(d, "nri-conf.d"), h.snapshotter, pauseImage, filepath.Join(d, "cdi"), h.runc,
		filepath.Join(d, "cni-bin"), filepath.Join(d, "cni-conf"))
	if err := os.WriteFile(filepath.Join(d, "config.toml"), []byte(config), 0o644); err != nil {
		h.fatal("config: %v", err)
	}
	// crictl insists on a config file; this one keeps it off the host's /etc/crictl.yaml.
	crictlConfig := fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n",
		h.sock(), h.sock())
	if err := os.WriteFile(filepath.Join(d, "crictl.yaml"), []byte(crictlConfig), 0o644); err != nil {
		h.fatal("crictl config: %v", err)
	}
	// The CDI spec the runtime resolves under the names policy. DEVLET_CDI_SPEC only comes from
	// here, so its presence proves that containerd (not devlet) applied the device.
	writeJSON(filepath.Join(d, "cdi", "devlet-test.json"), map[string]any{
		"cdiVersion": "0.6.0", "kind": "devlet.test/gpu",
		"devices": []any{map[string]any{"name": "gpu0", "containerEdits": map[string]any{
			"env":         []string{gpuEnv, "DEVLET_CDI_SPEC=1"},
			"deviceNodes": []any{map[string]any{"path": gpuPath, "hostPath": "/dev/zero"}},
		}}},
	})
	// The claims' own CDI devices, as devlet's DRA plugin writes them: each carries the marker of
	// its claim's device (state/container_marker.h). The kubelet passes a device's CDI ID only to
	// the containers that name its claim (containerConfig: CDI_devices), containerd applies it,
	// and devlet reads the marker back at CreateContainer: that is how it knows which container
	// gets which claim.
	writeJSON(filepath.Join(d, "cdi", "devlet-test-claims.json"), map[string]any{
		"cdiVersion": "0.6.0", "kind": "devlet.test/claim",
		"devices": []any{
			map[string]any{"name": "claim-gpu-gpu0", "containerEdits": map[string]any{
				"env": []string{"DEVLET_CLAIM_CLAIM_GPU_0=claim=claim-gpu request=gpu device=node/gpu0"}}},
			map[string]any{"name": "claim-cpu", "containerEdits": map[string]any{
				"env": []string{"DEVLET_CLAIM_CLAIM_CPU_0=claim=claim-cpu request=cpus device=node/cpu" + h.cpuClaimCPU}}},
			map[string]any{"name": "claim-broken-gpu9", "containerEdits": map[string]any{
				"env": []string{"DEVLET_CLAIM_CLAIM_BROKEN_0=claim=claim-broken request=gpu device=node/gpu9"}}},
		},
	})
	os.WriteFile(filepath.Join(d, "lib", "marker"), []byte("devlet-lib\n"), 0o644)
	os.WriteFile(filepath.Join(d, "metadata", "claim-gpu.json"), []byte(`{"claim":"gpu"}`+"\n"), 0o644)
	gpu := map[string]any{
		"uid": "claim-gpu", "namespace": "default", "name": "gpu",
		"devices": []any{map[string]any{
			"request": "gpu", "driver": "gpu.devlet.test", "pool": "node", "device": "gpu0",
			"cdiDevices": []string{"devlet.test/gpu=gpu0"}, "numaNodes": []int{h.numaNode},
			"edits": map[string]any{
				"env":         []string{gpuEnv},
				"deviceNodes": []any{map[string]any{"path": gpuPath, "hostPath": "/dev/zero"}},
				"mounts": []any{map[string]any{"hostPath": filepath.Join(d, "lib"),
					"containerPath": libPath, "options": []string{"ro", "bind"}}},
			},
		}},
		"metadataMounts": []any{map[string]any{
			"hostPath": filepath.Join(d, "metadata", "claim-gpu.json"), "containerPath": metaPath}},
	}
	// A claim whose device node does not exist on the host: creation must fail, clearly.
	broken := map[string]any{
		"uid": "claim-broken", "namespace": "default", "name": "broken",
		"devices": []any{map[string]any{"request": "gpu", "driver": "gpu.devlet.test",
			"pool": "node", "device": "gpu9", "edits": map[string]any{
				"deviceNodes": []any{map[string]any{"path": "/dev/devlet-missing"}}}}},
	}
	cpu := map[string]any{
		"uid": "claim-cpu", "namespace": "default", "name": "cpu",
		"devices": []any{map[string]any{"request": "cpus", "driver": "cpu.devlet.test",
			"pool": "node", "device": "cpu" + h.cpuClaimCPU}},
		"cpuset": h.cpuClaimCPU, "memoryLimitBytes": memoryLimit,
	}
	writeJSON(filepath.Join(d, "claims.json"), map[string]any{podUID: []any{gpu, cpu, broken}})
	writeJSON(filepath.Join(d, "pod.json"), map[string]any{
		"metadata":      map[string]any{"name": "devlet-pod", "namespace": "default", "uid": podUID},
		"log_directory": filepath.Join(d, "logs"),
		"annotations":   map[string]string{"devlet.test/report": "1"},
		"linux": map[string]any{
			"cgroup_parent":    h.cgroupParent,
			"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}},
		},
	})
}

// kubeletCDI is what the kubelet passes (CRI ContainerConfig.CDI_devices) for the containers
// that name a claim: app the GPU claim, cpu the CPU claim, broken the broken one; plain none.
var kubeletCDI = map[string]string{"app": "devlet.test/claim=claim-gpu-gpu0",
	"cpu": "devlet.test/claim=claim-cpu", "broken": "devlet.test/claim=claim-broken-gpu9"}

func (h *harness) containerConfig(name string, attempt int) string {
	path := filepath.Join(h.dir, fmt.Sprintf("ctr-%s-%d.json", name, attempt))
	config := map[string]any{
		"metadata": map[string]any{"name": name, "attempt": attempt},
		"image":    map[string]any{"image": boxImage},
		"command":  []string{"/bin/sleep", "2147483647"},
		"log_path": fmt.Sprintf("%s-%d.log", name, attempt),
		"linux":    map[string]any{},
	}
	if id := kubeletCDI[name]; id != "" {
		config["CDI_devices"] = []any{map[string]any{"name": id}}
	}
	writeJSON(path, config)
	return path
}

func (h *harness) startContainerd() {
	logFile, err := os.OpenFile(filepath.Join(h.dir, "containerd.log"),
		os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		h.fatal("containerd log: %v", err)
	}
	cmd := exec.Command(filepath.Join(h.bin, "containerd"), "--config", filepath.Join(h.dir, "config.toml"))
	cmd.Env = append(os.Environ(), "PATH="+h.bin+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so that a test killed midway does not leave it attached to ours.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		h.fatal("start containerd: %v", err)
	}
	h.containerd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := h.crictlQuiet("version"); err == nil {
			return
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.fatal("containerd did not serve CRI on %s within 60s", h.sock())
}

func (h *harness) stopContainerd() {
	if h.containerd == nil {
		return
	}
	h.containerd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { h.containerd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		h.containerd.Process.Kill()
		<-done
	}
	h.containerd = nil
}

func (h *harness) crictlQuiet(args ...string) (string, error) {
	full := append([]string{"--runtime-endpoint", "unix://" + h.sock(), "--image-endpoint",
		"unix://" + h.sock(), "--timeout", "60s"}, args...)
	cmd := exec.Command(filepath.Join(h.bin, "crictl"), full...)
	cmd.Env = append(os.Environ(), "CRI_CONFIG_FILE="+filepath.Join(h.dir, "crictl.yaml"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("crictl %s: %v: %s", strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

func (h *harness) crictl(args ...string) string {
	out, err := h.crictlQuiet(args...)
	if err != nil {
		h.fatal("%v", err)
	}
	return out
}

// startPlugin launches devlet-nri-test-plugin against containerd's NRI socket (external mode)
// and waits until it has synchronized `syncs` times in total.
func (h *harness) startPlugin(policy string) {
	h.stopPlugin() // one devlet per runtime: a second one would conflict on every field
	h.pluginLog = filepath.Join(h.dir, "plugin.log")
	logFile, err := os.OpenFile(h.pluginLog, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		h.fatal("plugin log: %v", err)
	}
	cmd := exec.Command(h.pluginBin, "--socket", filepath.Join(h.dir, "nri.sock"),
		"--claims", filepath.Join(h.dir, "claims.json"), "--cdi-policy", policy,
		"--numa-cpus", fmt.Sprintf("%d=%s", h.numaNode, h.nodeCPUs), "-v", "2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		h.fatal("start plugin: %v", err)
	}
	h.plugin = cmd
	h.waitSynced(1)
}

func (h *harness) waitSynced(n int) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(h.pluginLog)
		if strings.Count(string(data), "NRI synchronized") >= n {
			// containerd adds the plugin to its list right after Synchronize returns.
			time.Sleep(300 * time.Millisecond)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.fatal("devlet's plugin did not synchronize %d time(s) within 30s", n)
}

func (h *harness) stopPlugin() {
	if h.plugin == nil {
		return
	}
	h.plugin.Process.Kill()
	h.plugin.Wait()
	h.plugin = nil
	time.Sleep(300 * time.Millisecond) // containerd notices the closed connection
}

func (h *harness) cleanup() {
	if h.containerd != nil {
		if out, err := h.crictlQuiet("pods", "-q"); err == nil {
			for _, id := range strings.Fields(out) {
				h.crictlQuiet("stopp", id)
				h.crictlQuiet("rmp", "-f", id)
			}
		}
	}
	h.stopPlugin()
	h.stopContainerd()
	// Unmount whatever is still mounted below the temp dir before removing it, deepest first;
	// never remove through a mount.
	mounted := mountsUnder(h.dir)
	for i := len(mounted) - 1; i >= 0; i-- {
		syscall.Unmount(mounted[i], syscall.MNT_DETACH)
	}
	for _, ctl := range []string{"cpuset", "cpu", "cpuacct", "memory", "pids", "devices", "freezer",
		"blkio", "hugetlb", "net_cls", "net_prio", "perf_event", "systemd"} {
		os.Remove(filepath.Join("/sys/fs/cgroup", ctl, h.cgroupParent))
	}
	if h.keep {
		fmt.Printf("kept %s\n", h.dir)
		return
	}
	if left := mountsUnder(h.dir); len(left) > 0 {
		fmt.Printf("not removing %s: still mounted: %v\n", h.dir, left)
		return
	}
	os.RemoveAll(h.dir)
}

func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	sort.Strings(out)
	return out
}

// ---- the OCI spec and the running process ----

type ociSpec struct {
	Annotations map[string]string `json:"annotations"`
	Process     struct {
		Env []string `json:"env"`
	} `json:"process"`
	Mounts []struct {
		Destination string   `json:"destination"`
		Source      string   `json:"source"`
		Type        string   `json:"type"`
		Options     []string `json:"options"`
	} `json:"mounts"`
	Linux struct {
		CgroupsPath string `json:"cgroupsPath"`
		Devices     []struct {
			Path  string `json:"path"`
			Type  string `json:"type"`
			Major int64  `json:"major"`
			Minor int64  `json:"minor"`
		} `json:"devices"`
		Resources struct {
			Devices []struct {
				Allow  bool   `json:"allow"`
				Type   string `json:"type"`
				Major  *int64 `json:"major"`
				Minor  *int64 `json:"minor"`
				Access string `json:"access"`
			} `json:"devices"`
			CPU struct {
				Shares *uint64 `json:"shares"`
				Quota  *int64  `json:"quota"`
				Period *uint64 `json:"period"`
				Cpus   string  `json:"cpus"`
				Mems   string  `json:"mems"`
			} `json:"cpu"`
			Memory struct {
				Limit *int64 `json:"limit"`
			} `json:"memory"`
		} `json:"resources"`
	} `json:"linux"`
}

type inspected struct {
	Info struct {
		Pid         int     `json:"pid"`
		RuntimeSpec ociSpec `json:"runtimeSpec"`
	} `json:"info"`
}

func (h *harness) inspect(id string) inspected {
	var out inspected
	if err := json.Unmarshal([]byte(h.crictl("inspect", "-o", "json", id)), &out); err != nil {
		h.fatal("crictl inspect %s: %v", id, err)
	}
	// The runtime's own copy of the spec (what runc was given) must say the same.
	bundle := filepath.Join(h.dir, "state", "io.containerd.runtime.v2.task", "k8s.io", id, "config.json")
	if data, err := os.ReadFile(bundle); err == nil {
		var spec ociSpec
		if check(json.Unmarshal(data, &spec) == nil, "bundle config.json of %s", id) {
			check(spec.Linux.Resources.CPU.Cpus == out.Info.RuntimeSpec.Linux.Resources.CPU.Cpus,
				"bundle cpuset %q != CRI's %q", spec.Linux.Resources.CPU.Cpus,
				out.Info.RuntimeSpec.Linux.Resources.CPU.Cpus)
		}
	}
	return out
}

func hasEnv(spec *ociSpec, entry string) bool {
	for _, e := range spec.Process.Env {
		if e == entry {
			return true
		}
	}
	return false
}

func hasMount(spec *ociSpec, dest, source string, option string) bool {
	for _, m := range spec.Mounts {
		if m.Destination == dest && (source == "" || m.Source == source) {
			for _, o := range m.Options {
				if o == option {
					return true
				}
			}
		}
	}
	return false
}

func hasDevice(spec *ociSpec, path string, major, minor int64) bool {
	for _, d := range spec.Linux.Devices {
		if d.Path == path && d.Type == "c" && d.Major == major && d.Minor == minor {
			return true
		}
	}
	return false
}

func allowsDevice(spec *ociSpec, major, minor int64) bool {
	for _, r := range spec.Linux.Resources.Devices {
		if r.Allow && r.Type == "c" && r.Major != nil && *r.Major == major && r.Minor != nil &&
			*r.Minor == minor {
			return true
		}
	}
	return false
}

func statusField(pid int, field string) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			return strings.TrimSpace(strings.TrimPrefix(line, field+":"))
		}
	}
	return ""
}

// cgroupFile reads a cgroup v1 file of the process's `controller` hierarchy.
func cgroupFile(pid int, controller, file string) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				value, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, parts[2], file))
				if err != nil {
					return "error: " + err.Error()
				}
				return strings.TrimSpace(string(value))
			}
		}
	}
	return "no " + controller + " cgroup"
}

func procEnv(pid int) []string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkGpuContainer: devlet's CDI edits (or names), the metadata mount and the NUMA cpuset.
func (h *harness) checkGpuContainer(id string, viaEdits bool) *ociSpec {
	info := h.inspect(id)
	spec := &info.Info.RuntimeSpec
	check(hasEnv(spec, gpuEnv), "env %s missing from spec env %v", gpuEnv, spec.Process.Env)
	check(hasDevice(spec, gpuPath, 1, 5), "device %s (c 1:5, resolved from /dev/zero) missing: %+v",
		gpuPath, spec.Linux.Devices)
	check(allowsDevice(spec, 1, 5), "no device cgroup rule allows c 1:5: %+v", spec.Linux.Resources.Devices)
	check(hasMount(spec, metaPath, filepath.Join(h.dir, "metadata", "claim-gpu.json"), "ro"),
		"metadata file mount %s missing or not read-only: %+v", metaPath, spec.Mounts)
	if viaEdits {
		check(hasMount(spec, libPath, filepath.Join(h.dir, "lib"), "ro"), "CDI edit mount %s missing",
			libPath)
		check(!hasEnv(spec, "DEVLET_CDI_SPEC=1"), "edits policy but the runtime resolved the CDI name")
	} else {
		check(hasEnv(spec, "DEVLET_CDI_SPEC=1"),
			"names policy: DEVLET_CDI_SPEC=1 (only in the CDI spec file) missing: the runtime did not resolve devlet.test/gpu=gpu0")
	}
	cpu := spec.Linux.Resources.CPU
	check(sameCPUs(cpu.Cpus, h.nodeCPUs) && cpu.Mems == strconv.Itoa(h.numaNode),
		"spec cpuset %q mems %q, want the NUMA node's %q / %d", cpu.Cpus, cpu.Mems, h.nodeCPUs, h.numaNode)
	pid := info.Info.Pid
	if check(pid > 0, "no pid for running container %s", id) {
		check(sameCPUs(statusField(pid, "Cpus_allowed_list"), h.nodeCPUs), "process CPUs %q",
			statusField(pid, "Cpus_allowed_list"))
		check(contains(procEnv(pid), gpuEnv), "process env lacks %s", gpuEnv)
		meta, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", pid, metaPath))
		check(err == nil && strings.Contains(string(meta), `"claim":"gpu"`), "metadata file inside: %v %q",
			err, meta)
		var st syscall.Stat_t
		err = syscall.Stat(fmt.Sprintf("/proc/%d/root%s", pid, gpuPath), &st)
		check(err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == (1<<8|5),
			"device node %s inside the container: %v mode %o rdev %x", gpuPath, err, st.Mode, st.Rdev)
		if viaEdits {
			lib, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s/marker", pid, libPath))
			check(err == nil && string(lib) == "devlet-lib\n", "mounted %s inside: %v", libPath, err)
		}
	}
	return spec
}

// boot starts containerd and imports the test images.
func (h *harness) boot() {
	fmt.Printf("--- containerd %s, snapshotter %s, runc %s; NUMA node %d CPUs %s\n", h.bin,
		h.snapshotter, h.runc, h.numaNode, h.nodeCPUs)
	if err := writeImageArchive(filepath.Join(h.dir, "images.tar"), "/bin/busybox", []imageSpec{
		{name: pauseImage, entrypoint: []string{"/bin/sleep", "2147483647"}},
		{name: boxImage, cmd: []string{"/bin/sh"}},
	}); err != nil {
		h.fatal("image archive: %v", err)
	}
	h.startContainerd()
	ctr := exec.Command(filepath.Join(h.bin, "ctr"), "--address", h.sock(), "--namespace", "k8s.io",
		"images", "import", "--snapshotter", h.snapshotter, filepath.Join(h.dir, "images.tar"))
	if out, err := ctr.CombinedOutput(); err != nil {
		h.fatal("ctr images import: %v: %s", err, out)
	}
	h.crictl("inspecti", pauseImage)
}

func (h *harness) run(timings int) {
	h.boot()

	fmt.Println("--- devlet's plugin (CDI policy edits) registers with containerd's NRI")
	h.startPlugin("edits")

	fmt.Println("--- crictl runp / create / start: a GPU container, a DRA-CPU container, a plain one")
	pod := h.crictl("runp", filepath.Join(h.dir, "pod.json"))
	podJSON := filepath.Join(h.dir, "pod.json")
	app := h.crictl("create", pod, h.containerConfig("app", 0), podJSON)
	cpuCtr := h.crictl("create", pod, h.containerConfig("cpu", 0), podJSON)
	plain := h.crictl("create", pod, h.containerConfig("plain", 0), podJSON)
	for _, id := range []string{app, cpuCtr, plain} {
		h.crictl("start", id)
	}

	fmt.Println("--- GPU container: CDI edits, metadata mount, NUMA-aligned cpuset, applied by runc")
	h.checkGpuContainer(app, true)

	fmt.Println("--- DRA-CPU container: exact cpuset, mems, memory limit, applied by runc")
	info := h.inspect(cpuCtr)
	spec := &info.Info.RuntimeSpec
	cpu := spec.Linux.Resources.CPU
	check(cpu.Cpus == h.cpuClaimCPU && cpu.Mems == strconv.Itoa(h.numaNode), "cpuset %q mems %q, want %s / %d",
		cpu.Cpus, cpu.Mems, h.cpuClaimCPU, h.numaNode)
	check(spec.Linux.Resources.Memory.Limit != nil && *spec.Linux.Resources.Memory.Limit == memoryLimit,
		"memory limit %v", spec.Linux.Resources.Memory.Limit)
	check(cpu.Quota != nil && cpu.Period != nil && *cpu.Quota == int64(*cpu.Period),
		"CPU limit of one allocated CPU: quota %v period %v", cpu.Quota, cpu.Period)
	check(cpu.Shares != nil && *cpu.Shares == 1024, "CPU shares of one allocated CPU: %v", cpu.Shares)
	check(!hasEnv(spec, gpuEnv) && !hasMount(spec, metaPath, "", "ro"), "GPU claim leaked into cpu container")
	if pid := info.Info.Pid; check(pid > 0, "no pid") {
		check(statusField(pid, "Cpus_allowed_list") == h.cpuClaimCPU, "process CPUs %q",
			statusField(pid, "Cpus_allowed_list"))
		check(cgroupFile(pid, "cpuset", "cpuset.cpus") == h.cpuClaimCPU, "cgroup cpuset.cpus %q",
			cgroupFile(pid, "cpuset", "cpuset.cpus"))
		check(cgroupFile(pid, "memory", "memory.limit_in_bytes") == strconv.Itoa(memoryLimit),
			"cgroup memory.limit_in_bytes %q", cgroupFile(pid, "memory", "memory.limit_in_bytes"))
		check(cgroupFile(pid, "cpu", "cpu.cfs_quota_us") == "100000", "cgroup cpu.cfs_quota_us %q",
			cgroupFile(pid, "cpu", "cpu.cfs_quota_us"))
	}

	fmt.Println("--- crictl update (kubelet resize / CPU manager): devlet re-asserts cpuset and limits")
	h.crictl("update", "--cpuset-cpus", h.nodeCPUs, "--cpu-quota", "400000", "--cpu-period", "100000",
		"--memory", strconv.Itoa(4*memoryLimit), cpuCtr)
	if pid := info.Info.Pid; pid > 0 {
		check(cgroupFile(pid, "cpuset", "cpuset.cpus") == h.cpuClaimCPU, "after update: cpuset.cpus %q",
			cgroupFile(pid, "cpuset", "cpuset.cpus"))
		check(cgroupFile(pid, "cpu", "cpu.cfs_quota_us") == "100000", "after update: cpu.cfs_quota_us %q",
			cgroupFile(pid, "cpu", "cpu.cfs_quota_us"))
		check(cgroupFile(pid, "memory", "memory.limit_in_bytes") == strconv.Itoa(memoryLimit),
			"after update: memory.limit_in_bytes %q", cgroupFile(pid, "memory", "memory.limit_in_bytes"))
	}

	fmt.Println("--- plain container: untouched")
	info = h.inspect(plain)
	spec = &info.Info.RuntimeSpec
	check(!hasEnv(spec, gpuEnv) && !hasMount(spec, metaPath, "", "ro") && !hasDevice(spec, gpuPath, 1, 5),
		"devlet touched a container without claims")
	check(spec.Linux.Resources.CPU.Cpus == "" && spec.Linux.Resources.Memory.Limit == nil,
		"plain container cpuset %q memory %v", spec.Linux.Resources.CPU.Cpus, spec.Linux.Resources.Memory.Limit)
	check(spec.Annotations["devlet.test/events"] == "RunPodSandbox", "pod events seen by devlet: %q",
		spec.Annotations["devlet.test/events"])

	fmt.Println("--- containerd restarts: the plugin reconnects, resynchronizes, keeps adjusting")
	h.stopContainerd()
	h.startContainerd()
	h.waitSynced(2)
	app1 := h.crictl("create", pod, h.containerConfig("app", 1), podJSON)
	h.crictl("start", app1)
	spec = h.checkGpuContainer(app1, true)
	check(spec.Annotations["devlet.test/registrations"] == "2", "registrations %q",
		spec.Annotations["devlet.test/registrations"])
	check(spec.Annotations["devlet.test/synced"] == "3", "containers in the resync: %q, want 3",
		spec.Annotations["devlet.test/synced"])

	fmt.Println("--- bad state: a device node that does not resolve fails the creation, naming the claim")
	_, err := h.crictlQuiet("create", pod, h.containerConfig("broken", 0), podJSON)
	check(err != nil && strings.Contains(err.Error(), "claim default/broken") &&
		strings.Contains(err.Error(), "/dev/devlet-missing"), "creation error: %v", err)

	fmt.Println("--- CDI policy names: containerd resolves devlet's CDI device names")
	h.stopPlugin()
	h.startPlugin("names")
	app2 := h.crictl("create", pod, h.containerConfig("app", 2), podJSON)
	h.crictl("start", app2)
	h.checkGpuContainer(app2, false)

	if timings > 0 {
		h.timeCreates(pod, podJSON, timings)
	}

	fmt.Println("--- pre-launched: containerd starts devlet from its plugin dir (NRI_PLUGIN_SOCKET)")
	h.stopPlugin()
	h.stopContainerd()
	h.pluginLog = filepath.Join(h.dir, "prelaunched.log")
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %q --claims %q --cdi-policy edits --numa-cpus %q -v 2 2>>%q\n",
		h.pluginBin, filepath.Join(h.dir, "claims.json"), fmt.Sprintf("%d=%s", h.numaNode, h.nodeCPUs),
		h.pluginLog)
	if err := os.WriteFile(filepath.Join(h.dir, "nri-plugins", "10-devlet"), []byte(wrapper), 0o755); err != nil {
		h.fatal("pre-launched plugin: %v", err)
	}
	h.startContainerd()
	h.waitSynced(1)
	app3 := h.crictl("create", pod, h.containerConfig("app", 3), podJSON)
	h.crictl("start", app3)
	spec = h.checkGpuContainer(app3, true)
	check(spec.Annotations["devlet.test/registrations"] == "1", "pre-launched registrations %q",
		spec.Annotations["devlet.test/registrations"])
	h.crictl("stopp", pod)
	h.crictl("rmp", pod)
}

// timeCreates measures `crictl create` wall time (process start to exit) with devlet attached
// (a container devlet adjusts, and one without claims: the NRI round trip alone) and without
// devlet, in alternating blocks so that drift on a shared machine hits every mode alike.
func (h *harness) timeCreates(pod, podJSON string, n int) {
	fmt.Printf("--- crictl create timings, %d per mode in alternating blocks\n", n)
	var adjusted, passed, without []time.Duration
	attempt := 100
	var created []string
	timeOne := func(name string) time.Duration {
		config := h.containerConfig(name, attempt)
		attempt++
		start := time.Now()
		id := h.crictl("create", pod, config, podJSON)
		elapsed := time.Since(start)
		created = append(created, id)
		return elapsed
	}
	for block := 0; block < 4; block++ {
		attached := block%2 == 0
		if attached {
			h.startPlugin("edits")
		} else {
			h.stopPlugin()
		}
		for i := 0; i < (n+1)/2; i++ {
			if attached {
				adjusted = append(adjusted, timeOne("app"))
				passed = append(passed, timeOne("plain"))
			} else {
				without = append(without, timeOne("app"))
			}
		}
	}
	for _, id := range created {
		h.crictlQuiet("rm", id)
	}
	ma, mp, mo := median(adjusted), median(passed), median(without)
	fmt.Printf("crictl create median: devlet adjusting %v, devlet attached but no claim %v, "+
		"no devlet %v (n=%d each); ratios %.2f and %.2f\n", ma.Round(time.Microsecond),
		mp.Round(time.Microsecond), mo.Round(time.Microsecond), len(without),
		float64(ma)/float64(mo), float64(mp)/float64(mo))
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func main() {
	bin := flag.String("bin", "", "directory with containerd, ctr, containerd-shim-runc-v2, crictl")
	plugin := flag.String("plugin", "", "devlet-nri-test-plugin binary")
	runc := flag.String("runc", "", "runc binary (default: from PATH)")
	timings := flag.Int("timings", 6, "crictl create timings per mode (0: none)")
	keep := flag.Bool("keep", false, "keep the temp dir")
	var node nodeBins
	flag.StringVar(&node.node, "node", "", "devlet-node binary: run the whole agent instead of --plugin (node.go)")
	flag.StringVar(&node.kubelet, "kubelet", "", "with --node: kubelet-harness (integration/kubelet)")
	flag.StringVar(&node.simnode, "simnode", "", "with --node: devlet-simnode")
	flag.StringVar(&node.topology, "topology", "", "with --node: dgx-2s-8gpu-2nic.xml")
	flag.StringVar(&node.examples, "examples", "", "with --node: examples/node")
	flag.Parse()
	if node.node != "" && (node.kubelet == "" || node.simnode == "" || node.topology == "" || node.examples == "") {
		fmt.Fprintln(os.Stderr, "--node needs --kubelet, --simnode, --topology and --examples")
		os.Exit(2)
	}
	if *bin == "" || (*plugin == "" && node.node == "") {
		fmt.Fprintln(os.Stderr, "usage: containerd-nri-test --bin DIR --plugin PATH [--timings N] [--keep]")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("/tmp", "devlet-ctrd-")
	if err != nil {
		fmt.Println("FATAL: tempdir:", err)
		os.Exit(1)
	}
	tempDir = dir
	h := &harness{dir: dir, bin: *bin, pluginBin: *plugin, runc: *runc, keep: *keep,
		cgroupParent: "/devlet-test-" + filepath.Base(dir)}
	h.prerequisites()
	h.topology()
	h.files()
	if node.node != "" {
		h.runNode(node)
	} else {
		h.run(*timings)
	}
	if failures > 0 {
		h.dumpLogs()
	}
	h.cleanup()
	if failures > 0 {
		fmt.Printf("%d check(s) failed\n", failures)
		os.Exit(1)
	}
	fmt.Println("PASS")
}
