package main

// The scheduling-loop benchmark (issue 3 §6): a cluster of N nodes with 8 GPUs and 4 NICs each,
// and a stream of pods with a mix of claims. For each pod: one allocator (as the scheduler's
// PreFilter makes one), Filter = Allocate on every node, take the first node that fits, commit
// its allocation to the allocated state, go on. The workload is written to a file so that the
// C++ side runs the identical loop over the identical input.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

const (
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
)

func benchCluster(nodes, gpus, nics int) []any {
	var objects []any
	objects = append(objects,
		&resourceapi.DeviceClass{TypeMeta: typeClass, ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "gpu.example.com"`}}}}},
		&resourceapi.DeviceClass{TypeMeta: typeClass, ObjectMeta: metav1.ObjectMeta{Name: "nic"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "nic.example.com"`}}}}})
	for n := 0; n < nodes; n++ {
		name := fmt.Sprintf("node-%03d", n)
		objects = append(objects, &v1.Node{TypeMeta: typeNode, ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"kubernetes.io/hostname": name}}})
		model, memory := "a100", "40Gi"
		if n%2 == 1 {
			model, memory = "h100", "80Gi"
		}
		gpu := &resourceapi.ResourceSlice{TypeMeta: typeSlice, ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu"},
			Spec: resourceapi.ResourceSliceSpec{Driver: gpuDriver, NodeName: ptr.To(name),
				Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}}}
		for i := 0; i < gpus; i++ {
			gpu.Spec.Devices = append(gpu.Spec.Devices, resourceapi.Device{
				Name: fmt.Sprintf("gpu-%d", i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"model":                {StringValue: ptr.To(model)},
					"numaNode":             {IntValue: ptr.To(int64(i * 2 / gpus))},
					"example.com/pcieRoot": {StringValue: ptr.To(fmt.Sprintf("pci%d", i*nics/gpus))},
					"pciBusID":             {StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", 0x10+i))},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					"memory": {Value: resource.MustParse(memory)},
				},
			})
		}
		nic := &resourceapi.ResourceSlice{TypeMeta: typeSlice, ObjectMeta: metav1.ObjectMeta{Name: name + "-nic"},
			Spec: resourceapi.ResourceSliceSpec{Driver: nicDriver, NodeName: ptr.To(name),
				Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}}}
		for i := 0; i < nics; i++ {
			nic.Spec.Devices = append(nic.Spec.Devices, resourceapi.Device{
				Name: fmt.Sprintf("nic-%d", i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"numaNode":             {IntValue: ptr.To(int64(i * 2 / nics))},
					"example.com/pcieRoot": {StringValue: ptr.To(fmt.Sprintf("pci%d", i))},
				},
			})
		}
		objects = append(objects, gpu, nic)
	}
	return objects
}

