package main

// Scenario 5 (issue 17 §2): CPUs and memory DRA allocates, with KEP-5517's mapping
// (DRANodeAllocatableResources on in the API server, kube-scheduler and the kubelet, and in
// devlet-node through the chart's featureGates value).

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scenarioDRACPUs (5): `helm upgrade` with featureGates.DRANodeAllocatableResources; devlet-node's
// new pod publishes the CPU devices with nodeAllocatableResources (cpu <- cpus, memory <- memory).
// Pod "dra-cpu" asks for 1 CPU and 64Mi of cpu-numa0 through a claim, its container limits
// 200m/32Mi: kube-scheduler records the mapped cpu 1 and memory 64Mi in the pod's
// status.nodeAllocatableResourceClaimStatuses, and the container's v1 cgroups, read from inside,
// have the kubelet's limits plus the claim's (1.2 CPU of CFS quota, 96Mi; upstream adds DRA
// amounts only to limits the container states, a container without limits stays unlimited, and
// devlet with the gate on leaves these limits to the kubelet). The node's allocatable CPU books
// the claim exactly once: beside it (and devlet-node's 10m) a pod requesting 600m still fits the
// 1900m allocatable (it would not if the claim's CPU counted twice) and one requesting 500m more
// does not (it would if the claim's CPU did not count). The chart's gate is put back afterwards.
func scenarioDRACPUs(d *devlet) {
	node, err := d.c.client.CoreV1().Nodes().Get(d.ctx(), nodeName, metav1.GetOptions{})
	must(err, "node")
	allocatable := node.Status.Allocatable.Cpu().MilliValue()
	d.helmUpgrade("featureGates.DRANodeAllocatableResources=true")
	start := time.Now()
	waitFor("CPU devices published with nodeAllocatableResources", 120*time.Second, func() (bool, string) {
		slices, err := d.c.client.ResourceV1().ResourceSlices().List(d.ctx(), metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + nodeName + ",spec.driver=" + driverName})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slices.Items {
			for _, dev := range s.Spec.Devices {
				if dev.Name == "cpu-numa0" {
					_, cpu := dev.NodeAllocatableResources[corev1.ResourceCPU]
					_, mem := dev.NodeAllocatableResources[corev1.ResourceMemory]
					return cpu && mem, fmt.Sprintf("cpu-numa0: %+v", dev.NodeAllocatableResources)
				}
			}
		}
		return false, "no cpu-numa0"
	})
	d.waitDaemonSetPod(120 * time.Second)
	logf("devlet-node publishes nodeAllocatableResources %.1fs after the upgrade", time.Since(start).Seconds())

	ns := "scenario-5"
	d.ensureNamespace(ns)
	_, err = d.c.client.ResourceV1().ResourceClaimTemplates(ns).Create(d.ctx(),
		&resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "one-cpu"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
				Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
					Name: "cpu", Exactly: &resourcev1.ExactDeviceRequest{
						DeviceClassName: "cpu." + driverName,
						Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
							Expression: `device.attributes["resource.kubernetes.io"].numaNode == 0`}}},
						Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{
							"cpus": resource.MustParse("1"), "memory": resource.MustParse("64Mi")}}}},
				}}}},
		}, metav1.CreateOptions{})
	must(err, "ResourceClaimTemplate one-cpu")
	tmpl := "one-cpu"
	app := sleeper("app", "cpu")
	app.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"),
		corev1.ResourceMemory: resource.MustParse("32Mi")}
	pod, _ := d.runGPUPod(ns, "dra-cpu", corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "cpu", ResourceClaimTemplateName: &tmpl}},
		Containers:     []corev1.Container{app},
	})
	var mapped []string
	for _, st := range pod.Status.NodeAllocatableResourceClaimStatuses {
		for _, m := range st.Mapping {
			if m.Quantity != nil {
				mapped = append(mapped, string(m.Name)+"="+m.Quantity.String())
			}
		}
		check(len(st.Containers) == 1 && st.Containers[0] == "app", "claim status containers %v", st.Containers)
	}
	got := strings.Join(mapped, ",")
	check(strings.Contains(got, "cpu=1") && strings.Contains(got, "memory=64Mi"),
		"dra-cpu's nodeAllocatableResourceClaimStatuses %+v", pod.Status.NodeAllocatableResourceClaimStatuses)
	quota, cpus, mems, memory := d.cgroupLimits(d.containerID(ns, "dra-cpu", "app"))
	check(quota == "120000" && memory == strconv.Itoa(96<<20),
		"dra-cpu's cgroups: cfs_quota_us %s memory.limit_in_bytes %s, want 120000 and %d", quota, memory, 96<<20)
	logf("dra-cpu: status mapping %s; cgroups quota %s cpus %s mems %s memory %s", got, quota, cpus, mems, memory)

	// The ledger: allocatable 1900m here (2 CPUs, kubeReserved 100m); booked: devlet-node 10m,
	// dra-cpu 200m + the claim's 1 CPU.
	request := func(name, cpu string) {
		ctr := sleeper("app")
		ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		_, err := d.c.client.CoreV1().Pods(ns).Create(d.ctx(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: new(int64),
				Containers: []corev1.Container{ctr}}}, metav1.CreateOptions{})
		must(err, "pod "+name)
	}
	request("fits", "600m")
	d.waitRunning(ns, "fits", 60*time.Second)
	request("too-much", "500m")
	waitFor("too-much unschedulable for CPU", 60*time.Second, func() (bool, string) {
		p, err := d.c.client.CoreV1().Pods(ns).Get(d.ctx(), "too-much", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse &&
				strings.Contains(c.Message, "Insufficient cpu") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s node %q %v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
	})
	logf("allocatable cpu %dm: dra-cpu (200m + 1 CPU by claim) + fits (600m) run, too-much (500m) "+
		"Insufficient cpu",
		allocatable)
	for _, name := range []string{"too-much", "fits", "dra-cpu"} {
		d.deletePod(ns, name)
	}
	d.helmUpgrade()
	d.waitDaemonSetPod(120 * time.Second)
}
