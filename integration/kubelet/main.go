// kubelet-harness drives devlet's kubelet plugin the way the kubelet does, with the generated
// clients of k8s.io/kubelet v0.37.2:
//
//   - it watches the plugin registry directory (fsnotify, like the kubelet's plugin watcher), and
//     when a socket appears calls GetInfo (1 s timeout) and NotifyRegistrationStatus on it;
//   - it dials the advertised endpoint and calls NodePrepareResources / NodeUnprepareResources over
//     dra/v1 and dra/v1beta1, and NodeWatchResources over dra-health/v1 and v1alpha1;
//   - it checks the CDI and KEP-5304 device-metadata files the plugin wrote, decoding the metadata
//     with k8s.io/dynamic-resource-allocation/devicemetadata;
//   - on SIGTERM it checks that the registration socket goes before the DRA socket.
//
// The plugin under test is dra_kubelet_test_server (simulated GPUs, claims from JSON files, which
// this harness writes with the k8s.io/api resource/v1 types).
//
//	kubelet-harness --server build/dra-kubelet/dra_kubelet_test_server
//	kubelet-harness kubelet --registry-dir DIR [--unprepare] --claim NS/NAME/UID   (one call)
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const (
	driver   = "gpu.devlet.test"
	nodeName = "node-1"
	pool     = nodeName
)

// failure aborts the current scenario.
type failure struct{ msg string }

// T collects errors of one scenario.
type T struct {
	name   string
	errors []string
}

func (t *T) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.errors = append(t.errors, msg)
	fmt.Fprintf(os.Stderr, "    FAIL: %s\n", msg)
}

func (t *T) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	panic(failure{fmt.Sprintf(format, args...)})
}

func (t *T) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "    %s\n", fmt.Sprintf(format, args...))
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "kubelet" {
		kubeletMain(os.Args[2:])
		return
	}
	server := flag.String("server", "", "path of dra_kubelet_test_server")
	keep := flag.Bool("keep", false, "keep the temporary directories")
	flag.Func("server-arg", "extra argument for the server (repeatable), e.g. --journal-bytes=0", func(v string) error {
		extraServerArgs = append(extraServerArgs, v)
		return nil
	})
	flag.Parse()
	if *server == "" {
		fmt.Fprintln(os.Stderr, "--server is required")
		os.Exit(2)
	}
	scenarios := []struct {
		name string
		run  func(t *T, env *env)
		opts envOptions
	}{
		{"registration, prepare/unprepare over v1 and v1beta1, health, shutdown", fullScenario, envOptions{}},
		{"rolling update: POD_UID socket names", rollingScenario, envOptions{podUID: "6b2c9a3e-1f1e-4c7a-9a52-1b7d3f0e2a11"}},
		{"rolling update: hashed registration socket name for a long registry path", rollingScenario,
			envOptions{podUID: "6b2c9a3e-1f1e-4c7a-9a52-1b7d3f0e2a11", longRegistry: true}},
		{"health disabled: stream answers Unimplemented and is not advertised", healthDisabledScenario, envOptions{noHealth: true}},
	}
	for _, point := range crashPoints {
		scenarios = append(scenarios, struct {
			name string
			run  func(t *T, env *env)
			opts envOptions
		}{"crash safety: kill -9 at " + point + ", restart, repeat", crashScenario, envOptions{crashAt: point}})
	}
	for _, p := range journalCrashPoints {
		name := "crash safety: kill -9 at " + p.point
		if len(p.args) > 0 {
			name += " (" + strings.Join(p.args, " ") + ")"
		}
		name += ", restart, repeat"
		scenarios = append(scenarios, struct {
			name string
			run  func(t *T, env *env)
			opts envOptions
		}{name, crashScenario, envOptions{crashAt: p.point, serverArgs: p.args, crashInUnprepare: p.inUnprepare}})
	}
	failed := 0
	for _, sc := range scenarios {
		fmt.Fprintf(os.Stderr, "=== %s\n", sc.name)
		t := &T{name: sc.name}
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(failure); !ok {
						t.Errorf("panic: %v", r)
					}
				}
			}()
			e := newEnv(t, *server, sc.opts)
			defer e.cleanup(*keep)
			sc.run(t, e)
		}()
		if len(t.errors) > 0 {
			failed++
			fmt.Fprintf(os.Stderr, "--- FAIL: %s (%d errors)\n", sc.name, len(t.errors))
		} else {
			fmt.Fprintf(os.Stderr, "--- PASS: %s\n", sc.name)
		}
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d of %d scenarios\n", failed, len(scenarios))
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "PASS: %d scenarios\n", len(scenarios))
}

// ---- Environment: directories, the plugin process, the registry watcher ------------------------

// extraServerArgs are appended to every server command line (--server-arg).
var extraServerArgs []string

type envOptions struct {
	crashAt          string
	crashInUnprepare bool     // the crash point is inside unprepare (journal points)
	serverArgs       []string // extra server flags for this scenario (both starts)
	podUID           string
	longRegistry     bool
	noHealth         bool
}

type env struct {
	t           *T
	opts        envOptions
	root        string
	registryDir string
	pluginsDir  string
	dataDir     string
	cdiDir      string
	claimsDir   string
	server      string
	cmd         *exec.Cmd
	exited      chan error
	watcher     *fsnotify.Watcher
	events      chan fsnotify.Event
}

