package main

// Running the real allocator (k8s.io/dynamic-resource-allocation/structured, v0.37.2) on a set of
// objects, the way kube-scheduler's DynamicResources plugin does: allocated state gathered from
// allocated claims, one allocator per pod, Allocate per node.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Kubernetes 1.37 default gates, as allocator features.
var defaultFeatures = structured.Features{
	AdminAccess:             true,
	PrioritizedList:         true,
	PartitionableDevices:    true,
	DeviceTaints:            true,
	ConsumableCapacity:      true,
	DeviceBindingAndStatus:  true,
	FractionalCapacityRange: true,
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclass"), name)
}

// Cluster is the input of one allocation problem.
type Cluster struct {
	Classes   classLister
	Slices    []*resourceapi.ResourceSlice
	Allocated []*resourceapi.ResourceClaim
	Pending   []*resourceapi.ResourceClaim
	Nodes     map[string]*v1.Node
}

// newState builds AllocatedState from allocated claims (like the scheduler's GatherAllocatedState).
func newState() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

func addToState(state *structured.AllocatedState, alloc *resourceapi.AllocationResult, features structured.Features) {
	for _, r := range alloc.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if features.ConsumableCapacity && r.ShareID != nil {
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		state.AllocatedDevices.Insert(id)
	}
}

// Outcome is what an allocator decided for one node; it is also the JSON the C++ side compares.
type Outcome struct {
	Kind    string                         `json:"kind"` // allocated | unschedulable | error
	Error   string                         `json:"error,omitempty"`
	Results []resourceapi.AllocationResult `json:"results,omitempty"`
	// Steps is upstream's allocateOne invocation count (test-only Stats, read by reflection
	// because its type is in an internal package); -1 when the implementation has none.
	Steps int64 `json:"steps"`
	// Nanos is how long NewAllocator + Allocate took (the fastest of up to three runs when the
	// first is short), for allocdiff_compare's speed check.
	Nanos int64 `json:"nanos"`
}

func allocateOneInvocations(alloc structured.Allocator) int64 {
	m := reflect.ValueOf(alloc).MethodByName("GetStats")
	if !m.IsValid() {
		return -1
	}
	f := m.Call(nil)[0].FieldByName("NumAllocateOneInvocations")
	if !f.IsValid() {
		return -1
	}
	return f.Int()
}

func runUpstream(ctx context.Context, c *Cluster, nodeName string, cache *cel.Cache) Outcome {
	return runUpstreamWith(ctx, c, nodeName, cache, defaultFeatures)
}

// parseGates applies Kubernetes feature-gate names (`A=true,B=false`) to the 1.37 defaults.
// Gates that do not change the allocator are accepted and ignored.
func parseGates(spec string) (structured.Features, error) {
	f := defaultFeatures
	binding, status := true, true
	for _, item := range strings.Split(spec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok || (value != "true" && value != "false") {
			return f, fmt.Errorf("bad feature gate %q", item)
		}
		on := value == "true"
		switch name {
		case "DRAAdminAccess":
			f.AdminAccess = on
		case "DRAPrioritizedList":
			f.PrioritizedList = on
		case "DRAPartitionableDevices":
			f.PartitionableDevices = on
		case "DRADeviceTaints":
			f.DeviceTaints = on
		case "DRAConsumableCapacity":
			f.ConsumableCapacity = on
		case "DRADeviceBindingConditions":
			binding = on
		case "DRAResourceClaimDeviceStatus":
			status = on
		case "DRAListTypeAttributes":
			f.ListTypeAttributes = on
		case "DRAFractionalCapacityRange":
			f.FractionalCapacityRange = on
		case "DRADerivedAttributes":
			f.DerivedAttributes = on
		case "DRADeviceCompatibilityGroups":
			f.CompatibilityGroups = on
		case "DRAOptionalNodeOperations":
			f.OptionalNodeOperations = on
		}
	}
	f.DeviceBindingAndStatus = binding && status
	return f, nil
}

func runUpstreamWith(ctx context.Context, c *Cluster, nodeName string, cache *cel.Cache, features structured.Features) Outcome {
	state := newState()
	for _, claim := range c.Allocated {
		addToState(&state, claim.Status.Allocation, features)
	}
	node := c.Nodes[nodeName]
	if node == nil {
		node = &v1.Node{}
		node.Name = nodeName
	}
	start := time.Now()
	alloc, err := structured.NewAllocator(ctx, features, state, c.Classes, c.Slices, cache)
	if err != nil {
		return Outcome{Kind: "error", Error: err.Error(), Nanos: time.Since(start).Nanoseconds()}
	}
	out := classify(alloc.Allocate(ctx, node, c.Pending))
	out.Nanos = time.Since(start).Nanoseconds()
	out.Steps = allocateOneInvocations(alloc)
	return out
}

// timeUpstream is runUpstreamWith, with Nanos the fastest of three runs when the first took
// under 100 ms (scheduling noise on a shared machine is of the order of milliseconds).
// A run past upstreamBudget is Kind "timeout": the generator drew a problem too hard for
// either side, which allocdiff_compare reports and skips rather than let the run hang.
func timeUpstream(ctx context.Context, c *Cluster, nodeName string, cache *cel.Cache, features structured.Features) Outcome {
	const upstreamBudget = 10 * time.Second
	bounded, cancel := context.WithTimeout(ctx, upstreamBudget)
	defer cancel()
	out := runUpstreamWith(bounded, c, nodeName, cache, features)
	if bounded.Err() != nil {
		return Outcome{Kind: "timeout", Error: fmt.Sprintf("upstream took more than %v", upstreamBudget), Nanos: out.Nanos}
	}
	for i := 0; i < 2 && out.Nanos < int64(100*time.Millisecond); i++ {
		again := runUpstreamWith(ctx, c, nodeName, cache, features)
		out.Nanos = min(out.Nanos, again.Nanos)
	}
	return out
}

func classify(results []resourceapi.AllocationResult, err error) Outcome {
	switch {
	case err != nil && errors.Is(err, structured.ErrFailedAllocationOnNode):
		return Outcome{Kind: "unschedulable", Error: err.Error()}
	case err != nil:
		return Outcome{Kind: "error", Error: err.Error()}
	case results == nil:
		return Outcome{Kind: "unschedulable"}
	default:
		return Outcome{Kind: "allocated", Results: results}
	}
}

// decodeList reads a v1 List of objects into a Cluster.
func decodeList(data []byte) (*Cluster, error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, err
	}
	c := &Cluster{Classes: classLister{}, Nodes: map[string]*v1.Node{}}
	for i, item := range list.Items {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(item, &meta); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		switch meta.Kind {
		case "DeviceClass":
			var o resourceapi.DeviceClass
			if err := json.Unmarshal(item, &o); err != nil {
				return nil, err
			}
			c.Classes[o.Name] = &o
		case "ResourceSlice":
			var o resourceapi.ResourceSlice
			if err := json.Unmarshal(item, &o); err != nil {
				return nil, err
			}
			c.Slices = append(c.Slices, &o)
		case "ResourceClaim":
			var o resourceapi.ResourceClaim
			if err := json.Unmarshal(item, &o); err != nil {
				return nil, err
			}
			if o.Status.Allocation != nil {
				c.Allocated = append(c.Allocated, &o)
			} else {
				c.Pending = append(c.Pending, &o)
			}
		case "Node":
			var o v1.Node
			if err := json.Unmarshal(item, &o); err != nil {
				return nil, err
			}
			c.Nodes[o.Name] = &o
		default:
			return nil, fmt.Errorf("item %d: unsupported kind %q", i, meta.Kind)
		}
	}
	return c, nil
}
