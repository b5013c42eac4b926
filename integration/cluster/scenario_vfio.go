package main

// Scenario 4 of issue 17 §2: a KubeVirt-style VM pod with a GPU passed through with vfio-pci.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	vfioGPUClass = "vfio-gpu.devlet.io"
	// vfioGPUPCI is the GPU devlet-simnode binds to vfio-pci (--vfio) and the profiles publish as
	// a VM GPU (install.go: examples/node/profiles.yaml's 0000:b9:00.0 moved to a GPU of NUMA
	// node 0, the only one whose CPUs and memory this machine has).
	vfioGPUPCI = "0000:3a:00.0"
)

// scenarioVFIOPod (scenario 4): a virt-launcher-like pod with a ResourceClaim for one GPU of the
// chart's vfio-gpu DeviceClass goes Running. From the API: the claim is allocated by devlet.io on
// this node with the vfio GPU (the device published with pciBusID 0000:b9:00.0) and reserved for
// the pod. Inside: the legacy VFIO nodes KubeVirt opens (/dev/vfio/<the GPU's iommu group> and
// /dev/vfio/vfio, character devices), and in every request directory of the claim under the
// KEP-5304 path exactly one *-metadata.json, carrying resource.kubernetes.io/pciBusID (what
// virt-launcher reads to build its <hostdev>). The pod and claim are deleted afterwards and
// devlet's files naming the claim must be gone.
func scenarioVFIOPod(d *devlet) {
	ns := "scenario-4"
	d.ensureNamespace(ns)
	claim, err := d.c.client.ResourceV1().ResourceClaims(ns).Create(d.ctx(), &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-gpu"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: vfioGPUClass}}}}},
	}, metav1.CreateOptions{})
	must(err, "ResourceClaim vm-gpu")
	claimName := "vm-gpu"
	const podName = "virt-launcher-vm-1"
	compute := sleeper("compute", "gpu")
	_, err = d.c.client.CoreV1().Pods(ns).Create(d.ctx(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64),
			ResourceClaims:                []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claimName}},
			Containers:                    []corev1.Container{compute},
		},
	}, metav1.CreateOptions{})
	must(err, "pod "+podName)
	start := time.Now()
	pod := d.waitRunning(ns, podName, 180*time.Second)
	logf("%s Running %.1fs after creation", podName, time.Since(start).Seconds())

	// ---- the API: allocated by devlet.io on this node with the vfio GPU, reserved for the pod.
	claim, err = d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), claimName, metav1.GetOptions{})
	must(err, "claim")
	claimUID := string(claim.UID)
	if !check(claim.Status.Allocation != nil && len(claim.Status.Allocation.Devices.Results) == 1,
		"claim %s not allocated with one device: %+v", claimName, claim.Status.Allocation) {
		return
	}
	result := claim.Status.Allocation.Devices.Results[0]
	check(result.Driver == driverName && result.Pool == nodeName && result.Request == "gpu",
		"allocation result %+v", result)
	reserved := false
	for _, r := range claim.Status.ReservedFor {
		reserved = reserved || (r.Resource == "pods" && r.UID == pod.UID)
	}
	check(reserved, "claim reservedFor %+v lacks the pod %s", claim.Status.ReservedFor, pod.UID)
	slices, err := d.c.client.ResourceV1().ResourceSlices().List(d.ctx(), metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + nodeName + ",spec.driver=" + driverName})
	must(err, "slices")
	var busID string
	vfio := false
	for _, s := range slices.Items {
		if s.Spec.Pool.Name != result.Pool {
			continue
		}
		for _, dev := range s.Spec.Devices {
			if dev.Name != result.Device {
				continue
			}
			for name, attr := range dev.Attributes {
				switch strings.TrimPrefix(string(name), driverName+"/") {
				case "resource.kubernetes.io/pciBusID":
					if attr.StringValue != nil {
						busID = *attr.StringValue
					}
				case "vfio":
					vfio = attr.BoolValue != nil && *attr.BoolValue
				}
			}
		}
	}
	check(busID == vfioGPUPCI && vfio,
		"allocated device %s: pciBusID %q vfio %v in the slice, want %s and true", result.Device,
		busID, vfio, vfioGPUPCI)
	logf("claim %s: %s/%s/%s (pciBusID %s, vfio), reserved for %s", claimName, result.Driver,
		result.Pool, result.Device, busID, podName)

	// ---- inside the container.
	link, err := os.Readlink(d.simDir("sys", "bus", "pci", "devices", vfioGPUPCI, "iommu_group"))
	must(err, "iommu group of "+vfioGPUPCI+" in devlet-simnode's sysfs")
	group := filepath.Base(link)
	id := d.containerID(ns, podName, "compute")
	for _, n := range []string{"/dev/vfio/" + group, "/dev/vfio/vfio"} {
		check(strings.TrimSpace(d.inside(id, "test -c "+n+" && echo char")) == "char",
			"%s is not a character device inside the container (ls: %q)", n,
			d.inside(id, "ls -l /dev/vfio 2>&1"))
	}
	// KEP-5304 for a ResourceClaim: resourceclaims/<claimName>/<request>/<driver>-metadata.json.
	// virt-launcher wants exactly one *-metadata.json per request directory.
	base := "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/" + claimName
	listing := d.inside(id, "for r in "+base+"/*/; do echo \"$r $(ls \"$r\" | grep -c -- '-metadata.json$')\"; done")
	dirs := strings.Split(strings.TrimSpace(listing), "\n")
	check(len(dirs) == 1 && dirs[0] == base+"/gpu/ 1",
		"request directories under %s and their *-metadata.json counts: %q, want only gpu/ with 1",
		base, listing)
	meta := base + "/gpu/" + driverName + "-metadata.json"
	text := d.inside(id, "cat "+meta)
	check(strings.Contains(text, `"metadata.resource.k8s.io/v1beta1"`) &&
		strings.Contains(text, `"resource.kubernetes.io/pciBusID"`) &&
		strings.Contains(text, `"`+vfioGPUPCI+`"`) && strings.Contains(text, `"`+result.Device+`"`),
		"metadata file %s inside the container lacks the device, its pciBusID %s: %q", meta,
		vfioGPUPCI, text)
	logf("inside: /dev/vfio/%s and /dev/vfio/vfio char devices; %s with pciBusID %s", group, meta,
		vfioGPUPCI)

	// ---- afterwards: the pod and claim deleted, nothing of the claim left on the host.
	d.deletePod(ns, podName)
	must(d.c.client.ResourceV1().ResourceClaims(ns).Delete(d.ctx(), claimName, metav1.DeleteOptions{}),
		"delete claim")
	waitFor("devlet's files of the vfio claim gone", 30*time.Second, func() (bool, string) {
		left := append(d.cdiFilesFor(claimUID), d.hostFilesFor(claimUID)...)
		return len(left) == 0, fmt.Sprint(left)
	})
}