func newEnv(t *T, server string, opts envOptions) *env {
	root, err := os.MkdirTemp("", "devlet-kubelet-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	e := &env{t: t, opts: opts, root: root, exited: make(chan error, 1), events: make(chan fsnotify.Event, 100)}
	e.registryDir = filepath.Join(root, "plugins_registry")
	if opts.longRegistry {
		// Long enough that <driver>-<uid>-reg.sock exceeds 108 bytes, short enough for the hash.
		pad := 108 - len(filepath.Join(root, "r")) - len("/"+driver+"-"+opts.podUID+"-reg.sock") + 2
		e.registryDir = filepath.Join(root, "r"+strings.Repeat("x", pad))
	}
	e.pluginsDir = filepath.Join(root, "plugins")
	e.dataDir = filepath.Join(e.pluginsDir, driver)
	e.cdiDir = filepath.Join(root, "cdi")
	e.claimsDir = filepath.Join(root, "claims")
	for _, dir := range []string{e.registryDir, e.dataDir, e.cdiDir, e.claimsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("mkdir %s: %v", dir, err)
		}
	}
	// Like the kubelet's plugin watcher: fsnotify on the registry directory. The data directory is
	// watched too, to see the order in which sockets go away.
	e.watcher, err = fsnotify.NewWatcher()
	if err != nil {
		t.Fatalf("fsnotify: %v", err)
	}
	for _, dir := range []string{e.registryDir, e.dataDir} {
		if err := e.watcher.Add(dir); err != nil {
			t.Fatalf("watch %s: %v", dir, err)
		}
	}
	go func() {
		for ev := range e.watcher.Events {
			e.events <- ev
		}
	}()

	e.server = server
	e.start(opts.crashAt)
	return e
}

// start runs the plugin (again) on this environment's directories.
func (e *env) start(crashAt string) {
	e.exited = make(chan error, 1)
	args := []string{
		"--driver-name", driver,
		"--node-name", nodeName,
		"--kubelet-registrar-directory-path", e.registryDir,
		"--kubelet-plugins-directory-path", e.pluginsDir,
		"--cdi-root", e.cdiDir,
		"--claims-dir", e.claimsDir,
		"--devices", "4",
		"--enable-device-metadata=true",
		"--health-resend-interval-ms", "500",
		"-v", "2",
	}
	if e.opts.noHealth {
		args = append(args, "--health=false")
	}
	args = append(args, extraServerArgs...)
	args = append(args, e.opts.serverArgs...)
	if crashAt != "" {
		args = append(args, "--crash-at="+crashAt)
	}
	e.cmd = exec.Command(e.server, args...)
	e.cmd.Stdout = os.Stderr
	e.cmd.Stderr = os.Stderr
	e.cmd.Env = os.Environ()
	if e.opts.podUID != "" {
		e.cmd.Env = append(e.cmd.Env, "POD_UID="+e.opts.podUID)
	}
	if err := e.cmd.Start(); err != nil {
		e.t.Fatalf("starting %s: %v", e.server, err)
	}
	cmd := e.cmd
	exited := e.exited
	go func() { exited <- cmd.Wait() }()
}

func (e *env) cleanup(keep bool) {
	if e.cmd != nil && e.cmd.ProcessState == nil {
		_ = e.cmd.Process.Kill()
		select {
		case <-e.exited:
		case <-time.After(5 * time.Second):
		}
	}
	if e.watcher != nil {
		_ = e.watcher.Close()
	}
	if keep {
		fmt.Fprintf(os.Stderr, "    kept %s\n", e.root)
		return
	}
	_ = os.RemoveAll(e.root)
}

// waitForRegistrationSocket waits, like the plugin watcher, for a socket to be created in the
// registry directory (or finds one already there) and returns its path.
func (e *env) waitForRegistrationSocket() string {
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-e.events:
			if ev.Op&fsnotify.Create == 0 || filepath.Dir(ev.Name) != e.registryDir {
				continue
			}
			if strings.HasPrefix(filepath.Base(ev.Name), ".") {
				continue
			}
			fi, err := os.Stat(ev.Name)
			if err != nil || fi.Mode()&os.ModeSocket == 0 {
				continue
			}
			return ev.Name
		case err := <-e.exited:
			e.t.Fatalf("plugin exited before registering: %v", err)
		case <-deadline:
			e.t.Fatalf("no registration socket appeared in %s within 30 s", e.registryDir)
		}
	}
}

// register does what the kubelet's operation generator does for one socket.
func (e *env) register(socket string) *registerapi.PluginInfo {
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatalf("dial %s: %v", socket, err)
	}
	defer conn.Close()
	// Like the kubelet: a blocking dial (10 s), then GetInfo within 1 s.
	dialCtx, dialCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dialCancel()
	conn.Connect()
	for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
		if !conn.WaitForStateChange(dialCtx, state) {
			e.t.Fatalf("dial %s: not ready within 10 s (%v)", socket, state)
		}
	}
	client := registerapi.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // the kubelet's GetInfo timeout
	defer cancel()
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		e.t.Fatalf("GetInfo within 1 s: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := client.NotifyRegistrationStatus(ctx2, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		e.t.Errorf("NotifyRegistrationStatus: %v", err)
	}
	return info
}

// stop sends SIGTERM and returns the base names of removed sockets in the order they went.
func (e *env) stop() []string {
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		e.t.Fatalf("SIGTERM: %v", err)
	}
	var removed []string
	var exitErr error
	exited := false
	deadline := time.After(20 * time.Second)
	for !exited {
		select {
		case ev := <-e.events:
			if ev.Op&fsnotify.Remove != 0 && strings.HasSuffix(ev.Name, ".sock") {
				removed = append(removed, filepath.Base(ev.Name))
			}
		case exitErr = <-e.exited:
			exited = true
		case <-deadline:
			e.t.Fatalf("plugin did not exit within 20 s of SIGTERM")
		}
	}
	// Drain events that raced with the exit.
	for drain := true; drain; {
		select {
		case ev := <-e.events:
			if ev.Op&fsnotify.Remove != 0 && strings.HasSuffix(ev.Name, ".sock") {
				removed = append(removed, filepath.Base(ev.Name))
			}
		case <-time.After(200 * time.Millisecond):
			drain = false
		}
	}
	if exitErr != nil {
		e.t.Errorf("plugin exit after SIGTERM: %v", exitErr)
	}
	return removed
}

func dial(t *T, endpoint string) *grpc.ClientConn {
	conn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", endpoint, err)
	}
	return conn
}

// ---- Claims ------------------------------------------------------------------------------------

