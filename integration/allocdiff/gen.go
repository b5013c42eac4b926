package main

// A seeded generator of allocation problems: slices with attributes of every type, capacities,
// counters, taints, multi-slice and multi-host pools, node selectors; claims with counts, All,
// selectors, constraints, firstAvailable, tolerations, capacity requests, admin access; and some
// claims already allocated (by running the upstream allocator first, so the state is realistic).

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

var (
	typeClass = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"}
	typeSlice = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"}
	typeClaim = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"}
	typeNode  = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
)

type gen struct {
	r *rand.Rand
	// alpha: the 1.37 alpha allocator features are on (cases -gates), so requests get derived
	// attributes and partitions compatibility groups. Off, the generator draws exactly as before.
	alpha bool
}

func (g *gen) pick(options ...string) string { return options[g.r.Intn(len(options))] }
func (g *gen) chance(p float64) bool         { return g.r.Float64() < p }

var memories = []string{"1Gi", "2Gi", "4Gi", "8Gi"}

func (g *gen) device(name string, multi bool, counterSet string) resourceapi.Device {
	d := resourceapi.Device{
		Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"numa":  {IntValue: ptr.To(int64(g.r.Intn(3)))},
			"model": {StringValue: ptr.To(g.pick("a100", "h100", "l4"))},
			"ecc":   {BoolValue: ptr.To(g.chance(0.5))},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse(g.pick(memories...))},
		},
	}
	if g.chance(0.5) {
		d.Attributes["driverVersion"] = resourceapi.DeviceAttribute{VersionValue: ptr.To(g.pick("1.0.0", "1.2.0", "2.0.0"))}
	}
	if g.chance(0.3) {
		d.Attributes["example.com/pcieRoot"] = resourceapi.DeviceAttribute{StringValue: ptr.To(g.pick("pci0", "pci1"))}
	}
	if g.chance(0.15) {
		d.Taints = []resourceapi.DeviceTaint{{Key: g.pick("maintenance", "degraded"), Value: "true",
			Effect: resourceapi.DeviceTaintEffect(g.pick("NoSchedule", "NoExecute", "None"))}}
	}
	if multi {
		d.AllowMultipleAllocations = ptr.To(true)
		cap := d.Capacity["memory"]
		switch g.r.Intn(3) {
		case 0:
			cap.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("1Gi")),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Gi")), Step: ptr.To(resource.MustParse("1Gi"))}}
		case 1:
			cap.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("1Gi")),
				ValidValues: []resource.Quantity{resource.MustParse("1Gi"), resource.MustParse("2Gi"), resource.MustParse("4Gi")}}
		}
		d.Capacity["memory"] = cap
	}
	if counterSet != "" {
		d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: counterSet,
			Counters: map[string]resourceapi.Counter{"mem": {Value: resource.MustParse(g.pick("2Gi", "4Gi", "8Gi"))}}}}
		if g.alpha && g.chance(0.7) {
			d.ConsumesCounters[0].CompatibilityGroups = compatibilityGroupsPool[g.r.Intn(len(compatibilityGroupsPool))]
		}
	}
	return d
}

