package main

// The chart values (packaging/helm/devlet) this cluster installs devlet with: the imported image
// (never pulled), the kubelet's root dir of this cluster, containerd's CDI dir and NRI socket,
// the simulated node's sysfs tree, dev root and topology (mounted at the same paths), the API
// server reached directly (no Service network), host network (no pod network).

import (
	"fmt"
	"strconv"
)

func (d *devlet) values() string {
	c := d.c
	repo, tag := d.image, "latest"
	if i := lastColon(d.image); i > 0 {
		repo, tag = d.image[:i], d.image[i+1:]
	}
	return fmt.Sprintf(`driverName: %[1]s
image:
  repository: %[2]s
  tag: %[3]q
  pullPolicy: Never
logVerbosity: 2
kubeletDir: %[4]s
cdiRoot: %[5]s
stateDir: %[6]s
nri:
  enabled: true
  socketPath: %[7]s
host:
  sysfsRoot: %[8]s
  devRoot: %[9]s
  topologyXml: %[10]s
healthcheck:
  port: %[11]d
apiServer:
  host: "127.0.0.1"
  port: %[12]q
kubeletPlugin:
  hostNetwork: true
deviceClasses:
  gpu:
    extendedResourceName: %[13]q
`, driverName, repo, tag, c.kubeletRoot(), c.cdiDir(), c.path("devlet-state"), c.nriSocket(),
		d.simDir("sys"), d.simDir(), d.simDir("topology.xml"), freePort(), strconv.Itoa(c.apiPort),
		string(gpuExtendedResource))
}

func lastColon(s string) int {
	for i := len(s) - 1; i >= 0 && s[i] != '/'; i-- {
		if s[i] == ':' {
			return i
		}
	}
	return -1
}
