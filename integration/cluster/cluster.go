package main

// The single-node cluster: etcd (embedded in the driver), kube-apiserver, kube-controller-manager,
// kube-scheduler and the kubelet (this binary re-executed per component), containerd with NRI and
// CDI on. Everything lives in one work directory; what the kubelet touches outside it is recorded
// in host.go and put back by teardown.

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	nodeName   = "sim-node-1"
	pauseImage = "docker.io/devlet/pause:test"
	boxImage   = "docker.io/devlet/busybox:test"
)

type cluster struct {
	dir, self, bin, runc, snapshotter string
	cgroupRoot                        string // the kubelet's cgroupRoot, below every v1 controller
	ca                                *certAuthority
	server                            string
	adminKubeconfig                   string
	schedulerKubeconfig               string // kube-scheduler's identity (scenario 6 reuses it)
	etcd                              *embed.Etcd
	apiserver, kcm, scheduler         *child
	containerd, kubelet               *child
	kubeletPort, apiPort              int
	client                            *kubernetes.Clientset
	host                              *hostState
	devlet                            *devlet
}

func (c *cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.dir}, parts...)...)
}

func (c *cluster) sock() string { return c.path("containerd", "containerd.sock") }

// freePort returns a loopback port nothing listens on, at random below the ephemeral range (a
// kernel-chosen port can be taken again by a parallel test before our child binds it).
func freePort() int {
	for try := 0; try < 100; try++ {
		port := 20000 + mrand.IntN(12000)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			l.Close()
			return port
		}
	}
	fatalf("no free port")
	return 0
}

// ---- etcd + control plane ------------------------------------------------------------------------

func (c *cluster) startEtcd() {
	for try := 1; ; try++ {
		clientURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort())}
		peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort())}
		cfg := embed.NewConfig()
		cfg.Name = "devlet-cluster"
		cfg.Dir = c.path("etcd")
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		// Its own errors come back from StartEtcd; at Close it logs its closed listeners as errors.
		cfg.LogLevel = "fatal"
		e, err := embed.StartEtcd(cfg)
		if err == nil {
			c.etcd = e
			break
		}
		if try == 5 {
			fatalf("etcd: %v", err)
		}
		logf("etcd: %v; trying other ports", err)
		os.RemoveAll(cfg.Dir)
	}
	select {
	case <-c.etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fatalf("etcd not ready in 60s")
	}
}

