package main

// What the machine must offer (else exit 77 with the reason), and what the kubelet changes on
// the host beyond its root dir, recorded before it starts and put back by teardown: its cgroups
// (below a cgroupRoot of our own in each v1 controller), /var/lib/kubelet/device-plugins (a fixed
// path in the device manager), /var/log/containers (fixed: symlinks to the pod logs), the sysctls
// its container manager sets, and the mounts below the work dir (its root dir's bind mount, pod
// volumes, containerd's rootfs mounts).

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// prerequisites: root, runc, a static busybox (the test images), the cgroup v1 controllers the
// kubelet needs, and a snapshotter that can mount here.
func (c *cluster) prerequisites() {
	if os.Geteuid() != 0 {
		skip("the kubelet, containerd and runc need root (euid %d)", os.Geteuid())
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		skip("runc is not installed (Debian package runc, scripts/install-deps.sh)")
	}
	c.runc = runc
	if out, err := exec.Command("file", "-L", "/bin/busybox").Output(); err != nil ||
		!strings.Contains(string(out), "statically linked") {
		skip("/bin/busybox is missing or not static (Debian package busybox-static): it is the test image")
	}
	for _, b := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "crictl"} {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			fatalf("%s not in %s (integration/containerd/build.sh builds it)", b, c.bin)
		}
	}
	for _, ctl := range []string{"cpuset", "cpu", "memory"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctl, "cgroup.procs")); err != nil {
			if _, err2 := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err2 == nil {
				skip("cgroup v2 only: this harness drives the kubelet on cgroup v1 (cgroupfs)")
			}
			skip("no cgroup v1 %s controller at /sys/fs/cgroup/%s", ctl, ctl)
		}
	}
	probe := c.path("probe")
	for _, d := range []string{"l", "u", "w", "m"} {
		os.MkdirAll(filepath.Join(probe, d), 0o755)
	}
	opts := fmt.Sprintf("lowerdir=%s/l,upperdir=%s/u,workdir=%s/w", probe, probe, probe)
	if err := syscall.Mount("overlay", probe+"/m", "overlay", 0, opts); err == nil {
		syscall.Unmount(probe+"/m", 0)
		c.snapshotter = "overlayfs"
	} else if err := syscall.Mount(probe+"/l", probe+"/m", "", syscall.MS_BIND, ""); err == nil {
		syscall.Unmount(probe+"/m", 0)
		c.snapshotter = "native"
		logf("overlay mount failed (%v): using the native snapshotter", err)
	} else {
		skip("cannot mount here (bind mount: %v): containers cannot run", err)
	}
	os.RemoveAll(probe)
}

var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

type hostState struct {
	sysctls     map[string]string
	madeDirs    []string // host dirs that did not exist before the kubelet (removed afterwards)
	controllers []string // v1 controllers where cgroupRoot was made
}

func cgroupControllers() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", e.Name(), "cgroup.procs")); err == nil &&
			e.Name() != "unified" {
			out = append(out, e.Name())
		}
	}
	return out
}

// prepare records the host's state and makes the kubelet's cgroupRoot (it must exist).
func (h *hostState) prepare(c *cluster) {
	h.sysctls = map[string]string{}
	for _, s := range kubeletSysctls {
		if data, err := os.ReadFile("/proc/sys/" + s); err == nil {
			h.sysctls[s] = strings.TrimSpace(string(data))
		}
	}
	for _, d := range []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods"} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			h.madeDirs = append(h.madeDirs, d)
		}
	}
	for _, ctl := range cgroupControllers() {
		dir := filepath.Join("/sys/fs/cgroup", ctl, c.cgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			fatalf("cgroup %s: %v", dir, err)
		}
		h.controllers = append(h.controllers, ctl)
		if ctl == "cpuset" {
			// A v1 cpuset starts empty; give it the parent's CPUs and memory nodes.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				data, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
				os.WriteFile(filepath.Join(dir, f), data, 0o644)
			}
		}
	}
}

// restore puts the host back: mounts below the work dir, cgroups, dirs, symlinks, sysctls.
func (h *hostState) restore(c *cluster) {
	unmountBelow(c.dir)
	// runc also makes the containers' cgroups in the v2 hierarchy beside v1 (unified).
	for _, ctl := range append(h.controllers, "unified") {
		removeCgroupTree(filepath.Join("/sys/fs/cgroup", ctl, c.cgroupRoot))
	}
	// /var/log/containers holds symlinks into our pod-logs dir; remove those even when the dir
	// was there before.
	if entries, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, e := range entries {
			p := filepath.Join("/var/log/containers", e.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, c.dir) {
				os.Remove(p)
			}
		}
	}
	for _, d := range h.madeDirs {
		unmountBelow(d)
		if err := os.RemoveAll(d); err != nil {
			logf("cleanup: %v", err)
		}
	}
	for s, v := range h.sysctls {
		if err := os.WriteFile("/proc/sys/"+s, []byte(v), 0o644); err != nil {
			logf("cleanup: sysctl %s=%s: %v", s, v, err)
		}
	}
}

// unmountBelow lazily unmounts every mount point at or below dir, deepest first.
func unmountBelow(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	f.Close()
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			logf("cleanup: unmount %s: %v", p, err)
		}
	}
}

// removeCgroupTree removes a cgroup v1 directory and its children, deepest first (rmdir only:
// cgroup files cannot be unlinked); teardown has stopped every process inside by then.
func removeCgroupTree(dir string) {
	var dirs []string
	if _, err := os.Stat(dir); err != nil {
		return
	}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !os.IsNotExist(err) {
			logf("cleanup: rmdir %s: %v", d, err)
		}
	}
}
