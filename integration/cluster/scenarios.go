package main

// The scenarios of issue 17 §2, each asserted from the API (objects) and from inside the running
// container (what it sees, through crictl exec as the kubelet's streaming would).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var scenarios = map[string]func(d *devlet){
	"1":   scenarioGPUPod,
	"2":   scenarioContainerScoping,
	"3":   scenarioExtendedResource,
	"4":   scenarioVFIOPod,
	"5":   scenarioDRACPUs,
	"6":   scenarioExtender,
	"7":   scenarioDevletPodDeleted,
	"7b":  scenarioDevletKilledDuringPrepare,
	"8":   scenarioReboot,
	"bad": scenarioBadInput,
	"9":   scenarioPodDeletion,
	"10":  scenarioDeviceFailure,
}

// gpuExtendedResource is the gpu DeviceClass's extendedResourceName (values.go).
const gpuExtendedResource = corev1.ResourceName(driverName + "/gpu")

var resourceOne = resource.MustParse("1")

// gpuPod is scenario 1's pod, kept for scenario 9.
type gpuPodState struct {
	pod      *corev1.Pod
	claim    *resourcev1.ResourceClaim
	device   string
	claimUID string
}

var scenario1 *gpuPodState

const (
	s1Namespace = "scenario-1"
	gpuClass    = "gpu.devlet.io"
)

func (d *devlet) ctx() context.Context { return context.Background() }

