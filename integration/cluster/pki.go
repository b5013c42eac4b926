package main

// Certificates and kubeconfigs of the single-node cluster: one CA signs the API server's serving
// certificate, the kubelet's, and a client certificate per component, each with the identity
// Kubernetes' Node and RBAC authorizers expect of it (system:node:<name> in system:nodes,
// system:kube-controller-manager, system:kube-scheduler, an admin in system:masters).

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

type certAuthority struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte
	serial int64
}

func newCA() *certAuthority {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err, "CA key")
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "devlet-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(48 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(err, "CA certificate")
	cert, _ := x509.ParseCertificate(der)
	return &certAuthority{cert: cert, key: key, serial: 1,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes <dir>/<name>.crt and .key: a client certificate for subject, or a serving one
// for the given IPs and DNS names when any are given.
func (ca *certAuthority) issue(dir, name string, subject pkix.Name, ips []string, dns []string) (string, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err, "key")
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if len(ips)+len(dns) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	must(err, "certificate "+name)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	crt, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	writeFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return crt, keyFile
}

// kubeconfig writes <dir>/<name>.kubeconfig for a client certificate (inline).
func (ca *certAuthority) kubeconfig(dir, name, server string, subject pkix.Name) string {
	crt, key := ca.issue(dir, name, subject, nil, nil)
	crtPEM, _ := os.ReadFile(crt)
	keyPEM, _ := os.ReadFile(key)
	b64 := base64.StdEncoding.EncodeToString
	path := filepath.Join(dir, name+".kubeconfig")
	writeFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: devlet
clusters:
- name: devlet
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: devlet
  context:
    cluster: devlet
    user: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
`, server, b64(ca.pem), name, name, b64(crtPEM), b64(keyPEM))), 0o600)
	return path
}

// serviceAccountKey writes the RSA key that signs and verifies service-account tokens.
func serviceAccountKey(path string) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	must(err, "service-account key")
	writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY",
		Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}
