package main

// Supervised child processes (the components, containerd) with their output in log files.

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

type child struct {
	name string
	args []string
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (c *child) start() {
	f, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(err, c.name+" log")
	c.cmd = exec.Command(c.args[0], c.args[1:]...)
	c.cmd.Stdout, c.cmd.Stderr = f, f
	c.cmd.Env = append(os.Environ(), c.env...)
	// Children die with the driver even when it is killed; their own process group keeps a
	// terminal's ^C for the driver, which stops them in order.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	must(c.cmd.Start(), "starting "+c.name)
	c.done = make(chan struct{})
	go func() {
		c.cmd.Wait()
		f.Close()
		close(c.done)
	}()
}

func (c *child) running() bool {
	if c == nil || c.done == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, then SIGKILL after grace.
func (c *child) stop(grace time.Duration) {
	if !c.running() {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		logf("%s still running %v after SIGTERM: killed", c.name, grace)
		c.cmd.Process.Kill()
		<-c.done
	}
}

// kill sends SIGKILL (a crash, for the restart scenarios) and waits.
func (c *child) kill() {
	if !c.running() {
		return
	}
	c.cmd.Process.Kill()
	<-c.done
}

// tail returns the last n bytes of the child's log.
func (c *child) tail(n int) string {
	data, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return fmt.Sprintf("---- %s (last %d bytes of %s) ----\n%s\n", c.name, len(data), c.log, data)
}
