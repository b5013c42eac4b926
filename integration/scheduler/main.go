// Command scheduler-e2e runs devlet-extender under a real kube-scheduler (k8s.io/kubernetes
// v1.37.2) against a real kube-apiserver on an embedded etcd, all on loopback, and checks where pods
// land and what gets written:
//
//	scheduler-e2e --extender PATH --mode score|allocate [--keep DIR] [--record DIR]
//
// Processes: this one holds etcd (embedded, so it outlives API server restarts) and supervises
// three children: kube-apiserver and kube-scheduler (this binary re-executed with a hidden first
// argument, so the API server can be stopped and started again on the same port and etcd), and
// devlet-extender (--kubeconfig). The scheduler reaches the extender through a recording proxy in
// this process (--record DIR writes every verb's request and reply). Exit status 0 when every
// scenario passed, 1 when one failed, 2 when the setup failed.
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// Hidden first arguments that turn this binary into one of its children.
const (
	runAPIServer = "__kube-apiserver"
	runScheduler = "__kube-scheduler"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scheduler-e2e: "+format+"\n", args...)
	os.Exit(2)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s scheduler-e2e: "+format+"\n",
		append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// freePort returns a port nothing listens on, chosen at random below the kernel's ephemeral range
// (32768 and up), where other tests' outgoing connections cannot take it before our bind.
func freePort() int {
	for try := 0; try < 100; try++ {
		port := 20000 + mrand.IntN(12000)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			l.Close()
			return port
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ---- certificates ------------------------------------------------------------------------------

type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA() *certAuthority {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "devlet-scheduler-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		fail("ca: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &certAuthority{cert: cert, key: key,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serving returns a PEM certificate and key for 127.0.0.1.
func (ca *certAuthority) serving() ([]byte, []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		fail("serving certificate: %v", err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// client returns a PEM client certificate and key with common name `cn`.
func (ca *certAuthority) client(cn string) ([]byte, []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		fail("client certificate: %v", err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// ---- children ----------------------------------------------------------------------------------

// child is a supervised process whose output goes to a log file in the work directory.
type child struct {
	name string
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (c *child) start() {
	f, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fail("%s log: %v", c.name, err)
	}
	c.cmd = exec.Command(c.args[0], c.args[1:]...)
	c.cmd.Stdout = f
	c.cmd.Stderr = f
	// Children die with us even when we are killed (SIGKILL from a ctest timeout).
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		fail("starting %s: %v", c.name, err)
	}
	c.done = make(chan struct{})
	go func() {
		c.cmd.Wait()
		f.Close()
		close(c.done)
	}()
}

// stop sends SIGTERM, then SIGKILL after 15 s.
func (c *child) stop() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	start := time.Now()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		logf("%s stopped %.1fs after SIGTERM", c.name, time.Since(start).Seconds())
	case <-time.After(15 * time.Second):
		logf("%s still running 15s after SIGTERM: killed", c.name)
		c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// tail returns the last n bytes of the child's log.
func (c *child) tail(n int64) string {
	data, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	if int64(len(data)) > n {
		data = data[int64(len(data))-n:]
	}
	return string(data)
}

// ---- recording proxy ---------------------------------------------------------------------------

// recorder forwards the scheduler's extender calls to devlet-extender and, with a directory,
// writes each exchange as <n>-<verb>.json: {"verb", "request", "status", "reply"}.
type recorder struct {
	target string
	client *http.Client // to devlet-extender (with a client certificate under --tls)
	dir    string
	mu     sync.Mutex
	n      int
	counts map[string]int
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := r.client.Post(r.target+req.URL.Path, req.Header.Get("Content-Type"),
		bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	verb := filepath.Base(req.URL.Path)
	r.mu.Lock()
	r.n++
	n := r.n
	r.counts[verb]++
	r.mu.Unlock()
	if r.dir != "" {
		record := map[string]any{"verb": verb, "status": resp.StatusCode,
			"request": json.RawMessage(body)}
		if json.Valid(reply) {
			record["reply"] = json.RawMessage(reply)
		} else {
			record["reply"] = string(reply)
		}
		data, _ := json.MarshalIndent(record, "", "  ")
		os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("%04d-%s.json", n, verb)), data, 0o644)
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	w.Write(reply)
}

func (r *recorder) count(verb string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[verb]
}

// ---- the environment ---------------------------------------------------------------------------

// env is what scenarios use: the API server (restartable), the extender and the scheduler.
type env struct {
	dir        string
	mode       string
	server     string
	kubeconfig string
	token      string
	pool       *x509.CertPool
	apiserver  *child
	scheduler  *child
	extender   *child
	extURL     string
	tls        bool         // devlet-extender on TLS with client certificates (--tls)
	extClient  *http.Client // the verbs (a client certificate under --tls)
	probe      *http.Client // health and readiness (never a client certificate)
	proxy      *recorder
}

func waitHTTP(client *http.Client, url, token string, timeout time.Duration, what string) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			last = fmt.Errorf("HTTP %d", resp.StatusCode)
		} else {
			last = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v (last: %v)", what, timeout, last)
}

func (e *env) waitAPIServer() error {
	client := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.pool}}}
	return waitHTTP(client, e.server+"/readyz", e.token, 180*time.Second, "kube-apiserver")
}

// restartAPIServer stops kube-apiserver and starts it again on the same port and etcd.
func (e *env) restartAPIServer() error {
	logf("stopping kube-apiserver")
	e.apiserver.stop()
	logf("starting kube-apiserver again")
	e.apiserver.start()
	return e.waitAPIServer()
}

// restartExtender stops devlet-extender and starts it again with `extra` flags added; it waits
// until the restarted extender has synced.
func (e *env) restartExtender(extra ...string) error {
	logf("restarting devlet-extender with %v", extra)
	e.extender.stop()
	e.extender.args = append(e.extender.args, extra...)
	e.extender.start()
	return waitHTTP(e.probe, e.extURL+"/readyz", "",
		60*time.Second, "restarted devlet-extender")
}

func (e *env) stopAll() {
	for _, c := range []*child{e.scheduler, e.extender, e.apiserver} {
		if c != nil {
			c.stop()
		}
	}
}

func (e *env) dumpLogs() {
	for _, c := range []*child{e.extender, e.scheduler} {
		if c != nil {
			fmt.Fprintf(os.Stderr, "---- %s (last 6 KiB of %s) ----\n%s\n", c.name, c.log,
				c.tail(6<<10))
		}
	}
}

// schedulerConfig is the KubeSchedulerConfiguration for a mode (see allocator/extender/README.md).
func schedulerConfig(mode, kubeconfig, extenderURL string) string {
	header := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
		"clientConnection:\n  kubeconfig: " + kubeconfig + "\n" +
		"leaderElection:\n  leaderElect: false\n"
	if mode == "intree" {
		return header // the default profile: the in-tree DynamicResources plugin allocates
	}
	if mode == "score" {
		return header + `extenders:
- urlPrefix: "` + extenderURL + `"
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
  nodeCacheCapable: true
  ignorable: true
  httpTimeout: 5s
`
	}
	return header + `profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: DynamicResources
extenders:
- urlPrefix: "` + extenderURL + `"
  filterVerb: filter
  prioritizeVerb: prioritize
  bindVerb: bind
  weight: 5
  nodeCacheCapable: true
  ignorable: false
  httpTimeout: 15s
`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == runAPIServer {
		cmd := apiserverapp.NewAPIServerCommand()
		cmd.SetArgs(os.Args[2:])
		if err := cmd.Execute(); err != nil {
			fmt.Fprintf(os.Stderr, "kube-apiserver: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == runScheduler {
		cmd := schedulerapp.NewSchedulerCommand()
		cmd.SetArgs(os.Args[2:])
		if err := cmd.Execute(); err != nil {
			fmt.Fprintf(os.Stderr, "kube-scheduler: %v\n", err)
			os.Exit(1)
		}
		return
	}

	extenderPath := flag.String("extender", "", "path of the devlet-extender binary")
	mode := flag.String("mode", "allocate", "devlet-extender --mode: score or allocate")
	keep := flag.String("keep", "", "work in this directory and keep it (logs, kubeconfig)")
	record := flag.String("record", "", "write the scheduler's extender requests and replies here")
	only := flag.String("run", "", "run only scenarios whose name contains this")
	useTLS := flag.Bool("tls", false, "serve devlet-extender over TLS with --client-ca-file; "+
		"the scheduler's calls reach it with a client certificate (CN kube-scheduler)")
	throughput := flag.Bool("throughput", false, "run the scheduler_perf DRA workloads with the "+
		"in-tree plugin and with devlet-extender (allocate mode) and compare (see throughput.go)")
	nodes := flag.Int("nodes", 500, "--throughput: nodes, 10 devices each")
	initClaims := flag.Int("init-claims", 2500, "--throughput: claims allocated before the pods")
	pods := flag.Int("pods", 2500, "--throughput: pods created and measured")
	workloads := flag.String("workloads", "template,selector", "--throughput: template, selector")
	sides := flag.String("sides", "intree,extender", "--throughput: intree, extender")
	replicas := flag.Bool("replicas", false, "--throughput: two devlet-extender replicas behind "+
		"one address; the first is killed when a third of the pods are bound")
	minRatio := flag.Float64("min-ratio", 0, "--throughput: fail when the extender's pods/s is "+
		"below this share of the in-tree plugin's")
	timeout := flag.Duration("timeout", 10*time.Minute, "--throughput: limit per run")
	peerCheck := flag.String("peer-check", "auto", "--throughput: devlet-extender "+
		"--check-peer-allocations: on, off, or auto (on with --replicas)")
	flag.Parse()
	if *throughput && *extenderPath != "" {
		self, err := os.Executable()
		if err != nil {
			fail("%v", err)
		}
		os.Exit(runThroughput(self, *extenderPath, *keep, tpOptions{nodes: *nodes,
			initClaims: *initClaims, pods: *pods, workloads: strings.Split(*workloads, ","),
			sides: strings.Split(*sides, ","), replicas: *replicas, minRatio: *minRatio,
			timeout: *timeout, peerCheck: *peerCheck == "on" || (*peerCheck == "auto" && *replicas)}))
	}
	if *extenderPath == "" || (*mode != "score" && *mode != "allocate") {
		fail("usage: scheduler-e2e --extender PATH --mode score|allocate [--keep DIR] [--record DIR]")
	}
	self, err := os.Executable()
	if err != nil {
		fail("%v", err)
	}

	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "devlet-scheduler-")
		if err != nil {
			fail("%v", err)
		}
		dir = d
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("%v", err)
	}
	if *record != "" {
		if err := os.MkdirAll(*record, 0o755); err != nil {
			fail("%v", err)
		}
	}
	e := &env{dir: dir, mode: *mode, tls: *useTLS}
	code := run(e, self, *extenderPath, *record, *only)
	e.stopAll()
	if code != 0 && *keep == "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// writeCredentials writes the test CA, the API server's serving certificate, the service account
// key and the token file into e.dir, sets e.token and e.pool, and returns the CA, the CA file and
// the writer it used (name -> path).
func writeCredentials(e *env) (*certAuthority, string, func(string, []byte) string) {
	dir := e.dir
	ca := newCA()
	servingCert, servingKey := ca.serving()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			fail("%v", err)
		}
		return path
	}
	caFile := write("ca.crt", ca.pem)
	write("serving.crt", servingCert)
	write("serving.key", servingKey)
	saKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY",
		Bytes: x509.MarshalPKCS1PrivateKey(saKey)}))
	e.token = "devlet-scheduler-test-token"
	write("tokens.csv", []byte(e.token+",devlet-admin,devlet-admin-uid,\"system:masters\"\n"))
	e.pool = x509.NewCertPool()
	e.pool.AddCert(ca.cert)
	return ca, caFile, write
}