func opaque(source resourceapi.AllocationConfigSource, drv string, requests []string, params string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{
		Source:   source,
		Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: drv, Parameters: runtime.RawExtension{Raw: []byte(params)}},
		},
	}
}

func result(request, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: driver, Pool: pool, Device: device}
}

func onNode(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
}

func newClaim(ns, name, uid string, results []resourceapi.DeviceRequestAllocationResult, config []resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Generation: 1},
	}
	if results != nil {
		claim.Status.Allocation = &resourceapi.AllocationResult{
			Devices:      resourceapi.DeviceAllocationResult{Results: results, Config: config},
			NodeSelector: onNode(nodeName),
		}
	}
	return claim
}

func (e *env) writeClaim(claim *resourceapi.ResourceClaim) {
	data, err := json.Marshal(claim)
	if err != nil {
		e.t.Fatalf("marshal claim: %v", err)
	}
	path := filepath.Join(e.claimsDir, claim.Namespace+"_"+claim.Name+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		e.t.Fatalf("write %s: %v", path, err)
	}
}

const (
	uidA        = "0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61"
	uidB        = "1b6d3f1f-4c2e-4b9f-8d7a-2f3e4d5c6b72"
	uidNoAlloc  = "2c7e4a2a-5d3f-4cab-9e8b-3a4f5e6d7c83"
	uidOther    = "3d8f5b3b-6e4a-4dbc-8f9c-4b5a6f7e8d94"
	uidHost     = "4e9a6c4c-7f5b-4ecd-9a0d-5c6b7a8f9ea5"
	uidBadCfg   = "5fab7d5d-8a6c-4fde-8b1e-6d7c8b9a0fb6"
	uidConflict = "60bc8e6e-9b7d-4aef-9c2f-7e8d9cab1ac7"
	uidMissing  = "71cd9f7f-ac8e-4bf0-8d3a-8f9eadbc2bd8"
	shareID     = "82deaf80-bd9f-4c01-9e4b-9afbbecd3ce9"
	classConfig = `{"apiVersion":"devlet.io/v1alpha1","kind":"DeviceConfig","env":{"FROM":"class","MODE":"class"},"bindDriver":"vfio-pci"}`
	claimConfig = `{"apiVersion":"devlet.io/v1alpha1","kind":"DeviceConfig","env":{"MODE":"claim"}}`
)

func (e *env) writeClaims() {
	a := newClaim("default", "gpu-a", uidA, []resourceapi.DeviceRequestAllocationResult{
		result("gpu", "gpu-0"),
		func() resourceapi.DeviceRequestAllocationResult {
			r := result("pair/large", "gpu-1")
			s := types.UID(shareID)
			r.ShareID = &s
			return r
		}(),
		{Request: "nic", Driver: "other.example.com", Pool: pool, Device: "eth0"},
	}, []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClaim, driver, []string{"gpu"}, claimConfig), // claim after class, whatever the order here
		opaque(resourceapi.AllocationConfigSourceClass, driver, nil, classConfig),
		opaque(resourceapi.AllocationConfigSourceClaim, "other.example.com", nil, `{"not":"ours"}`),
	})
	a.Annotations = map[string]string{"resource.kubernetes.io/pod-claim-name": "gpus"}
	e.writeClaim(a)
	e.writeClaim(newClaim("team", "gpu-b", uidB, []resourceapi.DeviceRequestAllocationResult{result("gpu", "gpu-2")}, nil))
	e.writeClaim(newClaim("default", "not-allocated", uidNoAlloc, nil, nil))
	other := newClaim("default", "other-node", uidOther, []resourceapi.DeviceRequestAllocationResult{result("gpu", "gpu-3")}, nil)
	other.Status.Allocation.NodeSelector = onNode("node-2")
	e.writeClaim(other)
	e.writeClaim(newClaim("default", "host-from-claim", uidHost, []resourceapi.DeviceRequestAllocationResult{result("gpu", "gpu-3")},
		[]resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, driver, nil,
			`{"apiVersion":"devlet.io/v1alpha1","kind":"DeviceConfig","bindDriver":"vfio-pci"}`)}))
	e.writeClaim(newClaim("default", "bad-config", uidBadCfg, []resourceapi.DeviceRequestAllocationResult{result("gpu", "gpu-3")},
		[]resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, driver, nil,
			`{"apiVersion":"devlet.io/v1alpha1","kind":"DeviceConfig","envv":{"A":"B"}}`)}))
	e.writeClaim(newClaim("default", "conflict", uidConflict, []resourceapi.DeviceRequestAllocationResult{result("gpu", "gpu-0")}, nil))
}

// ---- Scenarios -----------------------------------------------------------------------------------

func expectedVersions(health bool) []string {
	v := []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}
	if health {
		v = append(v, drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService)
	}
	return v
}

func (e *env) checkInfo(info *registerapi.PluginInfo, wantEndpoint string, health bool) {
	if info.Type != registerapi.DRAPlugin {
		e.t.Errorf("PluginInfo.type = %q, want %q", info.Type, registerapi.DRAPlugin)
	}
	if info.Name != driver {
		e.t.Errorf("PluginInfo.name = %q, want %q", info.Name, driver)
	}
	if info.Endpoint != wantEndpoint {
		e.t.Errorf("PluginInfo.endpoint = %q, want %q", info.Endpoint, wantEndpoint)
	}
	if !reflect.DeepEqual(info.SupportedVersions, expectedVersions(health)) {
		e.t.Errorf("PluginInfo.supported_versions = %q, want %q", info.SupportedVersions, expectedVersions(health))
	}
}