func (c *cluster) startControlPlane() {
	pki := c.path("pki")
	os.MkdirAll(pki, 0o700)
	c.ca = newCA()
	writeFile(filepath.Join(pki, "ca.crt"), c.ca.pem, 0o644)
	serving, servingKey := c.ca.issue(pki, "apiserver", pkix.Name{CommonName: "kube-apiserver"},
		[]string{"127.0.0.1", "10.0.0.1"},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	kubeletClient, kubeletClientKey := c.ca.issue(pki, "apiserver-kubelet-client",
		pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		nil, nil)
	serviceAccountKey(filepath.Join(pki, "sa.key"))

	port := freePort()
	c.apiPort = port
	c.server = "https://127.0.0.1:" + strconv.Itoa(port)
	c.adminKubeconfig = c.ca.kubeconfig(pki, "admin", c.server,
		pkix.Name{CommonName: "devlet-admin", Organization: []string{"system:masters"}})
	c.apiserver = &child{name: "kube-apiserver", log: c.path("logs", "kube-apiserver.log"),
		args: []string{c.self, "apiserver",
			"--etcd-servers=http://" + c.etcd.Clients[0].Addr().String(),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			// A loopback advertise address is refused by the endpoint reconciler; no Service
			// network exists here (devlet reaches the API server directly).
			"--endpoint-reconciler-type=none",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + c.path("apiserver-certs"),
			"--tls-cert-file=" + serving, "--tls-private-key-file=" + servingKey,
			"--client-ca-file=" + filepath.Join(pki, "ca.crt"),
			"--kubelet-client-certificate=" + kubeletClient,
			"--kubelet-client-key=" + kubeletClientKey,
			"--kubelet-preferred-address-types=InternalIP",
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + filepath.Join(pki, "sa.key"),
			"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
			"--service-cluster-ip-range=10.0.0.0/24",
			"--feature-gates=" + k8sFeatureGates,
			"--v=1"}}
	c.apiserver.start()

	cfg, err := clientcmd.BuildConfigFromFlags("", c.adminKubeconfig)
	must(err, "admin kubeconfig")
	cfg.QPS, cfg.Burst = 50, 100
	c.client, err = kubernetes.NewForConfig(cfg)
	must(err, "client")
	waitFor("kube-apiserver /readyz", 180*time.Second, func() (bool, string) {
		if !c.apiserver.running() {
			fatalf("kube-apiserver exited\n%s", c.apiserver.tail(4000))
		}
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil, fmt.Sprintf("%v %s", err, body)
	})

	kcmConfig := c.ca.kubeconfig(pki, "controller-manager", c.server,
		pkix.Name{CommonName: "system:kube-controller-manager"})
	c.kcm = &child{name: "kube-controller-manager", log: c.path("logs", "kube-controller-manager.log"),
		args: []string{c.self, "controller-manager",
			"--kubeconfig=" + kcmConfig,
			"--leader-elect=false",
			// No serving port: nothing here scrapes it.
			"--secure-port=0",
			"--root-ca-file=" + filepath.Join(pki, "ca.crt"),
			"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"),
			// Each controller with its own service account's token and RBAC role, as kubeadm runs it.
			"--use-service-account-credentials=true",
			"--controllers=" + strings.Join([]string{
				"serviceaccount-controller", "serviceaccount-token-controller",
				"root-ca-certificate-publisher-controller", "daemonset-controller",
				// devlet-extender's Deployment (scenario 6).
				"deployment-controller", "replicaset-controller",
				"resourceclaim-controller", "device-taint-eviction-controller",
				// Lifts the not-ready taint the kubelet registers the Node with.
				"node-lifecycle-controller",
				"garbage-collector-controller", "namespace-controller",
			}, ","),
			"--v=1"}}
	c.kcm.start()

	schedConfig := c.path("scheduler-config.yaml")
	c.schedulerKubeconfig = c.ca.kubeconfig(pki, "scheduler", c.server,
		pkix.Name{CommonName: "system:kube-scheduler"})
	writeFile(schedConfig, []byte("apiVersion: kubescheduler.config.k8s.io/v1\n"+
		"kind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: "+
		c.schedulerKubeconfig+"\nleaderElection:\n  leaderElect: false\n"), 0o644)
	c.startScheduler(schedConfig)

	// The service-account controller makes "default" in each namespace; pods wait for it.
	waitFor("ServiceAccount default/default", 120*time.Second, func() (bool, string) {
		if !c.kcm.running() {
			fatalf("kube-controller-manager exited\n%s", c.kcm.tail(4000))
		}
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default",
			metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// ---- containerd -----------------------------------------------------------------------------------

// containerdConfig: root/state/sockets below the work dir, CRI with runc (cgroupfs), the pinned
// sandbox image, CDI from the dir devlet writes, NRI with its socket in the work dir, and a CNI
// config no host-network pod uses (without one containerd reports the pod network not ready and
// the Node stays NotReady).
func (c *cluster) containerdConfig() string {
	d := c.path("containerd")
	for _, sub := range []string{"root", "state", "cdi", "nri-plugins", "nri-conf.d", "opt",
		"cni-bin", "cni-conf"} {
		os.MkdirAll(filepath.Join(d, sub), 0o755)
	}
	writeFile(filepath.Join(d, "cni-conf", "10-devlet-none.conflist"), []byte(`{
  "cniVersion": "1.0.0", "name": "devlet-none",
  "plugins": [{"type": "devlet-no-pod-network"}]
}
`), 0o644)
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %[5]q
  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    socket_path = %[6]q
    plugin_path = %[7]q
    plugin_config_path = %[8]q
    plugin_registration_timeout = "5s"
    plugin_request_timeout = "2s"
    disable_connections = false
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = %[9]q
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[10]q
  [plugins.'io.containerd.cri.v1.runtime']
    # Sandboxes ask for oom_score_adj -998, which needs CAP_SYS_RESOURCE; the test machine may
    # lack it (see integration/containerd).
    restrict_oom_score_adj = true
    enable_cdi = true
    cdi_spec_dirs = [%[11]q]
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[12]q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[13]q]
      conf_dir = %[14]q
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`, filepath.Join(d, "root"), filepath.Join(d, "state"), c.sock(), c.sock()+".ttrpc",
		filepath.Join(d, "opt"), c.nriSocket(), filepath.Join(d, "nri-plugins"),
		filepath.Join(d, "nri-conf.d"), c.snapshotter, pauseImage, c.cdiDir(), c.runc,
		filepath.Join(d, "cni-bin"), filepath.Join(d, "cni-conf"))
	path := filepath.Join(d, "config.toml")
	writeFile(path, []byte(config), 0o644)
	return path
}

func (c *cluster) nriSocket() string { return c.path("containerd", "nri", "nri.sock") }
func (c *cluster) cdiDir() string    { return c.path("containerd", "cdi") }

func (c *cluster) startContainerd() {
	if c.containerd == nil {
		os.MkdirAll(filepath.Dir(c.nriSocket()), 0o755)
		// crictl insists on a config file; this one keeps it off the host's /etc/crictl.yaml.
		writeFile(c.path("crictl.yaml"), []byte(fmt.Sprintf(
			"runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n", c.sock(), c.sock())), 0o644)
		c.containerd = &child{name: "containerd", log: c.path("logs", "containerd.log"),
			args: []string{filepath.Join(c.bin, "containerd"), "--config", c.containerdConfig()},
			env:  []string{"PATH=" + c.bin + ":" + os.Getenv("PATH")}}
	}
	c.containerd.start()
	waitFor("containerd CRI", 60*time.Second, func() (bool, string) {
		if !c.containerd.running() {
			fatalf("containerd exited\n%s", c.containerd.tail(4000))
		}
		_, err := c.crictlErr("version")
		return err == nil, fmt.Sprint(err)
	})
}

// ---- kubelet --------------------------------------------------------------------------------------

func (c *cluster) kubeletConfig() string {
	pki := c.path("pki")
	servingCrt, servingKey := c.ca.issue(pki, "kubelet-serving",
		pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		[]string{"127.0.0.1"}, []string{nodeName, "localhost"})
	c.kubeletPort = freePort()
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only (1.37 refuses it unless told; KEP-5573) and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
failSwapOn: false
# Loopback only.
address: 127.0.0.1
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
tlsCertFile: %[4]s
tlsPrivateKeyFile: %[5]s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %[6]s
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://%[7]s
volumePluginDir: %[8]s
podLogsDir: %[9]s
# A shared test machine: its disk and memory are never this node's own; do not evict or GC.
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The static CPU manager hands every container the shared pool's cpuset (CRI cpuset_cpus), which
# devlet narrows to its devices' NUMA node; it needs a CPU reservation (1 CPU of the pool's
# accounting; reserved CPUs stay in the shared pool). Without a cpuset from the kubelet, devlet
# would set the simulated NUMA node's CPUs, which this machine does not all have.
cpuManagerPolicy: static
# KEP-5517 (scenario 5): CPU and memory DRA allocated size the pod's cgroups.
featureGates:
  DRANodeAllocatableResources: true
kubeReserved:
  cpu: 100m
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
resolvConf: /etc/resolv.conf
`, c.cgroupRoot, c.kubeletPort, freePort(), servingCrt, servingKey, filepath.Join(pki, "ca.crt"),
		c.sock(), c.path("kubelet-volume-plugins"), c.path("pod-logs"))
	path := c.path("kubelet-config.yaml")
	writeFile(path, []byte(config), 0o644)
	return path
}

func (c *cluster) kubeletRoot() string { return c.path("kubelet") }

func (c *cluster) startKubelet() {
	if c.kubelet == nil {
		os.MkdirAll(c.kubeletRoot(), 0o755)
		os.MkdirAll(c.path("pod-logs"), 0o755)
		kubeconfig := c.ca.kubeconfig(c.path("pki"), "kubelet", c.server,
			pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}})
		c.kubelet = &child{name: "kubelet", log: c.path("logs", "kubelet.log"),
			args: []string{c.self, "kubelet", "--config=" + c.kubeletConfig(),
				"--kubeconfig=" + kubeconfig, "--root-dir=" + c.kubeletRoot(),
				"--hostname-override=" + nodeName, "--v=2"}}
	}
	c.kubelet.start()
}

