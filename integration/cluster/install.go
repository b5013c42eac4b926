package main

// devlet installed as a user installs it: its OCI image imported into containerd, its Helm chart
// installed with helm, pointed at the API server directly (no Service network here) and at the
// simulated node: devlet-simnode's sysfs tree, the hwloc XML and a dev root, mounted into the
// DaemonSet's pod at the same paths as on the host, so that the CDI specs devlet writes name
// host paths containerd can resolve.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	driverName      = "devlet.io"
	devletNamespace = "devlet-system"
	releaseName     = "devlet"
)

type devlet struct {
	c       *cluster
	opts    options
	simnode *child
	image   string // the imported image's name
	// helmValues: the --values arguments of the install, which an upgrade repeats (scenario 6).
	helmValues []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func (c *cluster) devletLogs() *child {
	if c.devlet == nil {
		return nil
	}
	// The DaemonSet pod's log, as the kubelet writes it.
	var newest string
	filepath.WalkDir(c.path("pod-logs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, devletNamespace+"_") &&
			strings.HasSuffix(p, ".log") {
			newest = p
		}
		return nil
	})
	if newest == "" {
		return nil
	}
	return &child{name: "devlet-node pod", log: newest}
}

func (d *devlet) simDir(parts ...string) string {
	return d.c.path(append([]string{"sim"}, parts...)...)
}

// startSimnode builds the simulated node's sysfs tree and keeps devlet-simnode running as its
// kernel (SR-IOV VFs appear when devlet writes sriov_numvfs).
func (d *devlet) startSimnode() {
	os.MkdirAll(d.simDir("dev"), 0o755)
	data, err := os.ReadFile(d.opts.topology)
	must(err, "topology")
	writeFile(d.simDir("topology.xml"), data, 0o644)
	d.simnode = &child{name: "devlet-simnode", log: d.c.path("logs", "devlet-simnode.log"),
		args: []string{d.opts.simnode, d.simDir("sys"), "--vfio", vfioGPUPCI, "--sriov-nic", "--serve"}}
	d.simnode.start()
	waitFor("devlet-simnode serving", 60*time.Second, func() (bool, string) {
		if !d.simnode.running() {
			fatalf("devlet-simnode exited\n%s", d.simnode.tail(2000))
		}
		log, _ := os.ReadFile(d.simnode.log)
		return strings.Contains(string(log), "serving"), ""
	})
	// The simulated devices' nodes: this host has no GPUs, so every device node devlet's CDI
	// specs name below the dev root is made here (c 1:3, /dev/null's numbers) as soon as a spec
	// names it, before the runtime resolves it (the kubelet creates the container after prepare).
	d.stop = make(chan struct{})
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			d.makeDeviceNodes()
			select {
			case <-d.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

func (d *devlet) makeDeviceNodes() {
	devRoot := d.simDir("dev")
	files, _ := filepath.Glob(filepath.Join(d.c.cdiDir(), "*.json"))
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
				if _, err := os.Lstat(n.HostPath); err == nil {
					continue
				}
				os.MkdirAll(filepath.Dir(n.HostPath), 0o755)
				if err := syscall.Mknod(n.HostPath, syscall.S_IFCHR|0o666, 1<<8|3); err != nil &&
					!os.IsExist(err) {
					logf("mknod %s: %v", n.HostPath, err)
				}
			}
		}
	}
}

// importImage loads devlet's OCI archive into containerd's k8s.io namespace and returns the
// name of the image it holds.
func (d *devlet) importImage() {
	out := d.c.ctr("images", "import", "--snapshotter", d.c.snapshotter, d.opts.image)
	logf("ctr images import: %s", strings.ReplaceAll(out, "\n", "; "))
	list := d.c.ctr("images", "list", "-q")
	for _, name := range strings.Fields(list) {
		if strings.Contains(name, "devlet") && !strings.HasPrefix(name, "sha256:") &&
			name != pauseImage && name != boxImage {
			d.image = name
		}
	}
	if d.image == "" {
		fatalf("no devlet image among %q after importing %s", list, d.opts.image)
	}
}