func (d *devlet) ensureNamespace(name string) {
	_, err := d.c.client.CoreV1().Namespaces().Create(d.ctx(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		fatalf("namespace %s: %v", name, err)
	}
	waitFor("ServiceAccount "+name+"/default", 60*time.Second, func() (bool, string) {
		_, err := d.c.client.CoreV1().ServiceAccounts(name).Get(d.ctx(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// sleeper is a busybox container that sleeps, from the locally imported test image.
func sleeper(name string, claims ...string) corev1.Container {
	ctr := corev1.Container{Name: name, Image: boxImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"/bin/sleep", "2147483647"}}
	for _, c := range claims {
		ctr.Resources.Claims = append(ctr.Resources.Claims, corev1.ResourceClaim{Name: c})
	}
	return ctr
}

// waitRunning waits for the pod to run and returns it; on timeout it prints the pod's events.
func (d *devlet) waitRunning(ns, name string, timeout time.Duration) *corev1.Pod {
	var pod *corev1.Pod
	deadline := time.Now().Add(timeout)
	for {
		p, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			pod = p
			break
		}
		if time.Now().After(deadline) {
			events, _ := d.c.client.CoreV1().Events(ns).List(d.ctx(), metav1.ListOptions{})
			for _, e := range events.Items {
				fmt.Printf("    event %s %s: %s %s\n", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
			}
			if p != nil {
				fatalf("pod %s/%s not Running within %v: %s %v", ns, name, timeout, p.Status.Phase,
					p.Status.ContainerStatuses)
			}
			fatalf("pod %s/%s: %v", ns, name, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return pod
}

// containerID returns the CRI id of a running container of a pod.
func (d *devlet) containerID(ns, pod, container string) string {
	var id string
	waitFor("container "+container+" of "+ns+"/"+pod, 30*time.Second, func() (bool, string) {
		out, err := d.c.crictlErr("ps", "-q", "--state", "Running", "--name", "^"+container+"$",
			"--label", "io.kubernetes.pod.namespace="+ns, "--label", "io.kubernetes.pod.name="+pod)
		id = strings.TrimSpace(out)
		return err == nil && id != "" && !strings.Contains(id, "\n"), fmt.Sprintf("%q %v", out, err)
	})
	return id
}

// inside runs a shell command in the container and returns its output.
func (d *devlet) inside(id, script string) string {
	out, err := d.c.crictlErr("exec", id, "/bin/sh", "-c", script)
	check(err == nil, "crictl exec %s: %v", script, err)
	return out
}

func statusLine(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// expandCPUs parses a cpulist ("0-3,8").
func expandCPUs(list string) map[int]bool {
	out := map[int]bool{}
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if found {
			b, _ = strconv.Atoi(hi)
		}
		for i := a; i <= b; i++ {
			out[i] = true
		}
	}
	return out
}

// numaCPUs returns the CPUs of a NUMA node of the simulated topology that this machine has.
func (d *devlet) numaCPUs(numa int) map[int]bool {
	data, err := os.ReadFile(d.simDir("topology.xml"))
	must(err, "topology")
	// hwloc XML: <object type="NUMANode" os_index="N" cpuset="0x..." ...>
	text := string(data)
	marker := fmt.Sprintf(`type="NUMANode" os_index="%d"`, numa)
	i := strings.Index(text, marker)
	if i < 0 {
		fatalf("NUMA node %d not in the topology", numa)
	}
	rest := text[i:]
	j := strings.Index(rest, `cpuset="`)
	mask := rest[j+len(`cpuset="`):]
	mask = mask[:strings.Index(mask, `"`)]
	sim := hwlocMask(mask)
	machine := expandCPUs(readTrim("/sys/fs/cgroup/cpuset/cpuset.cpus"))
	out := map[int]bool{}
	for cpu := range sim {
		if machine[cpu] {
			out[cpu] = true
		}
	}
	return out
}

// hwlocMask parses hwloc's "0xffffffff,0x0000ffff" bitmap (most significant word first).
func hwlocMask(mask string) map[int]bool {
	words := strings.Split(mask, ",")
	out := map[int]bool{}
	for i, w := range words {
		v, err := strconv.ParseUint(strings.TrimPrefix(w, "0x"), 16, 64)
		if err != nil {
			continue
		}
		base := (len(words) - 1 - i) * 32
		for bit := 0; bit < 32; bit++ {
			if v&(1<<bit) != 0 {
				out[base+bit] = true
			}
		}
	}
	return out
}

func readTrim(path string) string {
	data, _ := os.ReadFile(path)
	return strings.TrimSpace(string(data))
}

func sameSet(a, b map[int]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// cdiFilesFor returns the CDI spec files (of containerd's CDI dir) that mention the claim.
func (d *devlet) cdiFilesFor(claimUID string) []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(d.c.cdiDir(), "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(filepath.Base(f), claimUID) || strings.Contains(string(data), claimUID) {
			out = append(out, f)
		}
	}
	return out
}

// hostFilesFor returns files below the dirs devlet writes on the host (kubelet plugin dir, CDI
// dir, the simulated node's dir) whose path names the claim.
func (d *devlet) hostFilesFor(claimUID string) []string {
	var out []string
	for _, root := range []string{d.c.cdiDir(), d.c.kubeletRoot(), d.simDir(), d.c.path("devlet-state")} {
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && strings.Contains(p, claimUID) {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// createGPUTemplate creates the ResourceClaimTemplate "one-gpu" (one device of the GPU class) in
// namespace ns.
func (d *devlet) createGPUTemplate(ns string) {
	_, err := d.c.client.ResourceV1().ResourceClaimTemplates(ns).Create(d.ctx(),
		&resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
				Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
					Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuClass},
				}}}}},
		}, metav1.CreateOptions{})
	must(err, "ResourceClaimTemplate")
}

// scenarioGPUPod (issue 17 §2 scenario 1): a pod with a ResourceClaimTemplate for one GPU goes
// Running; the claim is allocated on the node's slice and reserved for the pod; inside, the
// container has the CDI env and device node, the KEP-5304 metadata file at the standard path
// and a cpuset of the GPU's NUMA node.
func scenarioGPUPod(d *devlet) {
	ns := s1Namespace
	d.ensureNamespace(ns)
	d.createGPUTemplate(ns)
	tmpl := "one-gpu"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-pod", Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64),
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu",
				ResourceClaimTemplateName: &tmpl}},
			Containers: []corev1.Container{sleeper("app", "gpu")},
		},
	}
	_, err := d.c.client.CoreV1().Pods(ns).Create(d.ctx(), pod, metav1.CreateOptions{})
	must(err, "pod")
	start := time.Now()
	pod = d.waitRunning(ns, "gpu-pod", 180*time.Second)
	logf("gpu-pod Running %.1fs after creation", time.Since(start).Seconds())

	// ---- the API: the generated claim allocated on this node's slice, reserved for the pod.
	if !check(len(pod.Status.ResourceClaimStatuses) == 1 &&
		pod.Status.ResourceClaimStatuses[0].ResourceClaimName != nil,
		"pod resourceClaimStatuses: %+v", pod.Status.ResourceClaimStatuses) {
		return
	}
	claimName := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
	claim, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), claimName, metav1.GetOptions{})
	must(err, "claim")
	st := &gpuPodState{pod: pod, claim: claim, claimUID: string(claim.UID)}
	scenario1 = st
	if !check(claim.Status.Allocation != nil && len(claim.Status.Allocation.Devices.Results) == 1,
		"claim %s not allocated with one device: %+v", claimName, claim.Status.Allocation) {
		return
	}
	result := claim.Status.Allocation.Devices.Results[0]
	st.device = result.Device
	check(result.Driver == driverName && result.Pool == nodeName && result.Request == "gpu",
		"allocation result %+v", result)
	reserved := false
	for _, r := range claim.Status.ReservedFor {
		reserved = reserved || (r.Resource == "pods" && r.UID == pod.UID)
	}
	check(reserved, "claim reservedFor %+v lacks the pod %s", claim.Status.ReservedFor, pod.UID)
	logf("claim %s: %s/%s/%s, reserved for %s", claimName, result.Driver, result.Pool, result.Device,
		pod.Name)

	// The device's attributes as published: its NUMA node.
	numa := -1
	slices, err := d.c.client.ResourceV1().ResourceSlices().List(d.ctx(), metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + nodeName + ",spec.driver=" + driverName})
	must(err, "slices")
	for _, s := range slices.Items {
		for _, dev := range s.Spec.Devices {
			if dev.Name != result.Device {
				continue
			}
			for name, attr := range dev.Attributes {
				if string(name) == "resource.kubernetes.io/numaNode" && attr.IntValue != nil {
					numa = int(*attr.IntValue)
				}
			}
		}
	}
	check(numa >= 0, "device %s has no resource.kubernetes.io/numaNode attribute", result.Device)

	// ---- inside the container.
	id := d.containerID(ns, "gpu-pod", "app")
	// The CDI spec devlet wrote for the claim: its env and device nodes must be in the container.
	specs := d.cdiFilesFor(st.claimUID)
	check(len(specs) > 0, "no CDI spec in %s names claim %s", d.c.cdiDir(), st.claimUID)
	var envs, nodes []string
	for _, f := range specs {
		var spec struct {
			Devices []struct {
				ContainerEdits struct {
					Env         []string `json:"env"`
					DeviceNodes []struct {
						Path string `json:"path"`
					} `json:"deviceNodes"`
				} `json:"containerEdits"`
			} `json:"devices"`
			ContainerEdits struct {
				Env []string `json:"env"`
			} `json:"containerEdits"`
		}
		data, _ := os.ReadFile(f)
		if json.Unmarshal(data, &spec) != nil {
			continue
		}
		envs = append(envs, spec.ContainerEdits.Env...)
		for _, dev := range spec.Devices {
			envs = append(envs, dev.ContainerEdits.Env...)
			for _, n := range dev.ContainerEdits.DeviceNodes {
				nodes = append(nodes, n.Path)
			}
		}
	}
	check(len(envs) > 0 && len(nodes) > 0, "CDI specs %v carry no env (%v) or device nodes (%v)",
		specs, envs, nodes)
	env := d.inside(id, "env")
	for _, e := range envs {
		check(strings.Contains("\n"+env+"\n", "\n"+e+"\n"), "env %s missing inside the container", e)
	}
	for _, n := range nodes {
		check(strings.TrimSpace(d.inside(id, "test -c "+n+" && echo char")) == "char",
			"device node %s is not a character device inside the container", n)
	}
	logf("inside: env %v, device nodes %v", envs, nodes)

	// KEP-5304: resourceclaimtemplates/<podClaimName>/<request>/<driver>-metadata.json.
	meta := "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/" +
		driverName + "-metadata.json"
	text := d.inside(id, "cat "+meta)
	check(strings.Contains(text, `"metadata.resource.k8s.io/v1beta1"`) &&
		strings.Contains(text, `"`+result.Device+`"`),
		"metadata file %s inside the container: %q", meta, text)
	check(strings.Contains(d.inside(id, "grep ' "+filepath.Dir(meta)+" ' /proc/self/mountinfo || "+
		"grep ' "+meta+" ' /proc/self/mountinfo"), " ro"),
		"metadata %s not mounted read-only", meta)

	// NUMA-aligned cpuset: the CPUs of the device's NUMA node this machine has, and its memory node.
	status := d.inside(id, "cat /proc/self/status")
	cpus := statusLine(status, "Cpus_allowed_list")
	mems := statusLine(status, "Mems_allowed_list")
	if numa >= 0 {
		want := d.numaCPUs(numa)
		check(len(want) > 0 && sameSet(expandCPUs(cpus), want),
			"Cpus_allowed_list %q, want NUMA node %d's CPUs on this machine %v", cpus, numa, want)
		check(mems == strconv.Itoa(numa), "Mems_allowed_list %q, want %d", mems, numa)
	}
	logf("inside: %s Cpus_allowed_list %s Mems_allowed_list %s (device NUMA node %d)", meta, cpus,
		mems, numa)
}