// waitNodeReady waits for the Node's Ready condition and for no NoSchedule/NoExecute taint (the
// kubelet registers it with node.kubernetes.io/not-ready, which the node lifecycle controller
// lifts once Ready).
func (c *cluster) waitNodeReady(timeout time.Duration) {
	waitFor("Node "+nodeName+" Ready", timeout, func() (bool, string) {
		if !c.kubelet.running() {
			fatalf("kubelet exited\n%s", c.kubelet.tail(6000))
		}
		node, err := c.client.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, taint := range node.Spec.Taints {
			if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
				return false, "taint " + taint.ToString()
			}
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, cond.Reason + ": " + cond.Message
			}
		}
		return false, "no Ready condition"
	})
}

// up starts everything and waits for the Node to be Ready.
func (c *cluster) up() {
	phase("control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)", func() {
		c.startEtcd()
		c.startControlPlane()
	})
	phase("containerd + images", func() {
		c.startContainerd()
		archive := c.path("test-images.tar")
		must(writeImageArchive(archive, "/bin/busybox", []imageSpec{
			{name: pauseImage, entrypoint: []string{"/bin/sleep"}, cmd: []string{"2147483647"}},
			{name: boxImage, entrypoint: []string{"/bin/sh"}},
		}), "test images")
		c.ctr("images", "import", "--snapshotter", c.snapshotter, archive)
	})
	phase("kubelet: Node Ready", func() {
		c.host.prepare(c)
		c.startKubelet()
		c.waitNodeReady(180 * time.Second)
	})
}

