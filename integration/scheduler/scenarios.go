package main

// The scenarios: objects are created through the API (client-go), the real kube-scheduler places
// pods with devlet-extender's help, and the results are read back from the API server.
//
// Cluster: two nodes (no kubelet: Node objects with allocatable cpu/memory/pods) and one
// ResourceSlice each from driver gpu.example.com: node-a has 2 "a100" devices, node-b has 3 "a100"
// and 1 "h100". DeviceClass gpu.example.com selects the driver's devices and serves the extended
// resource example.com/gpu (DRAExtendedResource; the nodes do not advertise it, so the scheduler's
// NodeResourcesFit leaves it to DRA).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	driver     = "gpu.example.com"
	fpgaDriver = "fpga.example.com" // its DeviceClass has the same name
	className  = "gpu.example.com"
	extName    = "example.com/gpu"
	ns         = "default"
)

type scenario struct {
	name string
	run  func(ctx context.Context, t *tester) error
}

// tester carries the client and the environment through the scenarios.
type tester struct {
	cs                    *kubernetes.Clientset
	e                     *env
	raceWinner, raceLoser string // set by allocate/race-for-last-device
}

func runScenarios(ctx context.Context, e *env, only string) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("client: %v", err)
	}
	t := &tester{cs: cs, e: e}
	if err := t.setupCluster(ctx); err != nil {
		logf("FAIL setup: %v", err)
		return 1
	}
	var scenarios []scenario
	if e.mode == "score" {
		scenarios = []scenario{
			{"score/binpack-through-prioritize", scoreBinpack},
			{"score/spread-after-extender-restart", scoreSpread},
		}
	} else {
		scenarios = []scenario{
			{"allocate/claim", allocateClaim},
			{"allocate/extended-resource", allocateExtendedResource},
			{"allocate/race-for-last-device", allocateRace},
			{"allocate/apiserver-restart", allocateRestart},
			{"allocate/template-claim", allocateTemplateClaim},
		}
	}
	failed := 0
	for _, s := range scenarios {
		if !contains(s.name, only) {
			continue
		}
		start := time.Now()
		logf("RUN  %s", s.name)
		if err := s.run(ctx, t); err != nil {
			logf("FAIL %s (%.1fs): %v", s.name, time.Since(start).Seconds(), err)
			failed++
			// Later allocate scenarios build on earlier ones.
			if e.mode == "allocate" {
				break
			}
			continue
		}
		logf("PASS %s (%.1fs)", s.name, time.Since(start).Seconds())
	}
	if err := t.checkNoDoubleAllocation(ctx); err != nil {
		logf("FAIL final check: %v", err)
		failed++
	}
	return failed
}

// ---- objects -----------------------------------------------------------------------------------

func node(name string) *v1.Node {
	alloc := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("8"),
		v1.ResourceMemory: resource.MustParse("32Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Capacity:    alloc,
			Allocatable: alloc,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
				Reason: "KubeletReady", Message: "a Node object without a kubelet"}},
		},
	}
}

func slice(nodeName, drv string, models ...string) *resourceapi.ResourceSlice {
	var devices []resourceapi.Device
	for i, model := range models {
		numa := int64(i / 2)
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model":    {StringValue: &model},
				"numaNode": {IntValue: &numa},
			},
		})
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-" + drv},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   drv,
			Pool:     resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1},
			NodeName: &nodeName,
			Devices:  devices,
		},
	}
}

// claim asks for one device of the class, optionally restricted by a CEL selector.
func claim(name, selector string) *resourceapi.ResourceClaim {
	return claimOf(name, className, selector)
}

func claimOf(name, class, selector string) *resourceapi.ResourceClaim {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	if selector != "" {
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: selector}}}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}}},
	}
}

// pod uses the claim `claimName` (direct reference) or, with gpus > 0, requests that many
// example.com/gpu.
func pod(name, claimName string, gpus int64) *v1.Pod {
	c := v1.Container{Name: "main", Image: "registry.k8s.io/pause:3.10",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("100m")}}}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	if claimName != "" {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claimName}}
		p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	}
	if gpus > 0 {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		p.Spec.Containers[0].Resources.Requests[extName] = q
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{extName: q}
	}
	return p
}