// scenarioPodDeletion (scenario 9): scenario 1's pod deleted: the kubelet unprepares the claim
// (devlet removes its CDI spec and metadata files), the generated claim is deleted, the device
// is free again.
func scenarioPodDeletion(d *devlet) {
	st := scenario1
	if st == nil {
		fatalf("scenario 9 needs scenario 1's pod (run --scenarios 1,9)")
	}
	ns := st.pod.Namespace
	must(d.c.client.CoreV1().Pods(ns).Delete(d.ctx(), st.pod.Name, metav1.DeleteOptions{}), "delete pod")
	start := time.Now()
	waitFor("pod gone", 120*time.Second, func() (bool, string) {
		_, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), st.pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	logf("pod gone %.1fs after deletion", time.Since(start).Seconds())
	waitFor("claim deallocated or deleted", 60*time.Second, func() (bool, string) {
		claim, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), st.claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return claim.Status.Allocation == nil && len(claim.Status.ReservedFor) == 0,
			fmt.Sprintf("allocation %v reservedFor %v", claim.Status.Allocation != nil, claim.Status.ReservedFor)
	})
	waitFor("devlet's files of the claim gone", 30*time.Second, func() (bool, string) {
		left := append(d.cdiFilesFor(st.claimUID), d.hostFilesFor(st.claimUID)...)
		return len(left) == 0, fmt.Sprint(left)
	})
	// The kubelet stops the sandbox (it removes it later, in its garbage collection).
	out, _ := d.c.crictlErr("pods", "-q", "--state", "ready", "--namespace", ns)
	check(strings.TrimSpace(out) == "", "ready sandboxes of %s left: %s", ns, out)
}