func fullScenario(t *T, e *env) {
	e.writeClaims()
	regSocket := e.waitForRegistrationSocket()
	draSocket := filepath.Join(e.dataDir, "dra.sock")
	if filepath.Base(regSocket) != driver+"-reg.sock" {
		t.Errorf("registration socket %s, want %s-reg.sock", filepath.Base(regSocket), driver)
	}
	if fi, err := os.Stat(draSocket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("DRA socket %s must exist before the registration socket appears: %v", draSocket, err)
	}
	info := e.register(regSocket)
	e.checkInfo(info, draSocket, true)
	// The connection monitor calls GetInfo every 10 s; answer repeatedly and fast.
	for i := 0; i < 3; i++ {
		start := time.Now()
		_ = e.register(regSocket)
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("registration round %d took %v", i, d)
		}
	}

	conn := dial(t, info.Endpoint)
	defer conn.Close()
	v1 := drapbv1.NewDRAPluginClient(conn)
	v1beta1 := drapbv1beta1.NewDRAPluginClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second) // the kubelet's call timeout
	defer cancel()

	claim := func(ns, name, uid string) *drapbv1.Claim { return &drapbv1.Claim{Namespace: ns, Name: name, Uid: uid} }
	prepareReq := &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{
		claim("default", "gpu-a", uidA),
		claim("default", "not-allocated", uidNoAlloc),
		claim("default", "other-node", uidOther),
		claim("default", "host-from-claim", uidHost),
		claim("default", "bad-config", uidBadCfg),
		claim("team", "gpu-b", "99999999-0000-0000-0000-000000000000"), // replaced claim: UID mismatch
		claim("default", "missing", uidMissing),
	}}
	resp, err := v1.NodePrepareResources(ctx, prepareReq)
	if err != nil {
		t.Fatalf("v1 NodePrepareResources: %v", err)
	}
	if len(resp.Claims) != len(prepareReq.Claims) {
		t.Errorf("v1 prepare answered %d claims, want one entry per claim (%d)", len(resp.Claims), len(prepareReq.Claims))
	}
	wantA := []*drapbv1.Device{
		{RequestNames: []string{"gpu"}, PoolName: pool, DeviceName: "gpu-0",
			CdiDeviceIds: []string{"k8s." + driver + "/claim=" + uidA + "-gpu-0", driver + "/metadata=" + uidA + "_gpu"}},
		{RequestNames: []string{"pair"}, PoolName: pool, DeviceName: "gpu-1", ShareId: proto.String(shareID),
			CdiDeviceIds: []string{"k8s." + driver + "/claim=" + uidA + "-gpu-1-" + shareID, driver + "/metadata=" + uidA + "_pair"}},
	}
	gotA := resp.Claims[uidA]
	if gotA == nil || gotA.Error != "" {
		t.Fatalf("claim gpu-a failed: %v", gotA)
	}
	if !proto.Equal(&drapbv1.NodePrepareResourceResponse{Devices: wantA}, gotA) {
		t.Errorf("claim gpu-a devices:\n got  %v\n want %v", gotA, &drapbv1.NodePrepareResourceResponse{Devices: wantA})
	}
	wantErrors := map[string]string{
		uidNoAlloc:                             "is not allocated",
		uidOther:                               "allocated to node node-2",
		uidHost:                                "only a DeviceClass may set",
		uidBadCfg:                              `unknown field "envv"`,
		"99999999-0000-0000-0000-000000000000": "the claim was deleted and re-created",
		uidMissing:                             "not found",
	}
	for uid, want := range wantErrors {
		got := resp.Claims[uid]
		if got == nil || !strings.Contains(got.Error, want) || len(got.Devices) != 0 {
			t.Errorf("claim %s: want an error containing %q, got %v", uid, want, got)
		} else {
			t.Logf("claim %s error (as a person reads it): %s", uid, got.Error)
		}
	}
	e.checkClaimAFiles()

	// Idempotent: the same answer again.
	again, err := v1.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: prepareReq.Claims[:1]})
	if err != nil || !proto.Equal(again.Claims[uidA], gotA) {
		t.Errorf("repeated prepare of gpu-a: %v, %v", again, err)
	}
	// After a reboot /var/run/cdi is empty: a repeated prepare must regenerate the files.
	specA := filepath.Join(e.cdiDir, "k8s."+driver+"-claim_"+uidA+".json")
	metaFile := filepath.Join(e.dataDir, "dra-device-metadata", "default_gpu-a", "gpu", "metadata.json")
	for _, f := range []string{specA, metaFile, filepath.Join(e.cdiDir, driver+"_metadata_"+uidA+"_pair.json")} {
		if err := os.Remove(f); err != nil {
			t.Errorf("remove %s: %v", f, err)
		}
	}
	again, err = v1.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: prepareReq.Claims[:1]})
	if err != nil || !proto.Equal(again.Claims[uidA], gotA) {
		t.Errorf("prepare of gpu-a after losing its files: %v, %v", again, err)
	}
	e.checkClaimAFiles()

	// v1beta1 over the same socket.
	b, err := v1beta1.NodePrepareResources(ctx, &drapbv1beta1.NodePrepareResourcesRequest{Claims: []*drapbv1beta1.Claim{
		{Namespace: "team", Name: "gpu-b", Uid: uidB},
		{Namespace: "default", Name: "conflict", Uid: uidConflict},
	}})
	if err != nil {
		t.Fatalf("v1beta1 NodePrepareResources: %v", err)
	}
	wantB := &drapbv1beta1.NodePrepareResourceResponse{Devices: []*drapbv1beta1.Device{{
		RequestNames: []string{"gpu"}, PoolName: pool, DeviceName: "gpu-2",
		CdiDeviceIds: []string{"k8s." + driver + "/claim=" + uidB + "-gpu-2", driver + "/metadata=" + uidB + "_gpu"},
	}}}
	if !proto.Equal(b.Claims[uidB], wantB) {
		t.Errorf("v1beta1 claim gpu-b:\n got  %v\n want %v", b.Claims[uidB], wantB)
	}
	if c := b.Claims[uidConflict]; c == nil || !strings.Contains(c.Error, "already prepared for ResourceClaim default/gpu-a") {
		t.Errorf("claim conflict (gpu-0 is gpu-a's): want an 'already prepared' error, got %v", c)
	}

	e.checkHealth(conn)

	// Unprepare over v1: a known claim and an unknown one, both succeed; files go away.
	un, err := v1.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{
		claim("default", "gpu-a", uidA), claim("default", "never-prepared", uidMissing),
	}})
	if err != nil {
		t.Fatalf("v1 NodeUnprepareResources: %v", err)
	}
	for _, uid := range []string{uidA, uidMissing} {
		if r, ok := un.Claims[uid]; !ok || r.Error != "" {
			t.Errorf("unprepare %s: want an empty entry, got %v (present %v)", uid, r, ok)
		}
	}
	for _, f := range []string{specA, filepath.Join(e.cdiDir, driver+"_metadata_"+uidA+"_gpu.json"),
		filepath.Join(e.cdiDir, driver+"_metadata_"+uidA+"_pair.json"), filepath.Join(e.dataDir, "dra-device-metadata", "default_gpu-a")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s still exists after unprepare (%v)", f, err)
		}
	}
	// Idempotent, and the claim object is not needed: remove it first.
	_ = os.Remove(filepath.Join(e.claimsDir, "default_gpu-a.json"))
	un, err = v1.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{claim("default", "gpu-a", uidA)}})
	if err != nil || un.Claims[uidA] == nil || un.Claims[uidA].Error != "" {
		t.Errorf("repeated unprepare of gpu-a: %v, %v", un, err)
	}
	// gpu-0 is free again.
	c, err := v1.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{claim("default", "conflict", uidConflict)}})
	if err != nil || c.Claims[uidConflict] == nil || c.Claims[uidConflict].Error != "" || len(c.Claims[uidConflict].Devices) != 1 {
		t.Errorf("prepare of claim conflict once gpu-0 is free: %v, %v", c, err)
	}
	ub, err := v1beta1.NodeUnprepareResources(ctx, &drapbv1beta1.NodeUnprepareResourcesRequest{Claims: []*drapbv1beta1.Claim{
		{Namespace: "team", Name: "gpu-b", Uid: uidB}, {Namespace: "default", Name: "conflict", Uid: uidConflict},
	}})
	if err != nil || len(ub.Claims) != 2 || ub.Claims[uidB].Error != "" || ub.Claims[uidConflict].Error != "" {
		t.Errorf("v1beta1 unprepare: %v, %v", ub, err)
	}
	if left, _ := filepath.Glob(filepath.Join(e.cdiDir, "*")); len(left) != 0 {
		t.Errorf("CDI files left after unpreparing everything: %v", left)
	}

	removed := e.stop()
	wantRemoved := []string{filepath.Base(regSocket), "dra.sock"}
	if !reflect.DeepEqual(removed, wantRemoved) {
		t.Errorf("sockets removed on SIGTERM in order %v, want %v (registration first)", removed, wantRemoved)
	}
}