// apiServerArgs is kube-apiserver's command line (this binary re-executed) on etcd `etcdURL`.
func apiServerArgs(self, etcdURL string, port int, dir, caFile string) []string {
	return []string{self, runAPIServer,
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--tls-cert-file=" + filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
		"--client-ca-file=" + caFile,
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// No node lifecycle controller runs to lift the not-ready taint TaintNodesByCondition adds.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--v=0",
	}
}

// kubeconfigText is a kubeconfig for `server` with the CA and the admin token.
func kubeconfigText(server string, ca *certAuthority, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: test
  context:
    cluster: test
    user: admin
users:
- name: admin
  user:
    token: %s
`, server, base64.StdEncoding.EncodeToString(ca.pem), token)
}

// startEtcd starts the embedded etcd in dir/etcd and returns it with its client URL.
func startEtcd(dir string) (*embed.Etcd, string) {
	clientURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort())}
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort())}
	cfg := embed.NewConfig()
	cfg.Name = "devlet-scheduler-test"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		fail("etcd: %v", err)
	}
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fail("etcd did not become ready in 60s")
	}
	return etcd, clientURL.String()
}

func run(e *env, self, extenderPath, record, only string) int {
	dir := e.dir
	// ---- etcd, embedded (outlives kube-apiserver restarts) ------------------------------------
	etcd, etcdURL := startEtcd(dir)
	defer etcd.Close()
	defer e.stopAll() // before etcd closes (defers run last-in first-out)

	// ---- credentials and kube-apiserver -----------------------------------------------------------
	ca, caFile, write := writeCredentials(e)
	port := freePort()
	e.server = "https://127.0.0.1:" + strconv.Itoa(port)
	e.apiserver = &child{name: "kube-apiserver", log: filepath.Join(dir, "kube-apiserver.log"),
		args: apiServerArgs(self, etcdURL, port, dir, caFile)}
	e.kubeconfig = write("kubeconfig.yaml", []byte(kubeconfigText(e.server, ca, e.token)))

	// ---- devlet-extender, behind the recording proxy ----------------------------------------
	extPort := freePort()
	e.extURL = "http://127.0.0.1:" + strconv.Itoa(extPort)
	e.extClient = &http.Client{}
	e.probe = &http.Client{Timeout: 2 * time.Second}
	extArgs := []string{extenderPath, "--kubeconfig", e.kubeconfig, "--mode", e.mode,
		"--bind-address", "127.0.0.1", "--port", strconv.Itoa(extPort),
		"--url-prefix", "/devlet", "--filter-timeout-ms", "10000"}
	if e.tls {
		clientCert, clientKey := ca.client("kube-scheduler")
		pair, err := tls.X509KeyPair(clientCert, clientKey)
		if err != nil {
			fail("client certificate: %v", err)
		}
		e.extURL = "https://127.0.0.1:" + strconv.Itoa(extPort)
		e.extClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: e.pool, Certificates: []tls.Certificate{pair}}}}
		e.probe = &http.Client{Timeout: 2 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.pool}}}
		extArgs = append(extArgs, "--tls-cert-file", filepath.Join(dir, "serving.crt"),
			"--tls-private-key-file", filepath.Join(dir, "serving.key"),
			"--client-ca-file", caFile, "--allowed-client-names", "kube-scheduler")
	}
	e.extender = &child{name: "devlet-extender", log: filepath.Join(dir, "devlet-extender.log"),
		args: extArgs}
	// The extender starts before the API server: it must serve /healthz at once but report
	// ready only after its first full list, which it retries until the API server answers.
	logf("starting devlet-extender --mode %s on %s (kube-apiserver not up yet)", e.mode, e.extURL)
	e.extender.start()
	probe := e.probe
	if err := waitHTTP(probe, e.extURL+"/healthz", "", 30*time.Second,
		"devlet-extender /healthz"); err != nil {
		e.dumpLogs()
		fail("%v", err)
	}
	time.Sleep(time.Second)
	if resp, err := probe.Get(e.extURL + "/readyz"); err != nil || resp.StatusCode != 503 {
		e.dumpLogs()
		fail("devlet-extender /readyz before any sync: want 503, got %v %v", resp, err)
	} else {
		resp.Body.Close()
		logf("devlet-extender /readyz is 503 while kube-apiserver is down")
	}

	logf("starting kube-apiserver on %s (etcd %s, work dir %s)", e.server, etcdURL, dir)
	e.apiserver.start()
	if err := e.waitAPIServer(); err != nil {
		fmt.Fprintln(os.Stderr, e.apiserver.tail(8<<10))
		fail("%v", err)
	}
	if err := waitHTTP(probe, e.extURL+"/readyz", "", 60*time.Second,
		"devlet-extender"); err != nil {
		e.dumpLogs()
		fail("%v", err)
	}
	logf("devlet-extender is ready (first full sync done)")
	if e.tls {
		// Without a client certificate the verbs are refused (health and readiness answered).
		resp, err := probe.Post(e.extURL+"/devlet/filter", "application/json",
			strings.NewReader("{}"))
		if err != nil || resp.StatusCode != 401 {
			e.dumpLogs()
			fail("devlet-extender filter without a client certificate: want 401, got %v %v",
				resp, err)
		}
		resp.Body.Close()
		logf("devlet-extender over TLS: filter without a client certificate is 401")
	}
	e.proxy = &recorder{target: e.extURL, client: e.extClient, dir: record,
		counts: map[string]int{}}
	proxyListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("proxy: %v", err)
	}
	go http.Serve(proxyListener, e.proxy)
	proxyURL := "http://" + proxyListener.Addr().String() + "/devlet"

	// ---- kube-scheduler -------------------------------------------------------------------------
	schedConfig := write("scheduler-config.yaml",
		[]byte(schedulerConfig(e.mode, e.kubeconfig, proxyURL)))
	e.scheduler = &child{name: "kube-scheduler", log: filepath.Join(dir, "kube-scheduler.log"),
		args: []string{self, runScheduler, "--config=" + schedConfig, "--secure-port=0",
			// Unschedulable pods are retried after at most 10 s even without a cluster event (the
			// racing pod waits for a device freed behind the scheduler's back).
			"--pod-max-in-unschedulable-pods-duration=10s", "--v=2"}}
	logf("starting kube-scheduler (extender at %s)", proxyURL)
	e.scheduler.start()

	// ---- scenarios ------------------------------------------------------------------------------
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	failed := runScenarios(ctx, e, only)
	if e.scheduler.exited() {
		logf("kube-scheduler exited early")
		failed++
	}
	if e.extender.exited() {
		logf("devlet-extender exited early")
		failed++
	}
	logf("extender calls through the scheduler: filter=%d prioritize=%d bind=%d",
		e.proxy.count("filter"), e.proxy.count("prioritize"), e.proxy.count("bind"))
	if failed > 0 {
		e.dumpLogs()
		logf("FAIL: %d scenario(s) failed (mode %s)", failed, e.mode)
		return 1
	}
	logf("PASS (mode %s)", e.mode)
	return 0
}

// contains reports whether s contains sub (for scenario filtering).
func contains(s, sub string) bool { return sub == "" || strings.Contains(s, sub) }