// gpuPodEnv runs a pod in ns whose container "app" uses a GPU (through claims or an extended
// resource, as spec says), waits for it to run and returns the GPU env vars devlet gave it.
func (d *devlet) runGPUPod(ns, name string, spec corev1.PodSpec) (*corev1.Pod, []string) {
	spec.HostNetwork = true
	spec.TerminationGracePeriodSeconds = new(int64)
	_, err := d.c.client.CoreV1().Pods(ns).Create(d.ctx(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}, metav1.CreateOptions{})
	must(err, "pod "+name)
	pod := d.waitRunning(ns, name, 180*time.Second)
	id := d.containerID(ns, name, "app")
	var gpus []string
	for _, line := range strings.Split(d.inside(id, "env"), "\n") {
		if strings.HasPrefix(line, "DEVLET_DEVICE_GPU_") {
			gpus = append(gpus, line)
		}
	}
	return pod, gpus
}

// deletePod deletes a pod and waits until it is gone and devlet has unprepared its claims (no CDI
// spec names them): the pod object goes before the kubelet unprepares, so a claim allocated
// right after could get a device devlet still holds for the old one, and the kubelet's retry
// of that prepare waits out its backoff (about 14 s).
func (d *devlet) deletePod(ns, name string) {
	var claimUIDs []string
	if pod, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), name, metav1.GetOptions{}); err == nil {
		var names []string
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				names = append(names, *st.ResourceClaimName)
			}
		}
		if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
			names = append(names, st.ResourceClaimName)
		}
		for _, n := range names {
			if c, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), n, metav1.GetOptions{}); err == nil {
				claimUIDs = append(claimUIDs, string(c.UID))
			}
		}
	}
	err := d.c.client.CoreV1().Pods(ns).Delete(d.ctx(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		fatalf("delete %s/%s: %v", ns, name, err)
	}
	waitFor("pod "+ns+"/"+name+" gone", 120*time.Second, func() (bool, string) {
		_, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	waitFor("claims of "+ns+"/"+name+" unprepared", 60*time.Second, func() (bool, string) {
		var left []string
		for _, uid := range claimUIDs {
			left = append(left, d.cdiFilesFor(uid)...)
		}
		return len(left) == 0, fmt.Sprint(left)
	})
}

// scenarioExtendedResource (scenario 3): a pod asks for devlet.io/gpu: 1 (the gpu DeviceClass's
// extendedResourceName, set through the chart's deviceClasses.gpu.extendedResourceName); the
// scheduler allocates a claim for it, the kubelet has devlet prepare it, the container gets a GPU.
func scenarioExtendedResource(d *devlet) {
	ns := "scenario-3"
	d.ensureNamespace(ns)
	ctr := sleeper("app")
	ctr.Resources.Limits = corev1.ResourceList{gpuExtendedResource: resourceOne}
	pod, gpus := d.runGPUPod(ns, "ext-gpu", corev1.PodSpec{Containers: []corev1.Container{ctr}})
	check(len(gpus) == 1, "GPU env inside the container: %v, want one", gpus)
	status := pod.Status.ExtendedResourceClaimStatus
	if check(status != nil && status.ResourceClaimName != "", "pod extendedResourceClaimStatus %+v", status) {
		claim, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), status.ResourceClaimName,
			metav1.GetOptions{})
		must(err, "extended-resource claim")
		check(claim.Status.Allocation != nil && len(claim.Status.Allocation.Devices.Results) == 1 &&
			claim.Status.Allocation.Devices.Results[0].Driver == driverName,
			"extended-resource claim allocation %+v", claim.Status.Allocation)
		logf("ext-gpu: claim %s, %v", claim.Name, gpus)
	}
	d.deletePod(ns, "ext-gpu")
}