func exact(name, class string, count int64, selectors ...string) resourceapi.DeviceRequest {
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, s := range selectors {
		e.Selectors = append(e.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return resourceapi.DeviceRequest{Name: name, Exactly: e}
}

func benchPod(r *rand.Rand, pod int) []*resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{TypeMeta: typeClaim, ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("pod-%05d-claim", pod), Namespace: "bench"}}
	d := &c.Spec.Devices
	switch r.Intn(6) {
	case 0: // 1 GPU
		d.Requests = []resourceapi.DeviceRequest{exact("gpu", "gpu", 1)}
	case 1: // 2 GPUs on one NUMA node
		d.Requests = []resourceapi.DeviceRequest{exact("gpus", "gpu", 2)}
		d.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.example.com/numaNode"))}}
	case 2: // 1 GPU + 1 NIC on one PCIe root
		d.Requests = []resourceapi.DeviceRequest{exact("gpu", "gpu", 1), exact("nic", "nic", 1)}
		d.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("example.com/pcieRoot"))}}
	case 3: // GPU by model
		d.Requests = []resourceapi.DeviceRequest{exact("gpu", "gpu", 1, `device.attributes["gpu.example.com"].model == "h100"`)}
	case 4: // GPU by memory
		d.Requests = []resourceapi.DeviceRequest{exact("gpu", "gpu", 1,
			`device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) >= 0`)}
	case 5: // prioritized list: two H100s, else one GPU
		d.Requests = []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "two-h100", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "h100"`}}}},
			{Name: "one", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}
	}
	return []*resourceapi.ResourceClaim{c}
}

type benchStats struct {
	Side        string   `json:"side"`
	Pods        int      `json:"pods"`
	Scheduled   int      `json:"scheduled"`
	FilterCalls int      `json:"filterCalls"`
	Seconds     float64  `json:"seconds"`
	CPUSeconds  float64  `json:"cpuSeconds"`
	PodsPerSec  float64  `json:"podsPerSec"`
	FilterP50Ns int64    `json:"filterP50Ns"`
	FilterP99Ns int64    `json:"filterP99Ns"`
	Placements  []string `json:"placements"`
	Devices     []string `json:"devices"`
}

func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func runBench(ctx context.Context, args []string) {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	nodes := fs.Int("nodes", 500, "nodes")
	gpus := fs.Int("gpus", 8, "GPUs per node")
	nics := fs.Int("nics", 4, "NICs per node")
	pods := fs.Int("pods", 5000, "pods")
	seed := fs.Int64("seed", 1, "workload seed")
	workload := fs.String("workload", "", "write the workload here (JSON)")
	statsPath := fs.String("stats", "", "write stats here (JSON); default stdout")
	_ = fs.Parse(args)

	cluster := benchCluster(*nodes, *gpus, *nics)
	r := rand.New(rand.NewSource(*seed))
	var podClaims [][]*resourceapi.ResourceClaim
	for p := 0; p < *pods; p++ {
		podClaims = append(podClaims, benchPod(r, p))
	}
	if *workload != "" {
		var podsJSON []any
		for _, claims := range podClaims {
			items := []any{}
			for _, c := range claims {
				items = append(items, c)
			}
			podsJSON = append(podsJSON, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		}
		data, err := json.Marshal(map[string]any{
			"cluster": map[string]any{"apiVersion": "v1", "kind": "List", "items": cluster},
			"pods":    podsJSON,
		})
		if err != nil {
			fail(err)
		}
		if err := os.WriteFile(*workload, data, 0o644); err != nil {
			fail(err)
		}
	}
	// Round-trip the cluster through JSON like the C++ side does.
	data, err := json.Marshal(map[string]any{"items": cluster})
	if err != nil {
		fail(err)
	}
	c, err := decodeList(data)
	if err != nil {
		fail(err)
	}
	var nodeList []*v1.Node
	for _, n := range c.Nodes {
		nodeList = append(nodeList, n)
	}
	sort.Slice(nodeList, func(i, j int) bool { return nodeList[i].Name < nodeList[j].Name })

	cache := newCache()
	state := newState()
	stats := benchStats{Side: "upstream", Pods: *pods}
	var latencies []int64
	// CPU time (all threads: the garbage collector is part of Go's cost) besides wall time: on a
	// shared machine the wall clock measures the neighbours as much as the allocator.
	cpuStart := cpuSeconds()
	start := time.Now()
	for p, claims := range podClaims {
		alloc, err := structured.NewAllocator(ctx, defaultFeatures, state, c.Classes, c.Slices, cache)
		if err != nil {
			fail(err)
		}
		chosen := ""
		var chosenResult []resourceapi.AllocationResult
		for _, node := range nodeList {
			t0 := time.Now()
			results, err := alloc.Allocate(ctx, node, claims)
			latencies = append(latencies, time.Since(t0).Nanoseconds())
			stats.FilterCalls++
			if err != nil {
				fail(fmt.Errorf("pod %d, node %s: %w", p, node.Name, err))
			}
			if results != nil && chosen == "" {
				chosen, chosenResult = node.Name, results
			}
		}
		stats.Placements = append(stats.Placements, chosen)
		devices := ""
		if chosen != "" {
			stats.Scheduled++
			for i := range chosenResult {
				addToState(&state, &chosenResult[i], defaultFeatures)
				for _, d := range chosenResult[i].Devices.Results {
					devices += d.Request + "=" + d.Pool + "/" + d.Device + " "
				}
			}
		}
		stats.Devices = append(stats.Devices, devices)
	}
	stats.Seconds = time.Since(start).Seconds()
	stats.CPUSeconds = cpuSeconds() - cpuStart
	stats.PodsPerSec = float64(*pods) / stats.Seconds
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	stats.FilterP50Ns = percentile(latencies, 0.50)
	stats.FilterP99Ns = percentile(latencies, 0.99)
	out, err := json.Marshal(stats)
	if err != nil {
		fail(err)
	}
	if *statsPath == "" {
		fmt.Println(string(out))
		return
	}
	if err := os.WriteFile(*statsPath, out, 0o644); err != nil {
		fail(err)
	}
}

// cpuSeconds is the user+system CPU time this process has used so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
