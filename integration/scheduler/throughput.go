package main

// Throughput: the DRA workloads of upstream's scheduler_perf (test/integration/scheduler_perf,
// dra/performance-config.yaml) run twice in one invocation, once with the in-tree DynamicResources
// plugin and once with devlet-extender in allocate mode (the plugin disabled), on the same real
// kube-scheduler and kube-apiserver v1.37.2. scheduler_perf itself cannot take an extender: it
// runs the scheduler in its own test process against an API server it starts there, and has no
// step that starts an out-of-process webhook and hands it a kubeconfig; so its workloads are
// rebuilt here from the same templates (node names, slice and device attributes, class, claim
// template, selector).
//
//	scheduler-e2e --extender PATH --throughput [--nodes 500 --init-claims 2500 --pods 2500]
//	              [--workloads template,selector] [--sides intree,extender] [--replicas]
//
// Each (workload, side) gets a fresh API server state (its own etcd prefix), its own scheduler
// (and extender), and the resourceclaim controller of k8s.io/kubernetes running in this process
// (it creates the template claims, as kube-controller-manager would). Measured from the first pod
// create to the last pod seen bound: pods/s, per-pod latency (create call to bound, like
// scheduler_perf's pod_scheduling_sli_duration: it includes the wait in the queue behind the
// burst) p50/p99, and the CPU seconds of kube-scheduler, devlet-extender, kube-apiserver and this
// process (etcd, the claim controller, the pod creators). Afterwards every pod must be bound,
// every claim allocated and reserved for its pod, and no device allocated twice.
//
// --replicas: the extender side runs two devlet-extender processes behind one address (the
// proxy forwards each request to the next live replica, as a Service forgets an endpoint whose
// process is gone) and kills the first replica (SIGKILL) when a third of the pods are bound. The
// run must still bind every pod without allocating a device twice. The replicas run with
// --check-peer-allocations (--peer-check off shows what happens without it: a device allocated
// twice within the watches' lag); their /metrics give the check's count, refusals and time.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
)

const (
	perfDriver = "test-driver.cdi.k8s.io"
	perfClass  = "test-class"
	perfNS     = "test"
	initNS     = "init"
	// perfSelector is the selector workloads' CEL expression: every device matches, but it must be
	// evaluated.
	perfSelector = `device.attributes["test-driver.cdi.k8s.io"].driverVersion.major() >= 1 && ` +
		`device.capacity["test-driver.cdi.k8s.io"].memory.isGreaterThan(quantity("1Mi"))`
	perfDevicesPerNode = 10
)

type tpOptions struct {
	nodes, initClaims, pods int
	workloads, sides        []string
	replicas                bool
	peerCheck               bool // devlet-extender --check-peer-allocations
	minRatio                float64
	timeout                 time.Duration
}

// tpResult is one (workload, side) run.
type tpResult struct {
	Workload, Side     string
	Pods               int
	Seconds            float64
	PodsPerSecond      float64
	P50, P99           float64 // milliseconds, pod create to bound
	CPU                map[string]float64
	CPUPerPod          float64 // milliseconds of all processes' CPU per pod
	ExtenderFilter     int     `json:",omitempty"`
	ExtenderPrioritize int     `json:",omitempty"`
	ExtenderBind       int     `json:",omitempty"`
	ExtenderErrors     int     `json:",omitempty"`
	// --check-peer-allocations, summed over the replicas alive at the end (/metrics).
	PeerChecks    int     `json:",omitempty"`
	PeerConflicts int     `json:",omitempty"`
	PeerCheckMs   float64 `json:",omitempty"` // mean wait-and-check time per checked bind
}

// ---- CPU ----------------------------------------------------------------------------------------

var clockTicks = 100.0 // USER_HZ on Linux

// procCPU returns the user+system CPU seconds of a process.
func procCPU(pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	// Fields after the command (which may hold spaces) start after the last ')'.
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks
}