// scenarioDevletPodDeleted (scenario 7, first half): devlet-node's pod deleted while scenario 1's
// pod runs; the DaemonSet makes a new one; the running container is untouched (same container,
// same env) and a new pod still gets a GPU prepared.
func scenarioDevletPodDeleted(d *devlet) {
	st := scenario1
	if st == nil {
		fatalf("scenario 7 needs scenario 1's pod (run --scenarios 1,7)")
	}
	before := d.containerID(st.pod.Namespace, st.pod.Name, "app")
	envBefore := d.inside(before, "env | grep ^DEVLET_ | sort")
	old, why := d.devletPod()
	if old == nil {
		fatalf("no devlet-node pod: %s", why)
	}
	must(d.c.client.CoreV1().Pods(devletNamespace).Delete(d.ctx(), old.Name, metav1.DeleteOptions{}),
		"delete devlet-node pod")
	start := time.Now()
	waitFor("a new devlet-node pod Ready", 180*time.Second, func() (bool, string) {
		p, why := d.devletPod()
		return p != nil && p.UID != old.UID, why
	})
	logf("new devlet-node pod Ready %.1fs after the old one was deleted", time.Since(start).Seconds())
	after := d.containerID(st.pod.Namespace, st.pod.Name, "app")
	check(after == before, "scenario 1's container changed: %s -> %s", before, after)
	check(d.inside(after, "env | grep ^DEVLET_ | sort") == envBefore, "scenario 1's container env changed")
	d.waitSlices(60 * time.Second)
	ns := "scenario-7"
	d.ensureNamespace(ns)
	tmpl := "one-gpu"
	d.createGPUTemplate(ns)
	_, gpus := d.runGPUPod(ns, "after-restart", corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}},
		Containers:     []corev1.Container{sleeper("app", "gpu")},
	})
	check(len(gpus) == 1, "new pod's GPU env: %v", gpus)
	d.deletePod(ns, "after-restart")
}

