package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

const skipCode = 77

var (
	started  = time.Now()
	failures int
	// active is torn down by fatalf and skip.
	active *cluster
	keep   bool
)

func logf(format string, args ...any) {
	fmt.Printf("[%6.1fs] "+format+"\n", append([]any{time.Since(started).Seconds()}, args...)...)
}

// exitMu: the first of fatalf, skip (any goroutine: the main one, the signal or timeout watcher)
// and the normal end tears down and exits; a later one waits for that exit.
var exitMu sync.Mutex

// tearDownAndExit tears the active cluster down (once) and exits with code.
func tearDownAndExit(code int) {
	exitMu.Lock()
	if active != nil {
		c := active
		active = nil
		shutdown(c)
	}
	os.Exit(code)
}

// fatalf prints the reason and the components' last log lines, tears the cluster down and exits 1.
func fatalf(format string, args ...any) {
	fmt.Printf("FATAL: "+format+"\n", args...)
	if c := active; c != nil {
		for _, ch := range []*child{c.kubelet, c.containerd, c.devletLogs()} {
			if ch != nil {
				fmt.Print(ch.tail(3000))
			}
		}
	}
	tearDownAndExit(1)
}

func skip(format string, args ...any) {
	fmt.Printf("SKIP: "+format+"\n", args...)
	tearDownAndExit(skipCode)
}

func must(err error, what string) {
	if err != nil {
		fatalf("%s: %v", what, err)
	}
}

// check records a failed assertion without stopping the scenario.
func check(cond bool, format string, args ...any) bool {
	if !cond {
		failures++
		fmt.Printf("    FAIL: "+format+"\n", args...)
	}
	return cond
}

// phase runs f and prints how long it took (CI watches the cluster test's phases).
func phase(name string, f func()) {
	logf("phase %s ...", name)
	start := time.Now()
	f()
	logf("phase %s: %.1fs", name, time.Since(start).Seconds())
}

// waitFor polls cond every 250 ms until it holds or timeout passes (then fatal, with cond's
// last explanation).
func waitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			fatalf("%s: not within %v (last: %s)", what, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func writeFile(path string, data []byte, mode os.FileMode) {
	must(os.WriteFile(path, data, mode), "write "+path)
}

// runCmd runs a program and returns its trimmed stdout; the error carries stderr.
func runCmd(prog string, env []string, args ...string) (string, error) {
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("%s %s: %v: %s", prog,
			strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
