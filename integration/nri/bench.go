package main

import (
	"context"
	"fmt"
	"os"
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

// measure runs n CreateContainer round trips through the adaptation and returns p50 and p99.
func measure(rt *fakeRuntime, n int, verify func(*api.CreateContainerResponse) bool) (time.Duration, time.Duration) {
	ctx := context.Background()
	p := pod("pod-bench", nil)
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n+n/10; i++ {
		c := container(p, "app")
		c.Id = fmt.Sprintf("%s-%d", c.Id, i)
		start := time.Now()
		rsp, err := rt.a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: p, Container: c})
		d := time.Since(start)
		if err != nil || !verify(rsp) {
			check(false, "bench CreateContainer: %v %v", err, rsp)
			return 0, 0
		}
		if i >= n/10 { // warm-up discarded
			lat = append(lat, d)
		}
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	return percentile(lat, 0.5), percentile(lat, 0.99)
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

func runBench(bin, dir string, n int) {
	claims := claimsJSON(dir)

	// No plugin: the adaptation's own cost.
	rt0 := newRuntime(dir, filepath.Join(dir, "b0.sock"), nil, nil)
	rt0.start("start")
	base50, base99 := measure(rt0, n, func(*api.CreateContainerResponse) bool { return true })
	rt0.a.Stop()

	rt1 := newRuntime(dir, filepath.Join(dir, "b1.sock"), nil, nil)
	rt1.start("start")
	devlet := startPlugin(bin, "--socket", filepath.Join(dir, "b1.sock"), "--claims", claims,
		"--numa-cpus", "0=0-3;1=4-7", "--cdi-policy", "names")
	rt1.waitSync("bench devlet")
	d50, d99 := measure(rt1, n, same)
	rss := rssKiB(devlet.Process.Pid)
	rt1.a.Stop()
	stopPlugin(devlet)

	rt2 := newRuntime(dir, filepath.Join(dir, "b2.sock"), nil, nil)
	rt2.start("start")
	g := startGoPluginProcess(filepath.Join(dir, "b2.sock"))
	rt2.waitSync("bench go")
	g50, g99 := measure(rt2, n, same)
	grss := rssKiB(g.Process.Pid)
	rt2.a.Stop()
	stopPlugin(g)

	fmt.Printf("CreateContainer round trip through containerd/nri adaptation, %d calls each (after %d warm-up)\n", n, n/10)
	fmt.Printf("  no plugin        p50 %8v  p99 %8v\n", base50, base99)
	fmt.Printf("  devlet (C++)     p50 %8v  p99 %8v\n", d50, d99)
	fmt.Printf("  Go stub plugin   p50 %8v  p99 %8v  (own process, containerd/nri pkg/stub)\n", g50, g99)
	if d50 > 0 && d99 > 0 {
		fmt.Printf("  ratio Go/devlet  p50 %.2fx  p99 %.2fx\n", float64(g50)/float64(d50), float64(g99)/float64(d99))
	}
	fmt.Printf("  RSS after the run: devlet %s, Go stub plugin %s\n", rss, grss)
	check(d99 < time.Millisecond, "devlet p99 %v is not under 1 ms", d99)
}