func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func childPID(c *child) int {
	if c == nil || c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// ---- the replicas' proxy ------------------------------------------------------------------------

// balancer forwards each request to the next replica that accepts the connection (round robin),
// counting the replies whose body carries a non-empty "Error".
type balancer struct {
	targets []string
	next    atomic.Int64
	client  *http.Client
	mu      sync.Mutex
	counts  map[string]int
	errors  int
	down    map[int]bool
}

func newBalancer(targets ...string) *balancer {
	return &balancer{targets: targets, counts: map[string]int{}, down: map[int]bool{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

func (b *balancer) markDown(i int) {
	b.mu.Lock()
	b.down[i] = true
	b.mu.Unlock()
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var resp *http.Response
	for try := 0; try < len(b.targets); try++ {
		i := int(b.next.Add(1)) % len(b.targets)
		b.mu.Lock()
		down := b.down[i]
		b.mu.Unlock()
		if down {
			continue
		}
		resp, err = b.client.Post(b.targets[i]+req.URL.Path, req.Header.Get("Content-Type"),
			strings.NewReader(string(body)))
		if err == nil {
			break
		}
	}
	if resp == nil {
		http.Error(w, fmt.Sprintf("no replica answered: %v", err), http.StatusBadGateway)
		return
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var result struct{ Error string }
	_ = json.Unmarshal(reply, &result)
	b.mu.Lock()
	b.counts[filepath.Base(req.URL.Path)]++
	if result.Error != "" {
		b.errors++
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	w.Write(reply)
}

// ---- objects (scheduler_perf's dra templates) ---------------------------------------------------

func perfNode(i int) *v1.Node {
	n := node(fmt.Sprintf("scheduler-perf-dra-%d", i))
	n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("110")
	n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("32")
	n.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("128Gi")
	n.Status.Capacity = n.Status.Allocatable
	return n
}

// perfSlice is templates/resourceslice-basic-devices.yaml: 10 devices, 2 PCI roots.
func perfSlice(i int) *resourceapi.ResourceSlice {
	nodeName := fmt.Sprintf("scheduler-perf-dra-%d", i)
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	var devices []resourceapi.Device
	for d := 0; d < perfDevicesPerNode; d++ {
		version := "1.2.3"
		sriov := true
		root := strconv.Itoa(d % 2)
		addr := fmt.Sprintf("0000:0%d:00.0", d)
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("basic-device-%d", d),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"driver":                          str("xe"),
				"driverVersion":                   {VersionValue: &version},
				"resource.k8s.io/pciRoot":         str(root),
				"family":                          str("Arc Pro B-Series"),
				"health":                          str("Healthy"),
				"model":                           str("B60"),
				"pciAddress":                      str(addr),
				"pciId":                           str("0xe211"),
				"pciRoot":                         str("0" + root),
				"resource.kubernetes.io/pciBusID": str(addr),
				"resource.kubernetes.io/pciRoot":  str("pci0000:0" + root),
				"sriov":                           {BoolValue: &sriov},
				"type":                            str("gpu"),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory":     {Value: resource.MustParse("24480Mi")},
				"millicores": {Value: resource.MustParse("1k")},
			},
		})
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("resourceslice-%d", i)},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   perfDriver,
			Pool:     resourceapi.ResourcePool{Name: fmt.Sprintf("resourceslice-%d", i), Generation: 1, ResourceSliceCount: 1},
			NodeName: &nodeName,
			Devices:  devices,
		},
	}
}

func perfRequest(selector string) resourceapi.DeviceRequest {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: perfClass,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	if selector != "" {
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: selector}}}
	}
	return resourceapi.DeviceRequest{Name: "req-0", Exactly: &req}
}

func perfPod(i int) *v1.Pod {
	tmpl := "test-claim-template"
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: perfNS},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "resource"}}}}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "resource",
				ResourceClaimTemplateName: &tmpl}},
		},
	}
}

// setupPerfCluster creates the nodes, slices, class, the already allocated claims (allocated
// here like scheduler_perf's allocResourceClaims: claim i on node i mod N) and the template.
func setupPerfCluster(ctx context.Context, cs *kubernetes.Clientset, o tpOptions,
	selector string) error {
	for _, name := range []string{perfNS, initNS, "warmup"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	if err := parallel(o.nodes, 8, func(i int) error {
		if _, err := cs.CoreV1().Nodes().Create(ctx, perfNode(i), metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.ResourceV1().ResourceSlices().Create(ctx, perfSlice(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("nodes and slices: %w", err)
	}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: perfClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + perfDriver + `"`}}}},
	}
	if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("DeviceClass: %w", err)
	}
	if o.initClaims > o.nodes*perfDevicesPerNode {
		return fmt.Errorf("--init-claims %d: more than the %d devices", o.initClaims,
			o.nodes*perfDevicesPerNode)
	}
	if err := parallel(o.initClaims, 8, func(i int) error {
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("test-claim-%d", i), Namespace: initNS},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{perfRequest("")}}},
		}
		created, err := cs.ResourceV1().ResourceClaims(initNS).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		nodeName := fmt.Sprintf("scheduler-perf-dra-%d", i%o.nodes)
		created.Status.Allocation = &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "req-0", Driver: perfDriver, Pool: fmt.Sprintf("resourceslice-%d", i%o.nodes),
				Device: fmt.Sprintf("basic-device-%d", i/o.nodes)}}},
			NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name",
					Operator: v1.NodeSelectorOpIn, Values: []string{nodeName}}}}}},
		}
		_, err = cs.ResourceV1().ResourceClaims(initNS).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("init claims: %w", err)
	}
	template := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "test-claim-template", Namespace: perfNS},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{perfRequest(selector)}}}},
	}
	if _, err := cs.ResourceV1().ResourceClaimTemplates(perfNS).Create(ctx, template,
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	return nil
}