func (e *env) checkClaimAFiles() {
	t := e.t
	specPath := filepath.Join(e.cdiDir, "k8s."+driver+"-claim_"+uidA+".json")
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Errorf("CDI spec of gpu-a: %v", err)
		return
	}
	var spec struct {
		CDIVersion string `json:"cdiVersion"`
		Kind       string `json:"kind"`
		Devices    []struct {
			Name           string `json:"name"`
			ContainerEdits struct {
				Env []string `json:"env"`
			} `json:"containerEdits"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Errorf("CDI spec of gpu-a does not decode: %v", err)
		return
	}
	if spec.Kind != "k8s."+driver+"/claim" || len(spec.Devices) != 2 {
		t.Errorf("CDI spec of gpu-a: kind %q, %d devices", spec.Kind, len(spec.Devices))
		return
	}
	env0 := strings.Join(spec.Devices[0].ContainerEdits.Env, ",")
	env1 := strings.Join(spec.Devices[1].ContainerEdits.Env, ",")
	// Class config (FROM, MODE=class, bindDriver) applies to both; the claim's MODE=claim only to "gpu".
	for _, want := range []string{"FROM=class", "MODE=claim", "DEVLET_DEVICE_GPU_0_DRIVER=vfio-pci"} {
		if !strings.Contains(env0, want) {
			t.Errorf("gpu-0 env %q lacks %q", env0, want)
		}
	}
	for _, want := range []string{"FROM=class", "MODE=class"} {
		if !strings.Contains(env1, want) {
			t.Errorf("gpu-1 env %q lacks %q", env1, want)
		}
	}

	// Device metadata (KEP-5304), decoded by the upstream reader.
	for _, req := range []struct{ base, full, device string }{{"gpu", "gpu", "gpu-0"}, {"pair", "pair/large", "gpu-1"}} {
		path := filepath.Join(e.dataDir, "dra-device-metadata", "default_gpu-a", req.base, "metadata.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("metadata file: %v", err)
			continue
		}
		var dm metadata.DeviceMetadata
		var validation error
		var gvk schema.GroupVersionKind
		if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(bytes.NewReader(raw)), &dm,
			devicemetadata.DecodeMetadataWithValidationResult(&validation), devicemetadata.DecodeMetadataStoreGVKResult(&gvk)); err != nil {
			t.Errorf("metadata %s does not decode: %v", path, err)
			continue
		}
		if validation != nil {
			t.Errorf("metadata %s does not validate: %v", path, validation)
		}
		if gvk.Version != "v1beta1" {
			t.Errorf("metadata %s: first decodable object is %v, want v1beta1 (newest first)", path, gvk)
		}
		if dm.Name != "gpu-a" || dm.Namespace != "default" || string(dm.UID) != uidA || dm.Generation != 1 ||
			dm.PodClaimName == nil || *dm.PodClaimName != "gpus" || len(dm.Requests) != 1 ||
			dm.Requests[0].Name != req.full || len(dm.Requests[0].Devices) != 1 {
			t.Errorf("metadata %s: unexpected content %+v", path, dm)
			continue
		}
		dev := dm.Requests[0].Devices[0]
		bus := dev.Attributes["resource.kubernetes.io/pciBusID"]
		if dev.Driver != driver || dev.Pool != pool || dev.Name != req.device || bus.StringValue == nil {
			t.Errorf("metadata %s: device %+v", path, dev)
		}
		// The CDI spec that mounts it.
		cdiPath := filepath.Join(e.cdiDir, driver+"_metadata_"+uidA+"_"+req.base+".json")
		raw, err = os.ReadFile(cdiPath)
		if err != nil {
			t.Errorf("metadata CDI spec: %v", err)
			continue
		}
		var mspec struct {
			CDIVersion string `json:"cdiVersion"`
			Kind       string `json:"kind"`
			Devices    []struct {
				Name           string `json:"name"`
				ContainerEdits struct {
					Mounts []struct {
						HostPath      string   `json:"hostPath"`
						ContainerPath string   `json:"containerPath"`
						Options       []string `json:"options"`
					} `json:"mounts"`
				} `json:"containerEdits"`
			} `json:"devices"`
		}
		if err := json.Unmarshal(raw, &mspec); err != nil || len(mspec.Devices) != 1 || len(mspec.Devices[0].ContainerEdits.Mounts) != 1 {
			t.Errorf("metadata CDI spec %s: %v %s", cdiPath, err, raw)
			continue
		}
		m := mspec.Devices[0].ContainerEdits.Mounts[0]
		wantContainer := metadata.ResourceClaimTemplateFilePath(driver, "gpus", req.base)
		if mspec.CDIVersion != "0.5.0" || mspec.Kind != driver+"/metadata" || mspec.Devices[0].Name != uidA+"_"+req.base ||
			m.HostPath != path || m.ContainerPath != wantContainer || !reflect.DeepEqual(m.Options, []string{"ro", "bind"}) {
			t.Errorf("metadata CDI spec %s: %s (want container path %s)", cdiPath, raw, wantContainer)
		}
	}
}

func (e *env) checkHealth(conn *grpc.ClientConn) {
	t := e.t
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s1, err := drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatalf("v1 NodeWatchResources: %v", err)
	}
	first, err := s1.Recv()
	if err != nil {
		t.Fatalf("v1 health: first snapshot: %v", err)
	}
	var names []string
	for _, d := range first.Devices {
		names = append(names, d.GetDevice().GetPoolName()+"/"+d.GetDevice().GetDeviceName())
		if d.Health != drahealthv1.HealthStatus_HEALTHY || d.LastUpdatedTime == 0 {
			t.Errorf("v1 health: device %v, want HEALTHY with a timestamp", d)
		}
	}
	sort.Strings(names)
	if want := []string{pool + "/gpu-0", pool + "/gpu-1", pool + "/gpu-2", pool + "/gpu-3"}; !reflect.DeepEqual(names, want) {
		t.Errorf("v1 health snapshot devices %v, want %v", names, want)
	}
	// Periodic re-send (the server is told 500 ms).
	start := time.Now()
	if _, err := s1.Recv(); err != nil || time.Since(start) > 3*time.Second {
		t.Errorf("v1 health: no re-send within 3 s (%v, %v)", err, time.Since(start))
	}
	// A change is pushed: SIGUSR1 makes gpu-0 unhealthy.
	s2, err := drahealthv1alpha1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1alpha1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatalf("v1alpha1 NodeWatchResources: %v", err)
	}
	if _, err := s2.Recv(); err != nil {
		t.Fatalf("v1alpha1 health: first snapshot: %v", err)
	}
	if err := e.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatalf("SIGUSR1: %v", err)
	}
	sawV1, sawAlpha := false, false
	for i := 0; i < 20 && !sawV1; i++ {
		msg, err := s1.Recv()
		if err != nil {
			t.Fatalf("v1 health: %v", err)
		}
		for _, d := range msg.Devices {
			if d.GetDevice().GetDeviceName() == "gpu-0" && d.Health == drahealthv1.HealthStatus_UNHEALTHY && strings.Contains(d.Message, "XID 79") {
				sawV1 = true
			}
		}
	}
	for i := 0; i < 20 && !sawAlpha; i++ {
		msg, err := s2.Recv()
		if err != nil {
			t.Fatalf("v1alpha1 health: %v", err)
		}
		for _, d := range msg.Devices {
			if d.GetDevice().GetDeviceName() == "gpu-0" && d.Health == drahealthv1alpha1.HealthStatus_UNHEALTHY {
				sawAlpha = true
			}
		}
	}
	if !sawV1 || !sawAlpha {
		t.Errorf("gpu-0 UNHEALTHY not seen on v1 (%v) / v1alpha1 (%v)", sawV1, sawAlpha)
	}
	_ = e.cmd.Process.Signal(syscall.SIGUSR2)
}

// rollingSocketName is an independent Go rendering of the naming rule of
// k8s.io/dynamic-resource-allocation/kubeletplugin.RollingUpdateRegistrarSocketFile.
func rollingSocketName(registryDir, podUID string) string {
	uidHash := sha256.Sum256([]byte(podUID))
	driverUIDHash := sha256.Sum256([]byte(driver + "\x00" + podUID))
	for _, name := range []string{
		driver + "-" + podUID + "-reg.sock",
		driver + "-" + base64.RawURLEncoding.EncodeToString(uidHash[:8]) + "-reg.sock",
		"dra-" + base64.RawURLEncoding.EncodeToString(driverUIDHash[:16]) + "-reg.sock",
	} {
		// Upstream allows 108 bytes; gRPC's C core cannot bind a path longer than 107 (it keeps
		// room for the NUL), so devlet picks the next name at exactly 108. See plugin.h.
		if len(filepath.Join(registryDir, name)) <= 107 {
			return name
		}
	}
	return ""
}

func rollingScenario(t *T, e *env) {
	e.writeClaims()
	regSocket := e.waitForRegistrationSocket()
	want := rollingSocketName(e.registryDir, e.opts.podUID)
	if filepath.Base(regSocket) != want {
		t.Errorf("registration socket %s, want %s", filepath.Base(regSocket), want)
	}
	if e.opts.longRegistry && strings.Contains(filepath.Base(regSocket), e.opts.podUID) {
		t.Errorf("registration socket path %s (%d bytes) should have used the hashed name", regSocket, len(regSocket))
	}
	draSocket := filepath.Join(e.dataDir, "dra-"+e.opts.podUID+".sock")
	info := e.register(regSocket)
	e.checkInfo(info, draSocket, true)
	conn := dial(t, info.Endpoint)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	resp, err := drapbv1.NewDRAPluginClient(conn).NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{
		Claims: []*drapbv1.Claim{{Namespace: "team", Name: "gpu-b", Uid: uidB}}})
	if err != nil || resp.Claims[uidB] == nil || resp.Claims[uidB].Error != "" {
		t.Errorf("prepare with rolling update: %v, %v", resp, err)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "serialize.lock")); err != nil {
		t.Errorf("rolling update must serialize through %s/serialize.lock: %v", e.dataDir, err)
	}
	un, err := drapbv1.NewDRAPluginClient(conn).NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{
		Claims: []*drapbv1.Claim{{Namespace: "team", Name: "gpu-b", Uid: uidB}}})
	if err != nil || un.Claims[uidB] == nil || un.Claims[uidB].Error != "" {
		t.Errorf("unprepare with rolling update: %v, %v", un, err)
	}
	removed := e.stop()
	if wantRemoved := []string{filepath.Base(regSocket), filepath.Base(draSocket)}; !reflect.DeepEqual(removed, wantRemoved) {
		t.Errorf("sockets removed on SIGTERM in order %v, want %v", removed, wantRemoved)
	}
}

func healthDisabledScenario(t *T, e *env) {
	regSocket := e.waitForRegistrationSocket()
	info := e.register(regSocket)
	e.checkInfo(info, filepath.Join(e.dataDir, "dra.sock"), false)
	conn := dial(t, info.Endpoint)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("health stream with health off: want Unimplemented, got %v", err)
	}
	e.stop()
}

// ---- Crash safety: kill -9 inside prepare and unprepare, restart, repeat the kubelet's call ------

// crashPoints are the injected SIGKILL points (see dra_kubelet_test_server --crash-at). Claim
// gpu-a has two devices and two requests, so prepare does 2 backend calls, writes 2 metadata
// files and 3 CDI specs (claim + 2 metadata), and records 2 checkpoint entries.
var crashPoints = []string{
	"checkpoint.put:1",       // before PrepareStarted
	"checkpoint.put:1:after", // PrepareStarted recorded, nothing done
	"backend.prepare:2",      // one device prepared
	"cdi.write:1",            // devices prepared and metadata files written, no CDI spec
	"cdi.write:2:after",      // two of three CDI specs written
	"checkpoint.put:2",       // everything written, PrepareCompleted not recorded
	"checkpoint.put:2:after", // PrepareCompleted recorded, the kubelet got no answer
	"backend.unprepare:1",    // unprepare: nothing released yet
	"backend.unprepare:2",    // one device released
	"cdi.remove:2",           // devices released, one CDI spec removed
	"checkpoint.delete:1",    // files removed, checkpoint entry still there
	"checkpoint.delete:1:after",
}

// journalCrashPoints are inside the state/ checkpoint's own writes: a torn
// journal record (half written, then SIGKILL: what a power loss mid-write leaves), and, with a
// compaction after every change (--compact-after-bytes=1), the snapshot replaced but the journal
// not yet cleared, or its clearing torn. Journal records: 1 PrepareStarted, 2 PrepareCompleted,
// 3 unprepare's removal; snapshot renames: 1 at start-up, then one per record.
var journalCrashPoints = []struct {
	point       string
	args        []string
	inUnprepare bool
}{
	{"journal.write:1:torn", nil, false},                                    // PrepareStarted torn: as if never recorded
	{"journal.write:2:torn", nil, false},                                    // PrepareCompleted torn: PrepareStarted stays
	{"journal.write:3:torn", nil, true},                                     // the removal torn: the claim stays prepared
	{"journal.write:2", nil, false},                                         // PrepareCompleted not written at all
	{"snapshot.rename:2:after", []string{"--compact-after-bytes=1"}, false}, // PrepareStarted in snapshot and journal
	{"journal.clear:2:torn", []string{"--compact-after-bytes=1"}, false},    // PrepareCompleted compacted, clearing torn
	{"snapshot.rename:4:after", []string{"--compact-after-bytes=1"}, true},  // removal compacted, journal not cleared
}

func crashScenario(t *T, e *env) {
	e.writeClaims()
	inUnprepare := e.opts.crashInUnprepare || strings.HasPrefix(e.opts.crashAt, "backend.unprepare") ||
		strings.HasPrefix(e.opts.crashAt, "cdi.remove") || strings.HasPrefix(e.opts.crashAt, "checkpoint.delete")
	claimA := &drapbv1.Claim{Namespace: "default", Name: "gpu-a", Uid: uidA}
	connect := func() (drapbv1.DRAPluginClient, func()) {
		info := e.register(e.waitForRegistrationSocket())
		conn := dial(t, info.Endpoint)
		return drapbv1.NewDRAPluginClient(conn), func() { conn.Close() }
	}
	call := func(client drapbv1.DRAPluginClient, prepare bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		if prepare {
			resp, err := client.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{claimA}})
			if err == nil && (resp.Claims[uidA] == nil || resp.Claims[uidA].Error != "" || len(resp.Claims[uidA].Devices) != 2) {
				return fmt.Errorf("prepare answered %v", resp.Claims[uidA])
			}
			return err
		}
		resp, err := client.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{claimA}})
		if err == nil && (resp.Claims[uidA] == nil || resp.Claims[uidA].Error != "") {
			return fmt.Errorf("unprepare answered %v", resp.Claims[uidA])
		}
		return err
	}
	waitKilled := func() {
		select {
		case err := <-e.exited:
			if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("plugin should have been killed by the injected SIGKILL, got %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the crash point %s was not reached", e.opts.crashAt)
		}
	}

	client, closeConn := connect()
	if inUnprepare {
		if err := call(client, true); err != nil {
			t.Fatalf("prepare before the unprepare crash: %v", err)
		}
	}
	if err := call(client, !inUnprepare); err == nil {
		t.Errorf("the call that crashed the plugin returned success")
	}
	closeConn()
	waitKilled()

	// Restart like a DaemonSet would (stale sockets are left behind by kill -9), then the kubelet
	// repeats its call.
	e.start("")
	client, closeConn = connect()
	defer closeConn()
	if !inUnprepare {
		if err := call(client, true); err != nil {
			t.Fatalf("prepare after restart: %v", err)
		}
		e.checkPreparedA()
		if err := call(client, true); err != nil {
			t.Errorf("second prepare after restart: %v", err)
		}
	}
	if err := call(client, false); err != nil {
		t.Fatalf("unprepare after restart: %v", err)
	}
	e.checkClean()
	e.stop()
}

// checkpointClaims returns data.claims of the checkpoint file
// with the state/ journal's records replayed over it (format: state/include/devlet/state/journal.h).
func (e *env) checkpointClaims() map[string]map[string]any {
	raw, err := os.ReadFile(filepath.Join(e.dataDir, "checkpoint.json"))
	if err != nil {
		e.t.Errorf("checkpoint: %v", err)
		return nil
	}
	var doc struct {
		Data struct {
			Claims     map[string]map[string]any `json:"claims"`
			JournalSeq uint64                    `json:"journalSeq"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		e.t.Errorf("checkpoint does not decode: %v", err)
	}
	claims := doc.Data.Claims
	if claims == nil {
		claims = map[string]map[string]any{}
	}
	journal, err := os.ReadFile(filepath.Join(e.dataDir, "checkpoint.journal"))
	if err == nil {
		if err := replayJournal(journal, doc.Data.JournalSeq, claims); err != nil {
			e.t.Errorf("checkpoint journal: %v", err)
		}
	} else if !os.IsNotExist(err) {
		e.t.Errorf("checkpoint journal: %v", err)
	}
	return claims
}

