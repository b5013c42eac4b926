package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
)

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// measure runs n CreateContainer round trips through each runtime, interleaved call by call so
// that every plugin sees the same machine load, and returns p50 and p99 per runtime.
func measure(rts []*fakeRuntime, n int, verify []func(*api.CreateContainerResponse) bool) ([]time.Duration, []time.Duration) {
	ctx := context.Background()
	p := pod("pod-bench", nil)
	lat := make([][]time.Duration, len(rts))
	for i := 0; i < n+n/10; i++ {
		for k, rt := range rts {
			c := container(p, "app")
			c.Id = fmt.Sprintf("%s-%d-%d", c.Id, k, i)
			start := time.Now()
			rsp, err := rt.a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: p, Container: c})
			d := time.Since(start)
			if err != nil || !verify[k](rsp) {
				check(false, "bench CreateContainer: %v %v", err, rsp)
				return nil, nil
			}
			if i >= n/10 { // warm-up discarded
				lat[k] = append(lat[k], d)
			}
		}
	}
	p50 := make([]time.Duration, len(rts))
	p99 := make([]time.Duration, len(rts))
	for k := range rts {
		sort.Slice(lat[k], func(a, b int) bool { return lat[k][a] < lat[k][b] })
		p50[k], p99[k] = percentile(lat[k], 0.5), percentile(lat[k], 0.99)
	}
	return p50, p99
}

func rssKiB(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:"))
		}
	}
	return "?"
}

func same(rsp *api.CreateContainerResponse) bool {
	a := rsp.GetAdjust()
	return len(a.GetCDIDevices()) == 1 && a.GetLinux().GetResources().GetCpu().GetCpus() == "4-7" &&
		findMount(a, "/var/run/devlet/gpu.json") != nil
}

func runBench(bin, baseline, dir string, n int) {
	claims := claimsJSON(dir)

	rt0 := newRuntime(dir, filepath.Join(dir, "b0.sock"), nil, nil) // no plugin: the adaptation's own cost
	rt0.start("start")
	rt1 := newRuntime(dir, filepath.Join(dir, "b1.sock"), nil, nil)
	rt1.start("start")
	devlet := startPlugin(bin, "--socket", filepath.Join(dir, "b1.sock"), "--claims", claims,
		"--numa-cpus", "0=0-3;1=4-7", "--cdi-policy", "names")
	rt1.waitSync("bench devlet")
	rt2 := newRuntime(dir, filepath.Join(dir, "b2.sock"), nil, nil)
	rt2.start("start")
	g := startGoPluginProcess(filepath.Join(dir, "b2.sock"))
	rt2.waitSync("bench go")
	rts := []*fakeRuntime{rt0, rt1, rt2}
	plugins := []*exec.Cmd{devlet, g}
	any := func(*api.CreateContainerResponse) bool { return true }
	verify := []func(*api.CreateContainerResponse) bool{any, same, same}
	if baseline != "" {
		// The same claims and containers (the containers carry the claim's marker, which a
		// build from before markers ignores: it gave the claim to every container).
		rt3 := newRuntime(dir, filepath.Join(dir, "b3.sock"), nil, nil)
		rt3.start("start")
		plugins = append(plugins, startPlugin(baseline, "--socket", filepath.Join(dir, "b3.sock"),
			"--claims", claims, "--numa-cpus", "0=0-3;1=4-7", "--cdi-policy", "names"))
		rt3.waitSync("bench baseline devlet")
		rts = append(rts, rt3)
		verify = append(verify, same)
	}

	p50, p99 := measure(rts, n, verify)
	rss, grss := rssKiB(devlet.Process.Pid), rssKiB(g.Process.Pid)
	for _, rt := range rts {
		rt.a.Stop()
	}
	for _, p := range plugins {
		stopPlugin(p)
	}
	if p50 == nil {
		return
	}

	fmt.Printf("CreateContainer round trip through containerd/nri adaptation v0.12.5, %d calls per plugin\n", n)
	fmt.Printf("(after %d warm-up calls; calls interleaved across the %d runtimes; same adjustment:\n", n/10, len(rts))
	fmt.Printf(" one CDI device, one bind mount, cpuset + mems)\n")
	fmt.Printf("  no plugin        p50 %10v  p99 %10v\n", p50[0], p99[0])
	fmt.Printf("  devlet (C++)     p50 %10v  p99 %10v\n", p50[1], p99[1])
	fmt.Printf("  Go stub plugin   p50 %10v  p99 %10v  (own process, containerd/nri pkg/stub)\n", p50[2], p99[2])
	if baseline != "" {
		fmt.Printf("  baseline devlet  p50 %10v  p99 %10v  (%s)\n", p50[3], p99[3], baseline)
		fmt.Printf("  ratio baseline/devlet  p50 %.2fx  p99 %.2fx\n", float64(p50[3])/float64(p50[1]), float64(p99[3])/float64(p99[1]))
	}
	fmt.Printf("  ratio Go/devlet  p50 %.2fx  p99 %.2fx\n", float64(p50[2])/float64(p50[1]), float64(p99[2])/float64(p99[1]))
	fmt.Printf("  RSS after the run: devlet %s, Go stub plugin %s\n", rss, grss)
	met := "met"
	if p99[1] >= time.Millisecond {
		met = "NOT met on this machine"
	}
	fmt.Printf("  target devlet p99 < 1 ms: %s\n", met)
}
