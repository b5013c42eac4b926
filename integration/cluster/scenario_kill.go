package main

// Scenario 7b (issue 17 §2, scenario 7's second half): devlet-node killed with SIGKILL while the
// kubelet's NodePrepareResources for a new pod is in flight; the kubelet's retries converge on
// the restarted devlet-node and nothing leaks.

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// devletNodePID returns the host PID of the running devlet-node container.
func (d *devlet) devletNodePID() (int, string) {
	pod, why := d.devletPod()
	if pod == nil {
		fatalf("no devlet-node pod: %s", why)
	}
	id := d.containerID(devletNamespace, pod.Name, "devlet-node")
	var info struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	must(json.Unmarshal([]byte(d.c.crictl("inspect", id)), &info), "crictl inspect devlet-node")
	if info.Info.Pid <= 0 {
		fatalf("devlet-node container %s has no pid", id)
	}
	return info.Info.Pid, id
}

// scenarioDevletKilledDuringPrepare (7b): devlet-node is stopped (SIGSTOP) so that the kubelet's
// NodePrepareResources for a new GPU pod cannot finish; once the claim is allocated and reserved
// for the pod (the kubelet prepares only then) and the pod is not running, devlet-node gets
// SIGKILL. The kubelet restarts the container, devlet-node registers again and the kubelet's
// retry prepares the claim: the pod runs with one GPU, the claim has one CDI spec set. After the
// pod is deleted no file naming the claim is left.
func scenarioDevletKilledDuringPrepare(d *devlet) {
	ns := "scenario-7b"
	d.ensureNamespace(ns)
	d.createGPUTemplate(ns)
	tmpl := "one-gpu"
	pid, oldID := d.devletNodePID()
	must(syscall.Kill(pid, syscall.SIGSTOP), "SIGSTOP devlet-node")
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	_, err := d.c.client.CoreV1().Pods(ns).Create(d.ctx(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "interrupted", Namespace: ns},
		Spec: corev1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: new(int64),
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}},
			Containers:     []corev1.Container{sleeper("app", "gpu")}},
	}, metav1.CreateOptions{})
	must(err, "pod interrupted")
	start := time.Now()
	var claimName, claimUID string
	waitFor("the pod's claim allocated and reserved (the kubelet then prepares it)", 60*time.Second,
		func() (bool, string) {
			p, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), "interrupted", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
				return false, "no claim yet"
			}
			claimName = *p.Status.ResourceClaimStatuses[0].ResourceClaimName
			c, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), claimName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			claimUID = string(c.UID)
			return c.Status.Allocation != nil && len(c.Status.ReservedFor) == 1 && p.Spec.NodeName != "",
				"not allocated/reserved/bound yet"
		})
	// Give the kubelet time to send NodePrepareResources to the stopped devlet-node.
	time.Sleep(2 * time.Second)
	p, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), "interrupted", metav1.GetOptions{})
	must(err, "pod")
	check(p.Status.Phase == corev1.PodPending, "interrupted ran while devlet-node was stopped: %s", p.Status.Phase)
	must(syscall.Kill(pid, syscall.SIGKILL), "SIGKILL devlet-node")
	stopped = false
	killed := time.Now()
	logf("devlet-node (pid %d) SIGKILLed %.1fs after the pod's creation, pod %s", pid,
		time.Since(start).Seconds(), p.Status.Phase)
	waitFor("devlet-node restarted and Ready", 120*time.Second, func() (bool, string) {
		pod, why := d.devletPod()
		if pod == nil {
			return false, why
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == "devlet-node" && s.ContainerID != "" && !strings.HasSuffix(s.ContainerID, oldID) {
				return true, ""
			}
		}
		return false, "the old container still"
	})
	logf("devlet-node Ready again %.1fs after the kill", time.Since(killed).Seconds())
	d.waitRunning(ns, "interrupted", 120*time.Second)
	logf("interrupted Running %.1fs after the kill", time.Since(killed).Seconds())
	id := d.containerID(ns, "interrupted", "app")
	var gpus []string
	for _, line := range strings.Split(d.inside(id, "env"), "\n") {
		if strings.HasPrefix(line, "DEVLET_DEVICE_GPU_") {
			gpus = append(gpus, line)
		}
	}
	check(len(gpus) == 1, "interrupted's GPU env %v, want one", gpus)
	specs := d.cdiFilesFor(claimUID)
	check(len(specs) > 0 && len(specs) <= 2, "CDI specs for claim %s: %v", claimUID, specs)
	logf("interrupted: %v, CDI specs %v", gpus, specs)
	d.deletePod(ns, "interrupted")
	waitFor("claim "+claimName+" gone or deallocated", 60*time.Second, func() (bool, string) {
		c, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), claimName, metav1.GetOptions{})
		if err != nil {
			return true, ""
		}
		return c.Status.Allocation == nil, "allocated"
	})
	waitFor("nothing left naming claim "+claimUID, 30*time.Second, func() (bool, string) {
		left := append(d.cdiFilesFor(claimUID), d.hostFilesFor(claimUID)...)
		return len(left) == 0, fmt.Sprint(left)
	})
}