// replayJournal applies the journal's records after sequence number base to claims. Records are
// 4096-aligned: u32 magic "DVJ1", u32 payload length, u64 sequence number, u32 CRC-32 of bytes
// 4..16 and the payload, u32 zero, then {"put":{uid:claim},"delete":[uid]}. Zeros or an
// unreadable record end it (an unreadable last record is a torn write the plugin drops too).
func replayJournal(journal []byte, base uint64, claims map[string]map[string]any) error {
	const header, align, magic = 24, 4096, 0x314a5644
	last := base
	for off := 0; off+header <= len(journal); {
		h := journal[off : off+header]
		if bytes.Count(h, []byte{0}) == header {
			break
		}
		n := int(binary.LittleEndian.Uint32(h[4:8]))
		if binary.LittleEndian.Uint32(h[0:4]) != magic || off+header+n > len(journal) {
			break
		}
		payload := journal[off+header : off+header+n]
		if crc32.ChecksumIEEE(append(append([]byte{}, h[4:16]...), payload...)) != binary.LittleEndian.Uint32(h[16:20]) {
			break
		}
		seq := binary.LittleEndian.Uint64(h[8:16])
		off = (off + header + n + align - 1) / align * align
		if seq <= base {
			continue // folded into the snapshot already
		}
		if seq != last+1 {
			return fmt.Errorf("record %d where %d was expected", seq, last+1)
		}
		var change struct {
			Put    map[string]map[string]any `json:"put"`
			Delete []string                  `json:"delete"`
		}
		if err := json.Unmarshal(payload, &change); err != nil {
			return fmt.Errorf("record %d: %v", seq, err)
		}
		for uid, claim := range change.Put {
			claims[uid] = claim
		}
		for _, uid := range change.Delete {
			delete(claims, uid)
		}
		last = seq
	}
	return nil
}