// ctr runs ctr in containerd's k8s.io namespace.
func (c *cluster) ctr(args ...string) string {
	full := append([]string{"--address", c.sock(), "--namespace", "k8s.io"}, args...)
	out, err := runCmd(filepath.Join(c.bin, "ctr"), nil, full...)
	must(err, "ctr "+strings.Join(args, " "))
	return out
}

func (c *cluster) crictlErr(args ...string) (string, error) {
	full := append([]string{"--runtime-endpoint", "unix://" + c.sock(), "--image-endpoint",
		"unix://" + c.sock(), "--timeout", "60s"}, args...)
	return runCmd(filepath.Join(c.bin, "crictl"), []string{"CRI_CONFIG_FILE=" + c.path("crictl.yaml")},
		full...)
}

func (c *cluster) crictl(args ...string) string {
	out, err := c.crictlErr(args...)
	must(err, "crictl")
	return out
}

// teardown stops everything in order and puts back what the kubelet changed on the host.
func (c *cluster) teardown() {
	if c.kubelet != nil {
		c.kubelet.stop(20 * time.Second)
	}
	if c.devlet != nil {
		c.devlet.stopAll()
	}
	if c.containerd.running() {
		// Every pod the kubelet left: stopped and removed while containerd still runs, so that the
		// shims exit and their mounts go.
		if out, err := c.crictlErr("pods", "-q"); err == nil {
			for _, id := range strings.Fields(out) {
				c.crictlErr("stopp", id)
				c.crictlErr("rmp", "-f", id)
			}
		}
	}
	for _, ch := range []*child{c.containerd, c.scheduler, c.kcm, c.apiserver} {
		if ch != nil {
			ch.stop(5 * time.Second)
		}
	}
	if c.etcd != nil {
		c.etcd.Close()
	}
	if c.host != nil {
		c.host.restore(c)
	}
}

// k8sFeatureGates: the alpha gates the API server, kube-scheduler and the kubelet run with:
// DRANodeAllocatableResources (KEP-5517), for scenario 5; devlet-node's own gate is off until then.
const k8sFeatureGates = "DRANodeAllocatableResources=true"

// startScheduler (re)starts kube-scheduler with a KubeSchedulerConfiguration file.
func (c *cluster) startScheduler(config string) {
	c.scheduler = &child{name: "kube-scheduler", log: c.path("logs", "kube-scheduler.log"),
		args: []string{c.self, "scheduler", "--config=" + config, "--secure-port=0",
			"--feature-gates=" + k8sFeatureGates, "--v=1"}}
	c.scheduler.start()
}
