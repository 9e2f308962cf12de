package testenv

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// agentProcAttr puts the agent in its own process group (so its plugins can be killed with
// it) and kills it if the test process dies.
func agentProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// unmountUnder detaches every mount below dir (Nomad clients running as root mount a tmpfs
// secrets dir per task and leave it mounted when they stop), deepest first.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading mountinfo: %w", err)
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// killWhere SIGKILLs every other process for which match(pid) holds and returns how many
// it killed.
func killWhere(match func(pid int) bool) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || !match(pid) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// reapChildren kills the direct children of this process that run the executable exe, and
// returns how many it killed. Nomad 1.6.1's plugin loader leaves the plugin process running
// when SetConfig refuses a config (Dispense returns the error without killing it).
func reapChildren(exe string) int {
	self := os.Getpid()
	return killWhere(func(pid int) bool {
		if path, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || path != exe {
			return false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// Fields after the parenthesised command: state, ppid, …
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 {
			return false
		}
		ppid, err := strconv.Atoi(fields[1])
		return err == nil && ppid == self
	})
}

// killUnder kills every process that names dir in its command line or works below it: the
// executors, log monitors and tasks Nomad clients leave running when they stop (raw_exec
// tasks outlive their client by design, so a client restart can reattach to them).
func killUnder(dir string) int {
	return killWhere(func(pid int) bool {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		return strings.Contains(string(cmdline), dir) || cwd == dir || strings.HasPrefix(cwd, dir+"/")
	})
}
