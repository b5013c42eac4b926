package main

// Scenario 8 (issue 17 §2): the node reboots under a running GPU pod. Everything a reboot loses
// goes: the kubelet and containerd are killed, every process in the pods' cgroups and every shim
// of this containerd is killed, the mounts below the work dir's runtime parts are gone (rootfs,
// shm, the kubelet's volumes), containerd's state dir and the CDI dir are emptied (tmpfs on a
// real node: /run/containerd, /var/run/cdi) and the pods' cgroups removed. What survives is what
// a disk keeps: containerd's root, the kubelet's root dir (its DRA checkpoint), devlet's state
// dir, and the hardware (devlet-simnode). Then containerd and the kubelet start again.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// killCgroupProcs SIGKILLs every process in the cgroups below dir (v1, one controller).
func killCgroupProcs(dir string) int {
	n := 0
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || info.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
		return nil
	})
	return n
}

// killShims SIGKILLs the containerd shims serving this cluster's containerd (their command line
// names its socket).
func (c *cluster) killShims() int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.Contains(filepath.Base(args[0]), "containerd-shim") &&
			strings.Contains(string(cmdline), c.path("containerd")) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

// powerCycle takes the node down as a power loss would and brings containerd and the kubelet
// back up.
func (c *cluster) powerCycle() {
	c.kubelet.kill()
	c.containerd.kill()
	killed := 0
	memory := filepath.Join("/sys/fs/cgroup", "memory", c.cgroupRoot)
	waitFor("no process left in the pods' cgroups", 30*time.Second, func() (bool, string) {
		n := killCgroupProcs(memory) + c.killShims()
		killed += n
		return n == 0, fmt.Sprintf("%d still running", n)
	})
	unmountBelow(c.path("containerd"))
	unmountBelow(c.kubeletRoot())
	for _, dir := range []string{c.path("containerd", "state"), c.cdiDir()} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			must(os.RemoveAll(filepath.Join(dir, e.Name())), "emptying "+dir)
		}
	}
	for _, ctl := range append(cgroupControllers(), "unified") {
		entries, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", ctl, c.cgroupRoot))
		for _, e := range entries {
			if e.IsDir() {
				removeCgroupTree(filepath.Join("/sys/fs/cgroup", ctl, c.cgroupRoot, e.Name()))
			}
		}
	}
	logf("power off: kubelet, containerd, %d processes and shims killed; containerd state, CDI dir, "+
		"pod cgroups and mounts gone", killed)
	c.startContainerd()
	c.startKubelet()
	c.waitNodeReady(120 * time.Second)
}

// scenarioReboot (scenario 8): a GPU pod runs; the node power-cycles; the DaemonSet's devlet-node
// comes back, the pod runs again in a new sandbox with the same claim and device: inside, the
// same GPU env, the device nodes and the metadata file; devlet wrote the claim's CDI spec again.
func scenarioReboot(d *devlet) {
	ns := "scenario-8"
	d.ensureNamespace(ns)
	d.createGPUTemplate(ns)
	tmpl := "one-gpu"
	pod, gpus := d.runGPUPod(ns, "survivor", corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}},
		Containers:     []corev1.Container{sleeper("app", "gpu")},
	})
	if !check(len(gpus) == 1 && len(pod.Status.ResourceClaimStatuses) == 1 &&
		pod.Status.ResourceClaimStatuses[0].ResourceClaimName != nil,
		"survivor: GPU env %v, claim statuses %+v", gpus, pod.Status.ResourceClaimStatuses) {
		return
	}
	claimName := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
	claim, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), claimName, metav1.GetOptions{})
	must(err, "claim")
	before := d.containerID(ns, "survivor", "app")
	oldDevlet, _ := d.devletPod()

	start := time.Now()
	d.c.powerCycle()
	logf("node Ready %.1fs after the power loss", time.Since(start).Seconds())
	waitFor("devlet-node Ready after the reboot", 120*time.Second, func() (bool, string) {
		p, why := d.devletPod()
		if p == nil {
			return false, why
		}
		// The same pod object, its containers restarted in a new sandbox.
		restarted := oldDevlet == nil || p.UID != oldDevlet.UID
		for _, s := range p.Status.ContainerStatuses {
			restarted = restarted || s.RestartCount > 0
		}
		return restarted, "not restarted yet"
	})
	logf("devlet-node Ready %.1fs after the power loss", time.Since(start).Seconds())
	var after string
	waitFor("survivor's container running again", 120*time.Second, func() (bool, string) {
		out, err := d.c.crictlErr("ps", "-q", "--state", "Running", "--name", "^app$",
			"--label", "io.kubernetes.pod.namespace="+ns, "--label", "io.kubernetes.pod.name=survivor")
		after = strings.TrimSpace(out)
		return err == nil && after != "" && after != before && !strings.Contains(after, "\n"),
			fmt.Sprintf("%q %v", out, err)
	})
	logf("survivor running again %.1fs after the power loss", time.Since(start).Seconds())
	var got []string
	for _, line := range strings.Split(d.inside(after, "env"), "\n") {
		if strings.HasPrefix(line, "DEVLET_DEVICE_GPU_") {
			got = append(got, line)
		}
	}
	check(strings.Join(got, ",") == strings.Join(gpus, ","), "survivor's GPU env after the reboot %v, before %v",
		got, gpus)
	specs := d.cdiFilesFor(string(claim.UID))
	check(len(specs) > 0, "no CDI spec for claim %s after the reboot", claim.UID)
	for _, n := range []string{"/dev/dri"} {
		check(strings.TrimSpace(d.inside(after, "ls "+n+" | wc -l")) != "0", "no %s nodes after the reboot", n)
	}
	meta := "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/" +
		driverName + "-metadata.json"
	text := d.inside(after, "cat "+meta)
	device := claim.Status.Allocation.Devices.Results[0].Device
	check(strings.Contains(text, `"`+device+`"`), "metadata after the reboot: %q", text)
	now, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), claimName, metav1.GetOptions{})
	must(err, "claim")
	check(now.UID == claim.UID && now.Status.Allocation != nil &&
		now.Status.Allocation.Devices.Results[0].Device == device,
		"claim after the reboot: %s %+v", now.UID, now.Status.Allocation)
	logf("survivor after the reboot: %v, CDI spec %v, metadata names %s", got, specs, device)
	d.deletePod(ns, "survivor")
}