func (t *tester) setupCluster(ctx context.Context) error {
	for _, n := range []string{"node-a", "node-b", "node-c", "node-d"} {
		if _, err := t.cs.CoreV1().Nodes().Create(ctx, node(n), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Node %s: %w", n, err)
		}
	}
	ext := extName
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "` + driver + `"`}}},
			ExtendedResourceName: &ext,
		},
	}
	if _, err := t.cs.ResourceV1().DeviceClasses().Create(ctx, class,
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating DeviceClass: %w", err)
	}
	fpga := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: fpgaDriver},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "` + fpgaDriver + `"`}}},
		},
	}
	if _, err := t.cs.ResourceV1().DeviceClasses().Create(ctx, fpga,
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating DeviceClass: %w", err)
	}
	for _, s := range []*resourceapi.ResourceSlice{slice("node-a", driver, "a100", "a100"),
		slice("node-b", driver, "a100", "a100", "a100", "h100"),
		slice("node-c", fpgaDriver, "u55", "u55"),
		slice("node-d", fpgaDriver, "u55", "u55", "u55", "u55")} {
		if _, err := t.cs.ResourceV1().ResourceSlices().Create(ctx, s,
			metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ResourceSlice %s: %w", s.Name, err)
		}
	}
	// Give the extender's and the scheduler's watches a moment to see the cluster.
	return t.waitExtenderSees(ctx, 4)
}

// waitExtenderSees waits until the extender's filter passes `nodes` nodes for a pod without
// claims: its watches have delivered the Nodes.
func (t *tester) waitExtenderSees(ctx context.Context, nodes int) error {
	body := `{"Pod":{"metadata":{"name":"probe","namespace":"default","uid":"probe"},` +
		`"spec":{"containers":[{"name":"c","image":"x"}]}},"NodeNames":["node-a","node-b","node-c","node-d"]}`
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := t.e.extClient.Post(t.e.extURL+"/devlet/filter", "application/json",
			strings.NewReader(body))
		if err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(data)
			var reply struct{ NodeNames []string }
			if json.Unmarshal(data, &reply) == nil && len(reply.NodeNames) >= nodes {
				return nil
			}
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("devlet-extender does not see the nodes: %s", last)
}

// ---- reading back ------------------------------------------------------------------------------

// waitBound waits until the pod has spec.nodeName and returns it.
func (t *tester) waitBound(ctx context.Context, name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		p, err := t.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("reading Pod %s: %w", name, err)
		}
		if p.Spec.NodeName != "" {
			return p.Spec.NodeName, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled {
				last = c.Reason + ": " + c.Message
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("Pod %s not bound after %v (last PodScheduled: %s)", name, timeout, last)
}

func (t *tester) nodeOf(ctx context.Context, name string) (string, error) {
	p, err := t.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return p.Spec.NodeName, nil
}

// allocated returns "pool/device" of every device allocated to the claim, or nil.
func allocated(c *resourceapi.ResourceClaim) []string {
	if c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Driver+"/"+r.Pool+"/"+r.Device)
	}
	return out
}

// checkClaim asserts the claim is allocated from `pool` and reserved for the pod.
func (t *tester) checkClaim(ctx context.Context, claimName, podName, pool string) error {
	c, err := t.cs.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading ResourceClaim %s: %w", claimName, err)
	}
	p, err := t.cs.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Pod %s: %w", podName, err)
	}
	devices := allocated(c)
	if len(devices) != 1 || !strings.HasPrefix(devices[0], driver+"/"+pool+"/") {
		return fmt.Errorf("ResourceClaim %s: allocation %v, want one device of pool %s", claimName,
			devices, pool)
	}
	if c.Status.Allocation.NodeSelector == nil ||
		!strings.Contains(c.Status.Allocation.NodeSelector.String(), pool) {
		return fmt.Errorf("ResourceClaim %s: allocation.nodeSelector %v does not name %s",
			claimName, c.Status.Allocation.NodeSelector, pool)
	}
	reserved := false
	for _, r := range c.Status.ReservedFor {
		reserved = reserved || (r.Resource == "pods" && r.Name == podName && r.UID == p.UID)
	}
	if !reserved {
		return fmt.Errorf("ResourceClaim %s: reservedFor %v lacks Pod %s (%s)", claimName,
			c.Status.ReservedFor, podName, p.UID)
	}
	logf("  ResourceClaim %s: %v, reserved for %s", claimName, devices, podName)
	return nil
}

// checkNoDoubleAllocation asserts that no device is allocated to two claims.
func (t *tester) checkNoDoubleAllocation(ctx context.Context) error {
	claims, err := t.cs.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	owner := map[string]string{}
	for _, c := range claims.Items {
		for _, d := range allocated(&c) {
			if other, ok := owner[d]; ok {
				return fmt.Errorf("device %s allocated to both %s and %s", d, other, c.Name)
			}
			owner[d] = c.Name
		}
	}
	logf("  %d devices allocated, none twice", len(owner))
	return nil
}

