package main

// Bad input (issue 17, "Bad input"): a pod whose claim devlet cannot prepare gets an event that
// names the reason, and nothing is left on the node.

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// scenarioBadInput: a ResourceClaim for one GPU whose opaque configuration for devlet.io sets
// bindDriver, which devlet accepts only from a DeviceClass (a claim's author could otherwise
// rebind host devices). The scheduler allocates it; devlet refuses to prepare it; the kubelet
// reports the refusal as an event on the pod, the pod never runs, and no CDI spec, metadata or
// state file names the claim, before and after the pod and claim are deleted.
func scenarioBadInput(d *devlet) {
	ns := "scenario-bad"
	d.ensureNamespace(ns)
	_, err := d.c.client.ResourceV1().ResourceClaims(ns).Create(d.ctx(), &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "rebind"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuClass}}},
			Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"},
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
					Driver: driverName,
					Parameters: runtime.RawExtension{Raw: []byte(
						`{"apiVersion":"devlet.io/v1alpha1","kind":"DeviceConfig","bindDriver":"vfio-pci"}`)},
				}}}},
		}},
	}, metav1.CreateOptions{})
	must(err, "claim rebind")
	name := "rebind"
	_, err = d.c.client.CoreV1().Pods(ns).Create(d.ctx(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: ns},
		Spec: corev1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: new(int64),
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}},
			Containers:     []corev1.Container{sleeper("app", "gpu")}},
	}, metav1.CreateOptions{})
	must(err, "pod refused")
	start := time.Now()
	var reason string
	waitFor("an event on the pod naming why devlet refused", 60*time.Second, func() (bool, string) {
		events, err := d.c.client.CoreV1().Events(ns).List(d.ctx(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=refused"})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "bindDriver") &&
				strings.Contains(e.Message, "DeviceClass") {
				reason = e.Reason + ": " + e.Message
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, fmt.Sprint(seen)
	})
	logf("event %.1fs after the pod's creation: %s", time.Since(start).Seconds(), reason)
	claim, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), name, metav1.GetOptions{})
	must(err, "claim")
	uid := string(claim.UID)
	check(claim.Status.Allocation != nil, "claim rebind not allocated: the refusal must be devlet's")
	pod, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), "refused", metav1.GetOptions{})
	must(err, "pod")
	check(pod.Status.Phase == corev1.PodPending, "refused is %s, want Pending", pod.Status.Phase)
	out, _ := d.c.crictlErr("ps", "-a", "-q", "--label", "io.kubernetes.pod.namespace="+ns)
	check(strings.TrimSpace(out) == "", "containers of %s created: %s", ns, out)
	left := append(d.cdiFilesFor(uid), d.hostFilesFor(uid)...)
	check(len(left) == 0, "devlet left files naming claim %s after refusing it: %v", uid, left)
	d.deletePod(ns, "refused")
	must(d.c.client.ResourceV1().ResourceClaims(ns).Delete(d.ctx(), name, metav1.DeleteOptions{}),
		"delete claim")
	waitFor("nothing left naming claim "+uid, 30*time.Second, func() (bool, string) {
		left := append(d.cdiFilesFor(uid), d.hostFilesFor(uid)...)
		return len(left) == 0, fmt.Sprint(left)
	})
}