func (g *gen) cluster(caseIndex int) ([]any, *Cluster) {
	var objects []any
	c := &Cluster{Classes: classLister{}, Nodes: map[string]*v1.Node{}}
	for _, n := range []struct{ name, region string }{{"node-1", g.pick("r1", "r2")}, {"node-2", "r1"}} {
		node := &v1.Node{TypeMeta: typeNode, ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"region": n.region}}}
		c.Nodes[n.name] = node
		objects = append(objects, node)
	}
	classes := []*resourceapi.DeviceClass{
		{TypeMeta: typeClass, ObjectMeta: metav1.ObjectMeta{Name: "class-a"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "driver-a"`}}},
			Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "driver-a", Parameters: runtimeRaw(`{"mode":"a"}`)}}}}}},
		{TypeMeta: typeClass, ObjectMeta: metav1.ObjectMeta{Name: "class-b"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "driver-b"`}}}}},
		{TypeMeta: typeClass, ObjectMeta: metav1.ObjectMeta{Name: "class-any"}},
		{TypeMeta: typeClass, ObjectMeta: metav1.ObjectMeta{Name: "class-big"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.capacity[device.driver].memory.compareTo(quantity("4Gi")) >= 0`}}}}},
	}
	for _, cl := range classes {
		c.Classes[cl.Name] = cl
		objects = append(objects, cl)
	}
	numPools := 2 + g.r.Intn(3)
	sliceIndex := 0
	for p := 0; p < numPools; p++ {
		driver := g.pick("driver-a", "driver-a", "driver-b")
		pool := fmt.Sprintf("pool-%d", p)
		numSlices := 1
		if g.chance(0.3) {
			numSlices = 2
		}
		partitionable := g.chance(0.15)
		total := numSlices
		if partitionable {
			total++
		}
		publish := total
		if g.chance(0.08) {
			publish-- // incomplete pool
		}
		generation := int64(1)
		for s := 0; s < publish; s++ {
			slice := &resourceapi.ResourceSlice{TypeMeta: typeSlice,
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("slice-%d", sliceIndex)},
				Spec: resourceapi.ResourceSliceSpec{Driver: driver,
					Pool: resourceapi.ResourcePool{Name: pool, Generation: generation, ResourceSliceCount: int64(total)}}}
			sliceIndex++
			switch g.r.Intn(6) {
			case 0:
				slice.Spec.AllNodes = ptr.To(true)
			case 1:
				slice.Spec.NodeSelector = &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
					{Key: "region", Operator: v1.NodeSelectorOpIn, Values: []string{g.pick("r1", "r2")}}}}}}
			case 2:
				slice.Spec.NodeName = ptr.To("node-2")
			default:
				slice.Spec.NodeName = ptr.To("node-1")
			}
			if partitionable && s == publish-1 && publish == total {
				slice.Spec.SharedCounters = []resourceapi.CounterSet{{Name: "set-0",
					Counters: map[string]resourceapi.Counter{"mem": {Value: resource.MustParse(g.pick("8Gi", "16Gi"))}}}}
			} else {
				n := 1 + g.r.Intn(6)
				for d := 0; d < n; d++ {
					name := fmt.Sprintf("dev-%d-%d", s, d)
					if g.chance(0.05) {
						name = "dev-0-0" // duplicate names make the pool invalid
					}
					counterSet := ""
					if partitionable {
						counterSet = "set-0"
					}
					slice.Spec.Devices = append(slice.Spec.Devices, g.device(name, !partitionable && g.chance(0.15), counterSet))
				}
			}
			c.Slices = append(c.Slices, slice)
			objects = append(objects, slice)
		}
	}
	return objects, c
}

func runtimeRaw(s string) (r runtimeRawExtension) {
	r.Raw = []byte(s)
	return r
}

var selectorsPool = []string{
	`device.attributes["driver-a"].?model.orValue("") == "a100"`,
	`device.capacity[device.driver].memory.compareTo(quantity("2Gi")) >= 0`,
	`device.attributes[device.driver].ecc`,
	`has(device.attributes[device.driver].driverVersion) && device.attributes[device.driver].driverVersion.isGreaterThan(semver("1.1.0"))`,
	`device.attributes[device.driver].numa < 2`,
	`device.allowMultipleAllocations == false`,
}

var compatibilityGroupsPool = [][]string{nil, {"mig"}, {"mps"}, {"mig", "mps"}, {"mps", "vgpu"}}

// Derived attribute names: new ones, and driver-a/numa, which shadows the static attribute.
var derivedNamesPool = []string{"example.com/numa", "example.com/socket", "example.com/near", "driver-a/numa"}

// Derived attribute expressions: ints, strings, semver, lists (also empty ones), runtime errors
// (driverVersion is on half of the devices) and results of the wrong runtime type.
var derivedExpressionsPool = []string{
	`device.attributes[device.driver].numa`,
	`device.attributes[device.driver].numa / 2`,
	`device.attributes[device.driver].model`,
	`device.attributes[device.driver].ecc`,
	`[device.attributes[device.driver].numa + 0, device.attributes[device.driver].numa + 1]`,
	`[device.attributes[device.driver].numa].filter(x, x > 1)`,
	`device.attributes["example.com"].?pcieRoot.orValue("none")`,
	`device.attributes[device.driver].driverVersion`,
	`device.attributes[device.driver].numa > 0 ? dyn(1) : dyn(1.5)`,
	`semver("1.2.3")`,
	`1.5`,
}

func (g *gen) derivedAttributes() []resourceapi.DeviceDerivedAttribute {
	if !g.alpha || !g.chance(0.5) {
		return nil
	}
	var out []resourceapi.DeviceDerivedAttribute
	for i := 0; i < 1+g.r.Intn(2); i++ {
		// Weighted towards the expressions that evaluate on every device.
		expr := derivedExpressionsPool[g.r.Intn(len(derivedExpressionsPool))]
		if g.chance(0.5) {
			expr = derivedExpressionsPool[g.r.Intn(3)]
		}
		out = append(out, resourceapi.DeviceDerivedAttribute{
			Name: resourceapi.FullyQualifiedName(g.pick(derivedNamesPool...)), Expression: expr})
	}
	return out
}

func (g *gen) request(name string, first bool) resourceapi.DeviceRequest {
	return g.requestWith(name, first, true)
}

func (g *gen) requestWith(name string, first, allowSubs bool) resourceapi.DeviceRequest {
	exact := resourceapi.ExactDeviceRequest{DeviceClassName: g.pick("class-a", "class-a", "class-b", "class-any", "class-big"),
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(1 + g.r.Intn(2))}
	if g.chance(0.1) {
		exact.AllocationMode = resourceapi.DeviceAllocationModeAll
		exact.Count = 0
	}
	if g.chance(0.3) {
		exact.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: g.pick(selectorsPool...)}}}
	}
	if g.chance(0.2) {
		exact.Tolerations = []resourceapi.DeviceToleration{{Key: g.pick("maintenance", ""), Operator: resourceapi.DeviceTolerationOpExists}}
	}
	if g.chance(0.15) {
		exact.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			"memory": resource.MustParse(g.pick("512Mi", "1Gi", "3Gi"))}}
	}
	if first && g.chance(0.05) {
		exact.AdminAccess = ptr.To(true)
	}
	exact.DerivedAttributes = g.derivedAttributes()
	if allowSubs && g.chance(0.2) {
		var subs []resourceapi.DeviceSubRequest
		for i := 0; i < 1+g.r.Intn(3); i++ {
			s := g.requestWith("x", false, false).Exactly
			subs = append(subs, resourceapi.DeviceSubRequest{Name: fmt.Sprintf("sub-%d", i), DeviceClassName: s.DeviceClassName,
				Selectors: s.Selectors, AllocationMode: s.AllocationMode, Count: s.Count, Tolerations: s.Tolerations, Capacity: s.Capacity,
				DerivedAttributes: s.DerivedAttributes})
		}
		return resourceapi.DeviceRequest{Name: name, FirstAvailable: subs}
	}
	return resourceapi.DeviceRequest{Name: name, Exactly: &exact}
}

func (g *gen) claim(name string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{TypeMeta: typeClaim, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	n := 1 + g.r.Intn(2)
	for i := 0; i < n; i++ {
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, g.request(fmt.Sprintf("req-%d", i), true))
	}
	if n > 1 && g.chance(0.3) {
		attr := resourceapi.FullyQualifiedName(g.pick("driver-a/numa", "driver-a/model", "example.com/pcieRoot", "driver-b/numa"))
		if g.alpha && g.chance(0.6) {
			attr = resourceapi.FullyQualifiedName(g.pick(derivedNamesPool...))
		}
		c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{MatchAttribute: &attr})
	}
	if g.chance(0.15) {
		attr := resourceapi.FullyQualifiedName(g.pick("driver-a/numa", "driver-a/model"))
		if g.alpha && g.chance(0.6) {
			attr = resourceapi.FullyQualifiedName(g.pick(derivedNamesPool...))
		}
		c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{DistinctAttribute: &attr})
	}
	if g.alpha {
		// Most derived attributes should be used by a constraint (only then are they evaluated).
		var names []string
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly != nil {
				for _, d := range r.Exactly.DerivedAttributes {
					names = append(names, string(d.Name))
				}
			}
			for _, sub := range r.FirstAvailable {
				for _, d := range sub.DerivedAttributes {
					names = append(names, string(d.Name))
				}
			}
		}
		if len(names) > 0 && g.chance(0.8) {
			attr := resourceapi.FullyQualifiedName(g.pick(names...))
			if g.chance(0.5) {
				c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{MatchAttribute: &attr})
			} else {
				c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{DistinctAttribute: &attr})
			}
		}
	}
	if g.chance(0.2) {
		c.Spec.Devices.Config = append(c.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{
			Requests: []string{"req-0"},
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: "driver-a", Parameters: runtimeRaw(`{"claim":true}`)}}})
	}
	return c
}

// generateCase returns a List of objects with some claims already allocated (by upstream).
func generateCase(ctx context.Context, seed int64, index int, cache *cel.Cache, features structured.Features, alpha bool) []byte {
	g := &gen{r: rand.New(rand.NewSource(seed*1000003 + int64(index))), alpha: alpha}
	objects, c := g.cluster(index)
	// Pre-allocate a few claims on random nodes with the upstream allocator.
	for i := 0; i < g.r.Intn(3); i++ {
		claim := g.claim(fmt.Sprintf("allocated-%d", i))
		c.Pending = []*resourceapi.ResourceClaim{claim}
		out := runUpstreamWith(ctx, c, g.pick("node-1", "node-2"), cache, features)
		if out.Kind == "allocated" {
			claim.Status.Allocation = &out.Results[0]
			c.Allocated = append(c.Allocated, claim)
			objects = append(objects, claim)
		}
	}
	c.Pending = nil
	numClaims := 1
	if g.chance(0.3) {
		numClaims = 2
	}
	for i := 0; i < numClaims; i++ {
		objects = append(objects, g.claim(fmt.Sprintf("claim-%d", i)))
	}
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objects})
	if err != nil {
		panic(err)
	}
	return data
}