// parallel runs fn(0..n-1) on `workers` goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// ---- one run ------------------------------------------------------------------------------------

type tpEnv struct {
	dir, self, extenderPath, etcdURL string
	caFile                           string
	ca                               *certAuthority
	e                                *env
}

// runSide runs one workload on one side with a fresh API server state.
func (t *tpEnv) runSide(o tpOptions, workload, side string, run int) (*tpResult, error) {
	e := t.e
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	selector := ""
	if workload == "selector" {
		selector = perfSelector
	}
	// A fresh API server on its own etcd prefix: nothing of the other side's run remains.
	port := freePort()
	e.server = "https://127.0.0.1:" + strconv.Itoa(port)
	e.apiserver = &child{name: "kube-apiserver", log: filepath.Join(t.dir, "kube-apiserver.log"),
		args: append(apiServerArgs(t.self, t.etcdURL, port, t.dir, t.caFile),
			"--etcd-prefix=/run-"+strconv.Itoa(run))}
	e.kubeconfig = filepath.Join(t.dir, "kubeconfig.yaml")
	if err := os.WriteFile(e.kubeconfig, []byte(kubeconfigText(e.server, t.ca, e.token)), 0o600); err != nil {
		return nil, err
	}
	e.apiserver.start()
	// Informers stop before the API server goes (no reconnect noise).
	defer func() { cancel(); e.apiserver.cmd.Process.Kill(); <-e.apiserver.done }()
	if err := e.waitAPIServer(); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	setupStart := time.Now()
	if err := setupPerfCluster(ctx, cs, o, selector); err != nil {
		return nil, err
	}
	logf("[%s/%s] cluster: %d nodes, %d allocated claims (%.1fs)", workload, side, o.nodes,
		o.initClaims, time.Since(setupStart).Seconds())

	// The resourceclaim controller creates the pods' claims from the template.
	factory := informers.NewSharedInformerFactory(cs, 0)
	claimController, err := resourceclaim.NewController(klog.Background(), cs,
		factory.Core().V1().Pods(), factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		return nil, fmt.Errorf("resourceclaim controller: %w", err)
	}
	// Bound pods, seen by a watch: the time each was first seen with a node.
	var mu sync.Mutex
	created := map[string]time.Time{}
	bound := map[string]time.Time{}
	boundCount := atomic.Int64{}
	podInformer := factory.Core().V1().Pods().Informer()
	onPod := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Namespace != perfNS || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, seen := bound[p.Name]; !seen {
			bound[p.Name] = now
			boundCount.Add(1)
		}
		mu.Unlock()
	}
	podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) }})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go claimController.Run(ctx, 8)

	// The scheduler (and the extender) of this side.
	var extenders []*child
	var targets []string
	var bal *balancer
	schedMode := "intree"
	if side == "extender" {
		schedMode = "allocate"
		n := 1
		if o.replicas {
			n = 2
		}
		for r := 0; r < n; r++ {
			extPort := freePort()
			url := "http://127.0.0.1:" + strconv.Itoa(extPort)
			c := &child{name: fmt.Sprintf("devlet-extender-%d", r),
				log: filepath.Join(t.dir, fmt.Sprintf("devlet-extender-%d.log", r)),
				args: []string{t.extenderPath, "--kubeconfig", e.kubeconfig, "--mode", "allocate",
					"--bind-address", "127.0.0.1", "--port", strconv.Itoa(extPort),
					"--url-prefix", "/devlet", "--kube-api-qps", "5000", "--kube-api-burst", "5000",
					"--check-peer-allocations=" + strconv.FormatBool(o.peerCheck)}}
			c.start()
			extenders = append(extenders, c)
			targets = append(targets, url)
		}
		defer func() {
			for _, c := range extenders {
				c.stop()
			}
		}()
		for r, url := range targets {
			if err := waitHTTP(e.probe, url+"/readyz", "", 120*time.Second,
				"devlet-extender"); err != nil {
				fmt.Fprintln(os.Stderr, extenders[r].tail(4<<10))
				return nil, err
			}
			if err := waitSeesNodes(ctx, url, o.nodes); err != nil {
				return nil, err
			}
		}
		bal = newBalancer(targets...)
	}
	proxyListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer proxyListener.Close()
	proxyURL := "http://" + proxyListener.Addr().String() + "/devlet"
	if bal != nil {
		go http.Serve(proxyListener, bal)
	}
	config := filepath.Join(t.dir, "scheduler-"+side+".yaml")
	// Like scheduler_perf (util.go): the scheduler's client is not rate limited at 50/s (its
	// default), or the in-tree side, with three writes per pod, would measure the limiter.
	schedYAML := strings.Replace(schedulerConfig(schedMode, e.kubeconfig, proxyURL),
		"clientConnection:\n", "clientConnection:\n  qps: 5000\n  burst: 5000\n", 1)
	if err := os.WriteFile(config, []byte(schedYAML), 0o600); err != nil {
		return nil, err
	}
	sched := &child{name: "kube-scheduler", log: filepath.Join(t.dir, "kube-scheduler-"+side+".log"),
		args: []string{t.self, runScheduler, "--config=" + config, "--secure-port=0",
			"--pod-max-in-unschedulable-pods-duration=10s", "--v=1"}}
	sched.start()
	defer sched.stop()
	// Warm-up: a pod without claims, scheduled once the scheduler's caches are synced.
	warm := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "warmup", Namespace: "warmup"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := cs.CoreV1().Pods("warmup").Create(ctx, warm, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	for {
		p, err := cs.CoreV1().Pods("warmup").Get(ctx, "warmup", metav1.GetOptions{})
		if err == nil && p.Spec.NodeName != "" {
			break
		}
		if ctx.Err() != nil || sched.exited() {
			fmt.Fprintln(os.Stderr, sched.tail(4<<10))
			return nil, fmt.Errorf("warm-up pod not scheduled")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// ---- measured: create the pods, wait until all are bound ----
	pids := map[string]int{"kube-scheduler": childPID(sched), "kube-apiserver": childPID(e.apiserver)}
	for r, c := range extenders {
		pids[fmt.Sprintf("devlet-extender-%d", r)] = childPID(c)
	}
	cpu0 := map[string]float64{"scheduler-e2e": selfCPU()}
	for name, pid := range pids {
		cpu0[name] = procCPU(pid)
	}
	start := time.Now()
	go func() {
		parallel(o.pods, 8, func(i int) error {
			p := perfPod(i)
			mu.Lock()
			created[p.Name] = time.Now()
			mu.Unlock()
			_, err := cs.CoreV1().Pods(perfNS).Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				logf("creating %s: %v", p.Name, err)
			}
			return nil
		})
	}()
	killed := false
	lastReport := time.Now()
	for boundCount.Load() < int64(o.pods) {
		if ctx.Err() != nil || sched.exited() {
			fmt.Fprintln(os.Stderr, sched.tail(4<<10))
			return nil, fmt.Errorf("%d of %d pods bound before the deadline",
				boundCount.Load(), o.pods)
		}
		if o.replicas && !killed && boundCount.Load() >= int64(o.pods/3) {
			logf("[%s/%s] %d pods bound: killing devlet-extender-0 (SIGKILL)", workload, side,
				boundCount.Load())
			extenders[0].cmd.Process.Kill()
			<-extenders[0].done
			bal.markDown(0)
			killed = true
		}
		if time.Since(lastReport) > 10*time.Second {
			logf("[%s/%s] %d of %d pods bound", workload, side, boundCount.Load(), o.pods)
			lastReport = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	var end time.Time
	var lat []float64
	for name, b := range bound {
		if b.After(end) {
			end = b
		}
		if c, ok := created[name]; ok {
			lat = append(lat, float64(b.Sub(c).Microseconds())/1000)
		}
	}
	mu.Unlock()
	res := &tpResult{Workload: workload, Side: side, Pods: o.pods, CPU: map[string]float64{}}
	res.CPU["scheduler-e2e"] = selfCPU() - cpu0["scheduler-e2e"]
	total := res.CPU["scheduler-e2e"]
	for name, pid := range pids {
		if pid == 0 || (killed && name == "devlet-extender-0") {
			continue
		}
		res.CPU[name] = procCPU(pid) - cpu0[name]
		total += res.CPU[name]
	}
	res.Seconds = end.Sub(start).Seconds()
	res.PodsPerSecond = float64(o.pods) / res.Seconds
	sort.Float64s(lat)
	res.P50, res.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	res.CPUPerPod = total * 1000 / float64(o.pods)
	if bal != nil {
		bal.mu.Lock()
		res.ExtenderFilter, res.ExtenderPrioritize = bal.counts["filter"], bal.counts["prioritize"]
		res.ExtenderBind, res.ExtenderErrors = bal.counts["bind"], bal.errors
		bal.mu.Unlock()
	}
	var peerSeconds float64
	for r, url := range targets {
		if killed && r == 0 {
			continue
		}
		m := scrapeMetrics(url + "/metrics")
		res.PeerChecks += int(m["devlet_extender_peer_checks_total"])
		res.PeerConflicts += int(m["devlet_extender_peer_conflicts_total"])
		peerSeconds += m["devlet_extender_peer_check_seconds_total"]
	}
	if res.PeerChecks > 0 {
		res.PeerCheckMs = peerSeconds * 1000 / float64(res.PeerChecks)
	}
	if err := checkPerfClaims(ctx, cs, o.pods); err != nil {
		return res, err
	}
	return res, nil
}

// scrapeMetrics reads a Prometheus text page's unlabelled samples (empty on any error).
func scrapeMetrics(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 || strings.HasPrefix(line, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(fields[1], 64); err == nil {
			out[fields[0]] = v
		}
	}
	return out
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// waitSeesNodes waits until the extender's filter passes all `n` perf nodes for a pod without
// claims (its watches have delivered the Nodes).
func waitSeesNodes(ctx context.Context, url string, n int) error {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%q", fmt.Sprintf("scheduler-perf-dra-%d", i))
	}
	body := `{"Pod":{"metadata":{"name":"probe","namespace":"default","uid":"probe"},` +
		`"spec":{"containers":[{"name":"c","image":"x"}]}},"NodeNames":[` +
		strings.Join(names, ",") + `]}`
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := http.Post(url+"/devlet/filter", "application/json", strings.NewReader(body))
		if err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var reply struct{ NodeNames []string }
			if json.Unmarshal(data, &reply) == nil && len(reply.NodeNames) >= n {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("devlet-extender at %s does not see the %d nodes", url, n)
}

// checkPerfClaims: every pod bound, each pod's claim allocated and reserved for it, no device
// allocated to two claims (the init claims included).
func checkPerfClaims(ctx context.Context, cs *kubernetes.Clientset, pods int) error {
	podList, err := cs.CoreV1().Pods(perfNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	uids := map[string]string{}
	for _, p := range podList.Items {
		if p.Spec.NodeName == "" {
			return fmt.Errorf("pod %s not bound", p.Name)
		}
		uids[string(p.UID)] = p.Name
	}
	if len(uids) != pods {
		return fmt.Errorf("%d pods, want %d", len(uids), pods)
	}
	owner := map[string]string{}
	reserved := 0
	for _, namespace := range []string{initNS, perfNS} {
		claims, err := cs.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, c := range claims.Items {
			devices := allocated(&c)
			if namespace == perfNS {
				if len(devices) == 0 {
					return fmt.Errorf("claim %s not allocated", c.Name)
				}
				for _, r := range c.Status.ReservedFor {
					if _, ok := uids[string(r.UID)]; ok {
						reserved++
					}
				}
			}
			for _, d := range devices {
				if other, ok := owner[d]; ok {
					return fmt.Errorf("device %s allocated to both %s and %s/%s", d, other,
						namespace, c.Name)
				}
				owner[d] = namespace + "/" + c.Name
			}
		}
	}
	if reserved != pods {
		return fmt.Errorf("%d claims reserved for their pods, want %d", reserved, pods)
	}
	logf("  all %d pods bound, %d devices allocated, none twice", pods, len(owner))
	return nil
}

// runThroughput runs every workload on every side and prints the table. Exit status: 0, 1 when a
// run failed its checks or the extender's pods/s fell below --min-ratio of the in-tree plugin's,
// 2 on a setup failure.
func runThroughput(self, extenderPath, keep string, o tpOptions) int {
	dir := keep
	if dir == "" {
		d, err := os.MkdirTemp("", "devlet-throughput-")
		if err != nil {
			fail("%v", err)
		}
		dir = d
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("%v", err)
	}
	e := &env{dir: dir, probe: &http.Client{Timeout: 2 * time.Second}}
	etcd, etcdURL := startEtcd(dir)
	defer etcd.Close()
	ca, caFile, _ := writeCredentials(e)
	t := &tpEnv{dir: dir, self: self, extenderPath: extenderPath, etcdURL: etcdURL,
		caFile: caFile, ca: ca, e: e}
	logf("throughput: %d nodes x %d devices, %d allocated claims, %d pods; workloads %v, sides %v, "+
		"replicas %v (work dir %s)", o.nodes, perfDevicesPerNode, o.initClaims, o.pods, o.workloads,
		o.sides, o.replicas, dir)
	var results []*tpResult
	failed := 0
	run := 0
	for _, w := range o.workloads {
		for _, side := range o.sides {
			run++
			logf("RUN  %s/%s", w, side)
			res, err := t.runSide(o, w, side, run)
			if err != nil {
				logf("FAIL %s/%s: %v", w, side, err)
				for _, name := range []string{"kube-scheduler-" + side + ".log", "devlet-extender-0.log",
					"devlet-extender-1.log"} {
					if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
						if len(data) > 4096 {
							data = data[len(data)-4096:]
						}
						fmt.Fprintf(os.Stderr, "---- %s ----\n%s\n", name, data)
					}
				}
				failed++
				continue
			}
			logf("PASS %s/%s: %.1f pods/s", w, side, res.PodsPerSecond)
			if res.PeerChecks > 0 {
				logf("  peer check: %d binds checked, %d refused, %.2f ms each (mean)",
					res.PeerChecks, res.PeerConflicts, res.PeerCheckMs)
			}
			results = append(results, res)
		}
	}
	fmt.Printf("\n%-9s %-9s %5s %8s %8s %9s %9s %10s %10s %10s %10s %10s\n", "workload", "side",
		"pods", "seconds", "pods/s", "p50 ms", "p99 ms", "cpu sched", "cpu ext", "cpu apisrv",
		"cpu e2e", "cpu/pod ms")
	for _, r := range results {
		ext := 0.0
		for name, v := range r.CPU {
			if strings.HasPrefix(name, "devlet-extender") {
				ext += v
			}
		}
		fmt.Printf("%-9s %-9s %5d %8.1f %8.1f %9.0f %9.0f %10.2f %10.2f %10.2f %10.2f %10.1f\n",
			r.Workload, r.Side, r.Pods, r.Seconds, r.PodsPerSecond, r.P50, r.P99,
			r.CPU["kube-scheduler"], ext, r.CPU["kube-apiserver"], r.CPU["scheduler-e2e"], r.CPUPerPod)
	}
	for _, w := range o.workloads {
		var in, ex *tpResult
		for _, r := range results {
			if r.Workload == w && r.Side == "intree" {
				in = r
			}
			if r.Workload == w && r.Side == "extender" {
				ex = r
			}
		}
		if in == nil || ex == nil {
			continue
		}
		ratio := ex.PodsPerSecond / in.PodsPerSecond
		fmt.Printf("%s: devlet-extender / in-tree pods/s = %.2f (extender calls: filter %d, "+
			"prioritize %d, bind %d, replies with an Error %d)\n", w, ratio, ex.ExtenderFilter,
			ex.ExtenderPrioritize, ex.ExtenderBind, ex.ExtenderErrors)
		if ratio < o.minRatio {
			logf("FAIL %s: ratio %.2f below --min-ratio %.2f", w, ratio, o.minRatio)
			failed++
		}
	}
	for _, r := range results {
		data, _ := json.Marshal(r)
		fmt.Printf("RESULT %s\n", data)
	}
	if failed > 0 {
		logf("FAIL: %d throughput run(s) failed", failed)
		return 1
	}
	logf("PASS (throughput)")
	return 0
}