func (t *tester) createClaimAndPod(ctx context.Context, claimName, selector, podName string) error {
	return t.createClassClaimAndPod(ctx, className, claimName, selector, podName)
}

func (t *tester) createClassClaimAndPod(ctx context.Context, class, claimName, selector,
	podName string) error {
	if _, err := t.cs.ResourceV1().ResourceClaims(ns).Create(ctx, claimOf(claimName, class, selector),
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ResourceClaim %s: %w", claimName, err)
	}
	// The claim reaches the extender's watch before the pod reaches the scheduler (a pod whose
	// claim the extender does not know yet is unresolvable and waits for a retry).
	time.Sleep(500 * time.Millisecond)
	if _, err := t.cs.CoreV1().Pods(ns).Create(ctx, pod(podName, claimName, 0),
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Pod %s: %w", podName, err)
	}
	return nil
}

func (t *tester) deletePodAndClaim(ctx context.Context, podName, claimName string) error {
	zero := int64(0)
	if err := t.cs.CoreV1().Pods(ns).Delete(ctx, podName,
		metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return fmt.Errorf("deleting Pod %s: %w", podName, err)
	}
	if err := t.cs.ResourceV1().ResourceClaims(ns).Delete(ctx, claimName,
		metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting ResourceClaim %s: %w", claimName, err)
	}
	// No kubelet or garbage collector runs: wait until both are gone from the API.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, perr := t.cs.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		_, cerr := t.cs.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		if apierrors.IsNotFound(perr) && apierrors.IsNotFound(cerr) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("Pod %s / ResourceClaim %s still exist 30s after deletion", podName,
		claimName)
}

// ---- score mode --------------------------------------------------------------------------------

// scoreBinpack: the in-tree DynamicResources plugin allocates; devlet-extender's prioritize
// (binpack, weight 5) steers pods to the fuller node: node-a (2 devices) before node-b (4).
func scoreBinpack(ctx context.Context, t *tester) error {
	want := []string{"node-a", "node-a", "node-b"}
	for i, w := range want {
		podName := fmt.Sprintf("score-%d", i)
		claimName := podName + "-gpu"
		if err := t.createClaimAndPod(ctx, claimName, "", podName); err != nil {
			return err
		}
		got, err := t.waitBound(ctx, podName, 90*time.Second)
		if err != nil {
			return err
		}
		logf("  Pod %s -> %s", podName, got)
		if got != w {
			return fmt.Errorf("Pod %s bound to %s, want %s (binpack prefers the fuller node)",
				podName, got, w)
		}
		if err := t.waitClaimAllocated(ctx, claimName, podName, w); err != nil {
			return err
		}
	}
	if t.e.proxy.count("filter") == 0 || t.e.proxy.count("prioritize") == 0 {
		return fmt.Errorf("the scheduler did not call the extender (filter %d, prioritize %d)",
			t.e.proxy.count("filter"), t.e.proxy.count("prioritize"))
	}
	if t.e.proxy.count("bind") != 0 {
		return fmt.Errorf("score mode has no bind verb, yet bind was called %d times",
			t.e.proxy.count("bind"))
	}
	return nil
}