func (e *env) checkPreparedA() {
	for _, f := range []string{
		filepath.Join(e.cdiDir, "k8s."+driver+"-claim_"+uidA+".json"),
		filepath.Join(e.cdiDir, driver+"_metadata_"+uidA+"_gpu.json"),
		filepath.Join(e.cdiDir, driver+"_metadata_"+uidA+"_pair.json"),
		filepath.Join(e.dataDir, "dra-device-metadata", "default_gpu-a", "gpu", "metadata.json"),
		filepath.Join(e.dataDir, "dra-device-metadata", "default_gpu-a", "pair", "metadata.json"),
	} {
		if _, err := os.Stat(f); err != nil {
			e.t.Errorf("missing after convergence: %v", err)
		}
	}
	claims := e.checkpointClaims()
	if len(claims) != 1 || claims[uidA] == nil || claims[uidA]["state"] != "PrepareCompleted" {
		e.t.Errorf("checkpoint after convergence: %v", claims)
	}
	e.checkNoTempFiles()
}

func (e *env) checkClean() {
	if left, _ := os.ReadDir(e.cdiDir); len(left) != 0 {
		var names []string
		for _, l := range left {
			names = append(names, l.Name())
		}
		e.t.Errorf("CDI files leaked: %v", names)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "dra-device-metadata", "default_gpu-a")); !os.IsNotExist(err) {
		e.t.Errorf("metadata directory leaked (%v)", err)
	}
	if claims := e.checkpointClaims(); len(claims) != 0 {
		e.t.Errorf("checkpoint still holds claims: %v", claims)
	}
	e.checkNoTempFiles()
}

func (e *env) checkNoTempFiles() {
	for _, dir := range []string{e.cdiDir, e.dataDir} {
		entries, _ := os.ReadDir(dir)
		for _, entry := range entries {
			if strings.Contains(entry.Name(), ".tmp") {
				e.t.Errorf("temp file left in %s: %s", dir, entry.Name())
			}
		}
	}
}
