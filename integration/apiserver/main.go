// Command apiserver-runner starts a real kube-apiserver (k8s.io/kubernetes v1.37.2, run in this
// process through its own cobra command) on an embedded etcd (go.etcd.io/etcd/server/v3), both on
// loopback, writes kubeconfigs for it and runs a test command against it:
//
//	apiserver-runner [--keep DIR] -- /path/to/test [args...]
//
// The command sees:
//
//	DEVLET_TEST_KUBECONFIG        kubeconfig with a bearer token (group system:masters)
//	DEVLET_TEST_KUBECONFIG_CERT   kubeconfig with an inline client certificate (system:masters)
//	DEVLET_TEST_APISERVER         https://127.0.0.1:<port>
//
// The runner exits with the command's exit status. Everything lives in a temporary directory.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// freePort returns a port nothing listens on, chosen at random below the kernel's ephemeral range
// (32768 and up): a port the kernel hands out can be taken again, between our check and etcd's or
// kube-apiserver's bind, by another test's runner or outgoing connection (CI runs these tests in
// parallel).
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

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "apiserver-runner: "+format+"\n", args...)
	os.Exit(2)
}

func writePEM(path, kind string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		fail("%v", err)
	}
}

type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA() *certAuthority {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "devlet-test-ca"},
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

// issue returns PEM certificate and key.
func (ca *certAuthority) issue(serial int64, subject pkix.Name, server bool) ([]byte, []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		fail("issue: %v", err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func main() {
	keep := flag.String("keep", "", "use this directory instead of a temporary one (kept)")
	flag.Parse()
	if flag.NArg() == 0 {
		fail("usage: apiserver-runner [--keep DIR] -- command [args...]")
	}

	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "devlet-apiserver-")
		if err != nil {
			fail("%v", err)
		}
		dir = d
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("%v", err)
	}

	// ---- etcd, embedded -------------------------------------------------------------------------
	// A port can still be taken between freePort and the bind: then again with other ports.
	var etcd *embed.Etcd
	var clientURL url.URL
	for try := 1; ; try++ {
		clientURL = url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort())}
		peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort())}
		cfg := embed.NewConfig()
		cfg.Name = "devlet-test"
		cfg.Dir = filepath.Join(dir, "etcd")
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.LogLevel = "error"
		e, err := embed.StartEtcd(cfg)
		if err == nil {
			etcd = e
			break
		}
		if try == 5 {
			fail("etcd: %v", err)
		}
		fmt.Fprintf(os.Stderr, "apiserver-runner: etcd: %v; trying other ports\n", err)
		os.RemoveAll(cfg.Dir)
	}
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fail("etcd did not become ready in 60s")
	}

	// ---- credentials ------------------------------------------------------------------------------
	ca := newCA()
	servingCert, servingKey := ca.issue(2, pkix.Name{CommonName: "kube-apiserver"}, true)
	clientCert, clientKey := ca.issue(3, pkix.Name{CommonName: "devlet-admin",
		Organization: []string{"system:masters"}}, false)
	writePEM(filepath.Join(dir, "ca.crt"), "CERTIFICATE", ca.cert.Raw)
	os.WriteFile(filepath.Join(dir, "serving.crt"), servingCert, 0o600)
	os.WriteFile(filepath.Join(dir, "serving.key"), servingKey, 0o600)
	saKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	writePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))
	const token = "devlet-test-token"
	os.WriteFile(filepath.Join(dir, "tokens.csv"),
		[]byte(token+",devlet-admin,devlet-admin-uid,\"system:masters\"\n"), 0o600)

	// ---- kube-apiserver, in this process ----------------------------------------------------------
	port := freePort()
	server := "https://127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--etcd-servers=" + clientURL.String(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// A loopback advertise address is refused by the endpoint reconciler; nothing needs it here.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--tls-cert-file=" + filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
		"--client-ca-file=" + filepath.Join(dir, "ca.crt"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// No controller manager runs: pods must not wait for a default ServiceAccount.
		"--disable-admission-plugins=ServiceAccount",
		"--v=0",
	}
	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(args)
	go func() {
		if err := cmd.Execute(); err != nil {
			fail("kube-apiserver: %v", err)
		}
		fail("kube-apiserver exited")
	}()

	// ---- wait for /readyz -------------------------------------------------------------------------
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	httpClient := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if ctx.Err() != nil {
			fail("kube-apiserver not ready after 180s (last: %v)", err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// ---- kubeconfigs ------------------------------------------------------------------------------
	tokenConfig := filepath.Join(dir, "kubeconfig-token.yaml")
	certConfig := filepath.Join(dir, "kubeconfig-cert.yaml")
	cluster := fmt.Sprintf("clusters:\n- name: test\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n",
		server, b64(ca.pem))
	os.WriteFile(tokenConfig, []byte("apiVersion: v1\nkind: Config\ncurrent-context: test\n"+cluster+
		"contexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\n"+
		"users:\n- name: admin\n  user:\n    token: "+token+"\n"), 0o600)
	os.WriteFile(certConfig, []byte("apiVersion: v1\nkind: Config\ncurrent-context: test\n"+cluster+
		"contexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\n"+
		"users:\n- name: admin\n  user:\n    client-certificate-data: "+b64(clientCert)+
		"\n    client-key-data: "+b64(clientKey)+"\n"), 0o600)

	// ---- the test ---------------------------------------------------------------------------------
	test := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	test.Stdout = os.Stdout
	test.Stderr = os.Stderr
	test.Env = append(os.Environ(),
		"DEVLET_TEST_KUBECONFIG="+tokenConfig,
		"DEVLET_TEST_KUBECONFIG_CERT="+certConfig,
		"DEVLET_TEST_APISERVER="+server)
	err := test.Run()
	etcd.Close()
	if err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			if *keep == "" {
				os.RemoveAll(dir)
			}
			os.Exit(exit.ExitCode())
		}
		fail("running %s: %v", flag.Arg(0), err)
	}
}