// ociSpec is the part of a container's OCI spec (crictl inspect) scenario 2 looks at.
type ociSpec struct {
	Info struct {
		RuntimeSpec struct {
			Process struct {
				Env []string `json:"env"`
			} `json:"process"`
			Mounts []struct {
				Destination string `json:"destination"`
			} `json:"mounts"`
			Linux struct {
				Devices []struct {
					Path string `json:"path"`
				} `json:"devices"`
				Resources struct {
					CPU *struct {
						Quota *int64 `json:"quota"`
						Cpus  string `json:"cpus"`
						Mems  string `json:"mems"`
					} `json:"cpu"`
					Memory *struct {
						Limit *int64 `json:"limit"`
					} `json:"memory"`
				} `json:"resources"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	} `json:"info"`
}

// inspectAny returns the OCI spec of a pod's container in any state (an init container has exited).
func (d *devlet) inspectAny(ns, pod, container string) *ociSpec {
	var id string
	waitFor("container "+container+" of "+ns+"/"+pod, 30*time.Second, func() (bool, string) {
		out, err := d.c.crictlErr("ps", "-a", "-q", "--name", "^"+container+"$",
			"--label", "io.kubernetes.pod.namespace="+ns, "--label", "io.kubernetes.pod.name="+pod)
		id = strings.Fields(out + " ")[0]
		return err == nil && id != "", fmt.Sprintf("%q %v", out, err)
	})
	var spec ociSpec
	must(json.Unmarshal([]byte(d.c.crictl("inspect", id)), &spec), "crictl inspect "+container)
	return &spec
}

// devletEdits lists what devlet gave a container: DEVLET_ env, /dev/dri nodes, metadata mounts.
func devletEdits(s *ociSpec) []string {
	var out []string
	for _, e := range s.Info.RuntimeSpec.Process.Env {
		if strings.HasPrefix(e, "DEVLET_") {
			out = append(out, e)
		}
	}
	for _, dev := range s.Info.RuntimeSpec.Linux.Devices {
		if strings.HasPrefix(dev.Path, "/dev/dri/") {
			out = append(out, dev.Path)
		}
	}
	for _, m := range s.Info.RuntimeSpec.Mounts {
		if strings.HasSuffix(m.Destination, "-metadata.json") ||
			strings.Contains(m.Destination, "dra-device-attributes") {
			out = append(out, m.Destination)
		}
	}
	return out
}

// specLimits renders what a container's OCI spec asks of its cgroups: CFS quota, cpuset, memory
// nodes, memory limit ("-" where unset).
func specLimits(s *ociSpec) (quota, cpus, mems, memory string) {
	quota, cpus, mems, memory = "-", "-", "-", "-"
	r := s.Info.RuntimeSpec.Linux.Resources
	if r.CPU != nil {
		if r.CPU.Quota != nil {
			quota = strconv.FormatInt(*r.CPU.Quota, 10)
		}
		if r.CPU.Cpus != "" {
			cpus = r.CPU.Cpus
		}
		if r.CPU.Mems != "" {
			mems = r.CPU.Mems
		}
	}
	if r.Memory != nil && r.Memory.Limit != nil {
		memory = strconv.FormatInt(*r.Memory.Limit, 10)
	}
	return
}

// cgroupLimits reads, from inside a running container, its own v1 cgroups (runc mounts the
// container's cgroup of each controller at /sys/fs/cgroup/<controller>).
func (d *devlet) cgroupLimits(id string) (quota, cpus, mems, memory string) {
	out := d.inside(id, "cd /sys/fs/cgroup && cat cpu/cpu.cfs_quota_us cpuset/cpuset.cpus "+
		"cpuset/cpuset.mems memory/memory.limit_in_bytes")
	f := strings.Fields(out)
	if !check(len(f) == 4, "cgroup files inside %s: %q", id, out) {
		return
	}
	return f[0], f[1], f[2], f[3]
}

// scenarioContainerScoping (scenario 2): a pod with an init container, a sidecar (restartable
// init container) and a main container; only the main one names the claim (a GPU and 1 CPU +
// 64Mi of the NUMA node's consumable CPU device), and only it gets the GPU's env, device nodes,
// metadata mount, devlet's memory nodes and the CPU/memory limits DRA allocated: checked in each
// container's OCI spec and, for the running ones, in their v1 cgroups read from inside. The init
// container and the sidecar keep the limits of their own spec. Then a Guaranteed pod whose
// exclusive CPU is off its GPU's NUMA node (devlet once widened its cpuset to NUMA node 1's
// simulated CPUs, which this machine lacks, and runc refused it).
func scenarioContainerScoping(d *devlet) {
	ns := "scenario-2"
	d.ensureNamespace(ns)
	cpuOne, mem64 := resource.MustParse("1"), resource.MustParse("64Mi")
	_, err := d.c.client.ResourceV1().ResourceClaimTemplates(ns).Create(d.ctx(),
		&resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-and-cpu"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
				Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
					{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuClass}},
					{Name: "cpu", Exactly: &resourcev1.ExactDeviceRequest{
						DeviceClassName: "cpu." + driverName,
						Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
							Expression: `device.attributes["resource.kubernetes.io"].numaNode == 0`}}},
						Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{
							"cpus": cpuOne, "memory": mem64}}}},
				}}}},
		}, metav1.CreateOptions{})
	must(err, "ResourceClaimTemplate gpu-and-cpu")
	tmpl := "gpu-and-cpu"
	always := corev1.ContainerRestartPolicyAlways
	limits := func(cpu, memory string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}
	}
	init := sleeper("init")
	init.Command = []string{"/bin/true"}
	init.Resources = limits("300m", "16Mi")
	sidecar := sleeper("sidecar")
	sidecar.RestartPolicy = &always
	sidecar.Resources = limits("200m", "32Mi")
	d.runGPUPod(ns, "scoped", corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}},
		InitContainers: []corev1.Container{init, sidecar},
		Containers:     []corev1.Container{sleeper("app", "gpu")},
	})
	appSpec := d.inspectAny(ns, "scoped", "app")
	app := devletEdits(appSpec)
	gpuEnv, devNodes, metadata := 0, 0, 0
	for _, e := range app {
		switch {
		case strings.HasPrefix(e, "DEVLET_DEVICE_GPU_"):
			gpuEnv++
		case strings.HasPrefix(e, "/dev/dri/"):
			devNodes++
		case strings.HasPrefix(e, "/var/run/kubernetes.io/"):
			metadata++
		}
	}
	check(gpuEnv == 1 && devNodes > 0 && metadata > 0,
		"main container: GPU env %d, device nodes %d, metadata mounts %d: %v", gpuEnv, devNodes, metadata, app)
	for _, name := range []string{"init", "sidecar"} {
		got := devletEdits(d.inspectAny(ns, "scoped", name))
		check(len(got) == 0, "%s container, which names no claim, got %v", name, got)
	}
	// CPU and memory: 1 CPU of 100 ms per 100 ms period and 64Mi for the main container (DRA,
	// through devlet), NUMA node 0's CPUs this machine has and memory node 0 set by devlet; the
	// others keep their spec's limits and the kubelet's cpuset, no memory nodes from devlet.
	numa0 := d.numaCPUs(0)
	q, cpus, mems, memory := specLimits(appSpec)
	check(q == "100000" && memory == strconv.Itoa(64<<20) && mems == "0" &&
		sameSet(expandCPUs(cpus), numa0),
		"main container's OCI spec: quota %s cpus %s mems %s memory %s, want 100000, %v, 0, %d",
		q, cpus, mems, memory, numa0, 64<<20)
	appID := d.containerID(ns, "scoped", "app")
	cq, ccpus, cmems, cmem := d.cgroupLimits(appID)
	check(cq == "100000" && cmem == strconv.Itoa(64<<20) && cmems == "0" && sameSet(expandCPUs(ccpus), numa0),
		"main container's cgroups: cfs_quota_us %s cpuset.cpus %s cpuset.mems %s memory.limit_in_bytes %s",
		cq, ccpus, cmems, cmem)
	logf("scoped app: OCI quota %s cpus %s mems %s memory %s; cgroups %s %s %s %s", q, cpus, mems,
		memory, cq, ccpus, cmems, cmem)
	for _, c := range []struct{ name, quota, memory string }{
		{"init", "30000", strconv.Itoa(16 << 20)}, {"sidecar", "20000", strconv.Itoa(32 << 20)}} {
		q, cpus, mems, memory := specLimits(d.inspectAny(ns, "scoped", c.name))
		check(q == c.quota && memory == c.memory && mems == "-",
			"%s container's OCI spec: quota %s cpus %s mems %s memory %s, want its own %s and %s, no mems",
			c.name, q, cpus, mems, memory, c.quota, c.memory)
		logf("scoped %s: OCI quota %s cpus %s mems %s memory %s", c.name, q, cpus, mems, memory)
	}
	sideID := d.containerID(ns, "scoped", "sidecar")
	cq, ccpus, cmems, cmem = d.cgroupLimits(sideID)
	check(cq == "20000" && cmem == strconv.Itoa(32<<20), "sidecar's cgroups: cfs_quota_us %s memory %s", cq, cmem)
	logf("scoped sidecar: cgroups %s %s %s %s; init and sidecar got nothing from devlet", cq, ccpus, cmems, cmem)
	d.deletePod(ns, "scoped")

	// A Guaranteed pod: the static CPU manager gives its container an exclusive CPU (and, with
	// DisableCPUQuotaWithExclusiveCPUs, no CFS quota); its GPU is on NUMA node 1, whose simulated
	// CPUs this machine lacks. devlet leaves the kubelet's cpuset alone.
	_, err = d.c.client.ResourceV1().ResourceClaimTemplates(ns).Create(d.ctx(),
		&resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "numa1-gpu"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
				Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
					Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuClass,
						Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
							Expression: `device.attributes["resource.kubernetes.io"].numaNode == 1`}}}},
				}}}}},
		}, metav1.CreateOptions{})
	must(err, "ResourceClaimTemplate numa1-gpu")
	tmpl1 := "numa1-gpu"
	guaranteed := sleeper("app", "gpu")
	guaranteed.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: cpuOne,
		corev1.ResourceMemory: resource.MustParse("32Mi")}
	pod, gpus := d.runGPUPod(ns, "exclusive", corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl1}},
		Containers:     []corev1.Container{guaranteed},
	})
	check(pod.Status.QOSClass == corev1.PodQOSGuaranteed && len(gpus) == 1,
		"exclusive: QoS %s, GPU env %v", pod.Status.QOSClass, gpus)
	id := d.containerID(ns, "exclusive", "app")
	status := d.inside(id, "cat /proc/self/status")
	got := expandCPUs(statusLine(status, "Cpus_allowed_list"))
	machine := expandCPUs(readTrim("/sys/fs/cgroup/cpuset/cpuset.cpus"))
	inMachine := len(got) == 1
	for cpu := range got {
		inMachine = inMachine && machine[cpu]
	}
	check(inMachine, "exclusive: Cpus_allowed_list %q, want the kubelet's one exclusive CPU of this machine",
		statusLine(status, "Cpus_allowed_list"))
	logf("exclusive (Guaranteed, GPU on NUMA 1): %v, Cpus_allowed_list %s Mems_allowed_list %s", gpus,
		statusLine(status, "Cpus_allowed_list"), statusLine(status, "Mems_allowed_list"))
	d.deletePod(ns, "exclusive")
}

// scenarioDeviceFailure (scenario 10): the GPU of a running pod reports a fatal PCIe AER error
// (devlet-simnode's tree: TOTAL_ERR_FATAL raised, as the kernel counts it); devlet taints the
// device NoExecute in its ResourceSlice and the device-taint eviction controller evicts the pod.
func scenarioDeviceFailure(d *devlet) {
	ns := "scenario-10"
	d.ensureNamespace(ns)
	tmpl := "one-gpu"
	d.createGPUTemplate(ns)
	pod, _ := d.runGPUPod(ns, "victim", corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}},
		Containers:     []corev1.Container{sleeper("app", "gpu")},
	})
	if !check(len(pod.Status.ResourceClaimStatuses) == 1 && pod.Status.ResourceClaimStatuses[0].ResourceClaimName != nil,
		"victim's claim statuses %+v", pod.Status.ResourceClaimStatuses) {
		return
	}
	claim, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(),
		*pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	must(err, "claim")
	device := claim.Status.Allocation.Devices.Results[0].Device
	// The device's PCI address, as published.
	pci := ""
	slices, err := d.c.client.ResourceV1().ResourceSlices().List(d.ctx(), metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + nodeName + ",spec.driver=" + driverName})
	must(err, "slices")
	for _, s := range slices.Items {
		for _, dev := range s.Spec.Devices {
			if attr, ok := dev.Attributes["resource.kubernetes.io/pciBusID"]; ok && dev.Name == device &&
				attr.StringValue != nil {
				pci = *attr.StringValue
			}
		}
	}
	if !check(pci != "", "device %s has no resource.kubernetes.io/pciBusID", device) {
		return
	}
	aer := d.simDir("sys", "bus", "pci", "devices", pci, "aer_dev_fatal")
	data, err := os.ReadFile(aer)
	must(err, "AER counters of "+pci)
	writeFile(aer, []byte(strings.Replace(string(data), "TOTAL_ERR_FATAL 0", "TOTAL_ERR_FATAL 1", 1)), 0o644)
	start := time.Now()
	logf("fatal AER error on %s (%s), used by %s/victim", pci, device, ns)
	waitFor("NoExecute taint on "+device, 60*time.Second, func() (bool, string) {
		slices, err := d.c.client.ResourceV1().ResourceSlices().List(d.ctx(), metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + nodeName + ",spec.driver=" + driverName})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slices.Items {
			for _, dev := range s.Spec.Devices {
				for _, t := range dev.Taints {
					if dev.Name == device && t.Effect == resourcev1.DeviceTaintEffectNoExecute {
						return true, ""
					}
				}
			}
		}
		return false, "no taint yet"
	})
	logf("NoExecute taint on %s %.1fs after the error", device, time.Since(start).Seconds())
	waitFor("victim evicted", 120*time.Second, func() (bool, string) {
		p, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), "victim", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed,
			fmt.Sprintf("phase %s", p.Status.Phase)
	})
	logf("victim evicted %.1fs after the error", time.Since(start).Seconds())
	// The device recovers (counters reset, as after a device reset): later scenarios may use it.
	writeFile(aer, data, 0o644)
}