func (d *devlet) helm(args ...string) string {
	full := append(args, "--kubeconfig", d.c.adminKubeconfig)
	cmd := exec.Command(d.opts.helm, full...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+d.c.path("helm", "cache"),
		"HELM_CONFIG_HOME="+d.c.path("helm", "config"), "HELM_DATA_HOME="+d.c.path("helm", "data"))
	out, err := cmd.CombinedOutput()
	must(err, fmt.Sprintf("helm %s: %s", strings.Join(args, " "), out))
	return string(out)
}

func (d *devlet) install() {
	c := d.c
	phase("devlet install (image import, simulated node, helm install, slices)", func() {
		d.importImage()
		d.startSimnode()
		values := c.path("devlet-values.yaml")
		writeFile(values, []byte(d.values()), 0o644)
		args := []string{"install", releaseName, d.opts.chart, "--namespace", devletNamespace,
			"--create-namespace", "--values", values}
		if d.opts.profiles != "" {
			// examples/node/profiles.yaml's top-level `profiles:` is the chart's value of that name.
			// Its VM GPU (0000:b9:00.0, simulated NUMA node 1) becomes vfioGPUPCI, on NUMA node 0:
			// devlet gives a container its device's NUMA node's CPUs and memory node, and this
			// machine has only node 0's (scenario 4).
			data, err := os.ReadFile(d.opts.profiles)
			must(err, "profiles")
			profiles := d.c.path("profiles.yaml")
			writeFile(profiles, []byte(strings.ReplaceAll(string(data), "0000:b9:00.0", vfioGPUPCI)), 0o644)
			args = append(args, "--values", profiles)
		}
		if d.opts.extraValues != "" {
			args = append(args, "--values", d.opts.extraValues)
		}
		d.helm(args...)
		d.helmValues = args[6:]
		d.waitDaemonSetPod(180 * time.Second)
		d.waitSlices(120 * time.Second)
	})
}

// devletPod returns the Running, Ready devlet-node pod of the DaemonSet, if any.
func (d *devlet) devletPod() (*corev1.Pod, string) {
	pods, err := d.c.client.CoreV1().Pods(devletNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err.Error()
	}
	var states []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || len(p.OwnerReferences) == 0 ||
			p.OwnerReferences[0].Kind != "DaemonSet" {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return p, ""
			}
		}
		states = append(states, fmt.Sprintf("%s %s %v", p.Name, p.Status.Phase, p.Status.ContainerStatuses))
	}
	return nil, fmt.Sprintf("pods: %v", states)
}

func (d *devlet) waitDaemonSetPod(timeout time.Duration) *corev1.Pod {
	var pod *corev1.Pod
	waitFor("devlet-node DaemonSet pod Ready", timeout, func() (bool, string) {
		p, why := d.devletPod()
		pod = p
		return p != nil, why
	})
	return pod
}

// slices returns the number of devices in the node's ResourceSlices of devlet's driver.
func (d *devlet) slices() (int, int) {
	list, err := d.c.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + nodeName + ",spec.driver=" + driverName})
	if err != nil {
		return 0, 0
	}
	devices := 0
	for _, s := range list.Items {
		devices += len(s.Spec.Devices)
	}
	return len(list.Items), devices
}

func (d *devlet) waitSlices(timeout time.Duration) {
	waitFor("ResourceSlices of "+nodeName, timeout, func() (bool, string) {
		n, devices := d.slices()
		return n > 0 && devices > 0, fmt.Sprintf("%d slices, %d devices", n, devices)
	})
	n, devices := d.slices()
	logf("%d ResourceSlice(s) of %s, %d devices", n, nodeName, devices)
}

// stopAll ends the simulated node's helpers (teardown).
func (d *devlet) stopAll() {
	if d.stop != nil {
		close(d.stop)
		d.wg.Wait()
		d.stop = nil
	}
	if d.simnode != nil {
		d.simnode.stop(10 * time.Second)
	}
}
