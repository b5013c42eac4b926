package main

// Adversarial families (issue 16): problems built to make a backtracking search work hard, drawn
// with the same seed scheme as the random cases. Each family is sized so that upstream answers in
// at most a few hundred milliseconds: the point is that devlet must answer as upstream does and
// not much slower, on the shapes where a search that prunes less than upstream explodes.
//
//	limits                 counts that sum to around the 32-results limit, over one or two claims
//	first-available-limit  firstAvailable whose first subrequest fits alone but not beside the
//	                       claim's other requests under the limit (the shapes of issue 16 §1)
//	unsatisfiable-match    matchAttribute across requests that no group of identical devices can
//	                       satisfy, found only at the last request
//	all-mode-128           allocationMode All over 128 devices, with and without selectors
//	eight-requests-match   eight requests under one matchAttribute over NUMA groups
//	counters-run-out-late  partitionable devices whose shared counters run out at the last device

import (
	"encoding/json"
	"fmt"
	"math/rand"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var adversarialFamilies = []string{
	"limits", "first-available-limit", "unsatisfiable-match", "all-mode-128",
	"eight-requests-match", "counters-run-out-late",
}

type adversary struct {
	r       *rand.Rand
	objects []any
	claims  int
}

func (a *adversary) node() {
	a.objects = append(a.objects, &v1.Node{TypeMeta: typeNode, ObjectMeta: metav1.ObjectMeta{
		Name: "node-1", Labels: map[string]string{"region": "r1"}}})
}

func (a *adversary) class() {
	a.objects = append(a.objects, &resourceapi.DeviceClass{TypeMeta: typeClass,
		ObjectMeta: metav1.ObjectMeta{Name: "class-a"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "driver-a"`}}}}})
}

// devices adds one slice of n devices on node-1; attrs(i) gives device i's attributes.
func (a *adversary) devices(n int, attrs func(i int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) {
	slice := &resourceapi.ResourceSlice{TypeMeta: typeSlice, ObjectMeta: metav1.ObjectMeta{Name: "slice-0"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "driver-a", NodeName: ptr.To("node-1"),
			Pool: resourceapi.ResourcePool{Name: "pool-0", Generation: 1, ResourceSliceCount: 1}}}
	for i := 0; i < n; i++ {
		d := resourceapi.Device{Name: fmt.Sprintf("dev-%d", i)}
		if attrs != nil {
			d.Attributes = attrs(i)
		}
		slice.Spec.Devices = append(slice.Spec.Devices, d)
	}
	a.objects = append(a.objects, slice)
}

func intAttr(v int) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{IntValue: ptr.To(int64(v))}
}

func exactly(name string, count int, selectors ...string) resourceapi.DeviceRequest {
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: "class-a",
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(count)}
	for _, s := range selectors {
		e.Selectors = append(e.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return resourceapi.DeviceRequest{Name: name, Exactly: e}
}

func allOf(name string, selectors ...string) resourceapi.DeviceRequest {
	r := exactly(name, 0, selectors...)
	r.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	return r
}

func firstAvailable(name string, counts ...int) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: name}
	for i, c := range counts {
		r.FirstAvailable = append(r.FirstAvailable, resourceapi.DeviceSubRequest{Name: fmt.Sprintf("sub-%d", i),
			DeviceClassName: "class-a", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(c)})
	}
	return r
}

func (a *adversary) claim(requests []resourceapi.DeviceRequest, constraints ...resourceapi.DeviceConstraint) {
	c := &resourceapi.ResourceClaim{TypeMeta: typeClaim,
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", a.claims), Namespace: "default"}}
	a.claims++
	c.Spec.Devices.Requests = requests
	c.Spec.Devices.Constraints = constraints
	a.objects = append(a.objects, c)
}

func matchAttr(attr string, requests ...string) resourceapi.DeviceConstraint {
	name := resourceapi.FullyQualifiedName(attr)
	return resourceapi.DeviceConstraint{MatchAttribute: &name, Requests: requests}
}

// countOrSubs is a plain count or, half of the time, a firstAvailable list of 2-3 counts.
func (a *adversary) countOrSubs(name string, max int) resourceapi.DeviceRequest {
	if a.r.Intn(2) == 0 {
		return exactly(name, 1+a.r.Intn(max))
	}
	counts := []int{1 + a.r.Intn(max)}
	for i := 0; i < 1+a.r.Intn(2); i++ {
		counts = append(counts, 1+a.r.Intn(counts[len(counts)-1]))
	}
	return firstAvailable(name, counts...)
}

// generateAdversarial returns a List of objects of family index % len(families).
func generateAdversarial(seed int64, index int) ([]byte, string) {
	family := adversarialFamilies[index%len(adversarialFamilies)]
	a := &adversary{r: rand.New(rand.NewSource(seed*7919 + int64(index)))}
	a.node()
	a.class()
	r := a.r
	switch family {
	case "limits":
		// One or two claims whose requests sum to 28..36 devices each, over 64..80 devices:
		// enough for both, so that only the limit decides (a second claim that runs out of
		// devices would make any exhaustive search try every set of the first one's).
		n := 64 + r.Intn(17)
		a.devices(n, nil)
		for c := 0; c < 1+r.Intn(2); c++ {
			var requests []resourceapi.DeviceRequest
			total, target := 0, 28+r.Intn(9)
			for i := 0; total < target && i < 6; i++ {
				req := a.countOrSubs(fmt.Sprintf("req-%d", i), 1+min(16, target-total))
				if req.Exactly != nil {
					total += int(req.Exactly.Count)
				} else {
					total += int(req.FirstAvailable[len(req.FirstAvailable)-1].Count)
				}
				requests = append(requests, req)
			}
			a.claim(requests)
		}
	case "first-available-limit":
		// A = [k1, else k2], B = m or [m1, else m2], k1 + m > 32 likely, k1 alone fits. There
		// are devices for both (k1 + m): only the limit rules a subrequest out (were devices
		// short, any exhaustive search would try every set of A's first).
		k1 := 16 + r.Intn(17)
		k2 := 1 + r.Intn(k1)
		reqA := firstAvailable("a", k1, k2)
		var reqB resourceapi.DeviceRequest
		m := 1 + r.Intn(20)
		if r.Intn(2) == 0 {
			reqB = exactly("b", m)
		} else {
			m = 16 + r.Intn(17)
			reqB = firstAvailable("b", m, 1+r.Intn(m))
		}
		a.devices(k1+m+r.Intn(8), nil)
		requests := []resourceapi.DeviceRequest{reqA, reqB}
		if r.Intn(3) == 0 {
			requests = []resourceapi.DeviceRequest{reqB, reqA}
		}
		a.claim(requests)
	case "unsatisfiable-match":
		// n identical devices on NUMA 0 and a few on NUMA 1; A takes k of any, B needs NUMA 1,
		// matchAttribute over both: only the last request finds out, every time.
		n := 12 + r.Intn(10)
		odd := 1 + r.Intn(2)
		a.devices(n+odd, func(i int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
			numa := 0
			if i >= n {
				numa = 1
			}
			return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"numa": intAttr(numa)}
		})
		k := 2 + r.Intn(3)
		a.claim([]resourceapi.DeviceRequest{
			exactly("a", k),
			exactly("b", odd+1, `device.attributes["driver-a"].numa == 1`),
		}, matchAttr("driver-a/numa"))
	case "all-mode-128":
		// All over 128 devices: more than the limit, or a selector that keeps 16..40 of them,
		// beside an exact request.
		a.devices(128, func(i int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
			return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"index": intAttr(i)}
		})
		var requests []resourceapi.DeviceRequest
		switch r.Intn(3) {
		case 0:
			requests = append(requests, allOf("all"))
		default:
			keep := 16 + r.Intn(25)
			requests = append(requests, allOf("all", fmt.Sprintf(`device.attributes["driver-a"].index < %d`, keep)))
		}
		if r.Intn(2) == 0 {
			requests = append(requests, exactly("more", 1+r.Intn(4)))
		} else {
			// First: one device, then All. (More than one device first, taken from among All's,
			// makes any search try every set of them: C(128, 4) for both sides.)
			requests = append([]resourceapi.DeviceRequest{exactly("more", 1)}, requests...)
		}
		a.claim(requests)
	case "eight-requests-match":
		// Eight requests of one device each (some of two), all under one matchAttribute, over
		// NUMA groups of 3..6 devices: satisfiable or not depending on the draw.
		// Groups smaller than eight never satisfy it (every group is tried in every order of
		// its devices across the requests); one in three draws has groups of 8-9 and fits.
		groups := 3 + r.Intn(3)
		size := 3 + r.Intn(4)
		fits := r.Intn(3) == 0
		if fits {
			size = 8 + r.Intn(2)
		}
		a.devices(groups*size, func(i int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
			return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"numa": intAttr(i / size)}
		})
		var requests []resourceapi.DeviceRequest
		for i := 0; i < 8; i++ {
			count := 1
			if !fits && r.Intn(6) == 0 {
				count = 2
			}
			requests = append(requests, exactly(fmt.Sprintf("req-%d", i), count))
		}
		a.claim(requests, matchAttr("driver-a/numa"))
	case "counters-run-out-late":
		// Partitions of one counter set; each takes 1 unit, the set holds one unit fewer than
		// the claim needs (or exactly enough): only the last device finds out.
		n := 10 + r.Intn(8)
		need := 3 + r.Intn(3)
		capacity := need - 1
		if r.Intn(3) == 0 {
			capacity = need
		}
		counters := &resourceapi.ResourceSlice{TypeMeta: typeSlice, ObjectMeta: metav1.ObjectMeta{Name: "slice-counters"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "driver-a", NodeName: ptr.To("node-1"),
				Pool: resourceapi.ResourcePool{Name: "pool-0", Generation: 1, ResourceSliceCount: 2},
				SharedCounters: []resourceapi.CounterSet{{Name: "set-0", Counters: map[string]resourceapi.Counter{
					"units": {Value: resource.MustParse(fmt.Sprint(capacity))}}}}}}
		devices := &resourceapi.ResourceSlice{TypeMeta: typeSlice, ObjectMeta: metav1.ObjectMeta{Name: "slice-devices"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "driver-a", NodeName: ptr.To("node-1"),
				Pool: resourceapi.ResourcePool{Name: "pool-0", Generation: 1, ResourceSliceCount: 2}}}
		for i := 0; i < n; i++ {
			devices.Spec.Devices = append(devices.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("part-%d", i),
				ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "set-0",
					Counters: map[string]resourceapi.Counter{"units": {Value: resource.MustParse("1")}}}}})
		}
		a.objects = append(a.objects, counters, devices)
		if r.Intn(2) == 0 {
			a.claim([]resourceapi.DeviceRequest{exactly("parts", need)})
		} else {
			a.claim([]resourceapi.DeviceRequest{exactly("a", need-1), exactly("b", 1)})
		}
	}
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": a.objects})
	if err != nil {
		panic(err)
	}
	return data, family
}