// scoreSpread: one FPGA pod goes to node-c (2 devices) under binpack; devlet-extender then
// restarts with --policy spread (resyncing everything, allocations included, from the API
// server), and the next FPGA pod goes to node-d (4 devices), although node-c still has a free one
// and binpack would have chosen it: the scheduler follows the extender's preference.
func scoreSpread(ctx context.Context, t *tester) error {
	check := func(podName, want string) error {
		if err := t.createClassClaimAndPod(ctx, fpgaDriver, podName+"-fpga", "", podName); err != nil {
			return err
		}
		got, err := t.waitBound(ctx, podName, 90*time.Second)
		if err != nil {
			return err
		}
		logf("  Pod %s -> %s", podName, got)
		if got != want {
			return fmt.Errorf("Pod %s bound to %s, want %s", podName, got, want)
		}
		c, err := t.cs.ResourceV1().ResourceClaims(ns).Get(ctx, podName+"-fpga", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for deadline := time.Now().Add(10 * time.Second); c.Status.Allocation == nil &&
			time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if c, err = t.cs.ResourceV1().ResourceClaims(ns).Get(ctx, podName+"-fpga",
				metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if devices := allocated(c); len(devices) != 1 ||
			!strings.HasPrefix(devices[0], fpgaDriver+"/"+want+"/") {
			return fmt.Errorf("ResourceClaim %s-fpga: allocation %v, want one device of %s", podName,
				devices, want)
		}
		return nil
	}
	if err := check("fpga-binpack", "node-c"); err != nil {
		return err
	}
	if err := t.e.restartExtender("--policy", "spread"); err != nil {
		return err
	}
	return check("fpga-spread", "node-d")
}

// waitClaimAllocated waits for the in-tree plugin's allocation to be written (it is written before
// the binding, but read back separately), then checks it.
func (t *tester) waitClaimAllocated(ctx context.Context, claimName, podName, pool string) error {
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if err = t.checkClaim(ctx, claimName, podName, pool); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// ---- allocate mode -----------------------------------------------------------------------------

// allocateClaim: a pod with a direct claim; devlet-extender's bind writes the allocation and the
// reservation and binds the pod (binpack: node-a).
func allocateClaim(ctx context.Context, t *tester) error {
	if err := t.createClaimAndPod(ctx, "alloc-gpu", "", "alloc-pod"); err != nil {
		return err
	}
	got, err := t.waitBound(ctx, "alloc-pod", 90*time.Second)
	if err != nil {
		return err
	}
	logf("  Pod alloc-pod -> %s", got)
	if got != "node-a" {
		return fmt.Errorf("Pod alloc-pod bound to %s, want node-a", got)
	}
	if err := t.checkClaim(ctx, "alloc-gpu", "alloc-pod", "node-a"); err != nil {
		return err
	}
	if t.e.proxy.count("bind") == 0 {
		return fmt.Errorf("the scheduler did not bind through the extender")
	}
	return nil
}

// allocateExtendedResource: a pod requesting example.com/gpu gets a synthesized claim, allocated
// and reserved by the extender; binpack puts it on node-a's last device.
func allocateExtendedResource(ctx context.Context, t *tester) error {
	if _, err := t.cs.CoreV1().Pods(ns).Create(ctx, pod("ext-pod", "", 1),
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Pod ext-pod: %w", err)
	}
	got, err := t.waitBound(ctx, "ext-pod", 90*time.Second)
	if err != nil {
		return err
	}
	logf("  Pod ext-pod -> %s", got)
	if got != "node-a" {
		return fmt.Errorf("Pod ext-pod bound to %s, want node-a", got)
	}
	claims, err := t.cs.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var names []string
	for _, c := range claims.Items {
		if c.Annotations["resource.kubernetes.io/extended-resource-claim"] == "true" {
			names = append(names, c.Name)
		}
	}
	if len(names) != 1 {
		return fmt.Errorf("want one extended-resource claim, found %v", names)
	}
	return t.checkClaim(ctx, names[0], "ext-pod", "node-a")
}

// allocateTemplateClaim: a pod whose claim comes from a ResourceClaimTemplate. No resourceclaim
// controller runs here, so the scenario does its part: the pod first waits ("waiting for resource
// claim creation"), then the claim is created for it (owned by the pod, annotated with the pod's
// claim name) and recorded in the pod's status.resourceClaimStatuses, through which the extender
// finds it. Nodes left: node-b's a100s (node-a is full after the earlier scenarios).
func allocateTemplateClaim(ctx context.Context, t *tester) error {
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tmpl-gpu", Namespace: ns},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: claim("unused", "").Spec},
	}
	if _, err := t.cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl,
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ResourceClaimTemplate tmpl-gpu: %w", err)
	}
	p := pod("tmpl-pod", "", 0)
	tmplName := "tmpl-gpu"
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmplName}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	created, err := t.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating Pod tmpl-pod: %w", err)
	}
	// Without its claim the pod cannot be scheduled.
	time.Sleep(2 * time.Second)
	if got, err := t.nodeOf(ctx, "tmpl-pod"); err != nil || got != "" {
		return fmt.Errorf("Pod tmpl-pod bound to %q (%v) before its claim exists", got, err)
	}
	// The resourceclaim controller's part.
	yes := true
	c := claim("tmpl-pod-gpu-x7k2p", "")
	c.Annotations = map[string]string{"resource.kubernetes.io/pod-claim-name": "gpu"}
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: created.Name,
		UID: created.UID, Controller: &yes, BlockOwnerDeletion: &yes}}
	if _, err := t.cs.ResourceV1().ResourceClaims(ns).Create(ctx, c,
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ResourceClaim %s: %w", c.Name, err)
	}
	time.Sleep(500 * time.Millisecond) // the claim reaches the extender's watch first
	current, err := t.cs.CoreV1().Pods(ns).Get(ctx, "tmpl-pod", metav1.GetOptions{})
	if err != nil {
		return err
	}
	claimName := c.Name
	current.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{
		{Name: "gpu", ResourceClaimName: &claimName}}
	if _, err := t.cs.CoreV1().Pods(ns).UpdateStatus(ctx, current,
		metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("recording the claim in Pod tmpl-pod's status: %w", err)
	}
	got, err := t.waitBound(ctx, "tmpl-pod", 90*time.Second)
	if err != nil {
		return err
	}
	logf("  Pod tmpl-pod -> %s", got)
	if got != "node-b" {
		return fmt.Errorf("Pod tmpl-pod bound to %s, want node-b (node-a is full)", got)
	}
	return t.checkClaim(ctx, claimName, "tmpl-pod", "node-b")
}

