package devcluster

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// procAttr puts a started program in its own process group and kills it
// if fftctl dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// adoptOrphans makes this process the reaper of its orphaned descendants:
// Nomad clients leave their executors and raw_exec tasks running when
// they stop, by design (a restarted client reattaches to them), and those
// would otherwise be adopted by init, out of reach of killOrphans.
func adoptOrphans() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", e)
	}
	return nil
}

// killOrphans SIGKILLs and reaps every descendant of this process that
// names dir in its command line or runs below it (executors, log monitors,
// tasks), and returns how many it killed. Limiting it to descendants means
// that nothing this process did not start is ever touched.
func killOrphans(dir string) int {
	self := os.Getpid()
	parent := map[int]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			parent[pid] = ppid(pid)
		}
	}
	below := func(pid int) bool {
		for p, hops := parent[pid], 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if p == self {
				return true
			}
		}
		return false
	}
	killed := 0
	for pid := range parent {
		if pid == self || !below(pid) || !namesDir(pid, dir) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
			if parent[pid] == self {
				// An adopted orphan: no exec.Cmd waits for it.
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, 0, nil)
			}
		}
	}
	return killed
}

// ppid returns a process's parent (0 if it is gone).
func ppid(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command: state, ppid, ...
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(fields[1])
	return p
}

// namesDir reports whether a process names dir in its arguments or runs
// below it.
func namesDir(pid int, dir string) bool {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return strings.Contains(string(cmdline), dir+"/") || cwd == dir || strings.HasPrefix(cwd, dir+"/")
}

// unmountUnder detaches every mount below dir, deepest first: Nomad
// clients running as root mount a tmpfs secrets folder per task and leave
// it mounted when they stop.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading mountinfo: %w", err)
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
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