// allocateRace: two pods created together want the only h100; exactly one binds, the other stays
// pending with its claim unallocated.
func allocateRace(ctx context.Context, t *tester) error {
	sel := `device.attributes["` + driver + `"].model == "h100"`
	for _, n := range []string{"race-1", "race-2"} {
		if _, err := t.cs.ResourceV1().ResourceClaims(ns).Create(ctx, claim(n+"-gpu", sel),
			metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	time.Sleep(500 * time.Millisecond)
	for _, n := range []string{"race-1", "race-2"} {
		if _, err := t.cs.CoreV1().Pods(ns).Create(ctx, pod(n, n+"-gpu", 0),
			metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	winner, loser := "", ""
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && winner == "" {
		for _, n := range []string{"race-1", "race-2"} {
			if got, err := t.nodeOf(ctx, n); err == nil && got != "" {
				winner = n
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if winner == "" {
		return fmt.Errorf("neither racing pod was bound in 90s")
	}
	loser = map[string]string{"race-1": "race-2", "race-2": "race-1"}[winner]
	// Past the scheduler's retry of the loser (unschedulable pods retry within 10 s here).
	time.Sleep(15 * time.Second)
	if got, _ := t.nodeOf(ctx, loser); got != "" {
		return fmt.Errorf("both racing pods were bound (%s to %s): one device, two pods", loser, got)
	}
	if got, _ := t.nodeOf(ctx, winner); got != "node-b" {
		return fmt.Errorf("winner %s bound to %s, want node-b (the h100)", winner, got)
	}
	logf("  %s won the h100 on node-b; %s is pending", winner, loser)
	if err := t.checkClaim(ctx, winner+"-gpu", winner, "node-b"); err != nil {
		return err
	}
	c, err := t.cs.ResourceV1().ResourceClaims(ns).Get(ctx, loser+"-gpu", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if c.Status.Allocation != nil || len(c.Status.ReservedFor) != 0 {
		return fmt.Errorf("loser's claim has status %v / reservedFor %v, want neither",
			allocated(c), c.Status.ReservedFor)
	}
	t.raceWinner, t.raceLoser = winner, loser
	return nil
}

// allocateRestart: kube-apiserver restarts under the extender; after it, the race winner and its
// claim are deleted: the loser must get the h100 (the extender's resumed watches saw the device
// freed, no stale allocation), and a new pod schedules onto node-b's remaining a100s.
func allocateRestart(ctx context.Context, t *tester) error {
	if t.raceWinner == "" {
		return fmt.Errorf("needs allocate/race-for-last-device first")
	}
	if err := t.e.restartAPIServer(); err != nil {
		return err
	}
	logf("  kube-apiserver is ready again")
	if err := t.deletePodAndClaim(ctx, t.raceWinner, t.raceWinner+"-gpu"); err != nil {
		return err
	}
	got, err := t.waitBound(ctx, t.raceLoser, 120*time.Second)
	if err != nil {
		return fmt.Errorf("after the restart and the winner's deletion: %w", err)
	}
	if got != "node-b" {
		return fmt.Errorf("Pod %s bound to %s, want node-b", t.raceLoser, got)
	}
	if err := t.checkClaim(ctx, t.raceLoser+"-gpu", t.raceLoser, "node-b"); err != nil {
		return err
	}
	if err := t.createClaimAndPod(ctx, "after-gpu", "", "after-pod"); err != nil {
		return err
	}
	got, err = t.waitBound(ctx, "after-pod", 90*time.Second)
	if err != nil {
		return err
	}
	logf("  Pod after-pod -> %s", got)
	if got != "node-b" {
		return fmt.Errorf("Pod after-pod bound to %s, want node-b (node-a is full)", got)
	}
	return t.checkClaim(ctx, "after-gpu", "after-pod", "node-b")
}
