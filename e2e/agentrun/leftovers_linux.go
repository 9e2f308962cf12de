package agentrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// procAttr puts a started program in its own process group and kills it if this process dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// AdoptOrphans makes this process the reaper of its orphaned descendants: Nomad clients leave
// their executors and raw_exec tasks running when they stop, by design (a restarted client
// reattaches to them), and those would otherwise be adopted by init, out of reach of
// KillDescendantsUnder.
func AdoptOrphans() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", e)
	}
	return nil
}

// KillDescendantsUnder SIGKILLs and reaps every descendant of this process that names dir in
// its command line or runs below it (executors, log monitors, tasks), and returns how many it
// killed. Limiting it to descendants means that nothing this process did not start is ever
// touched; call AdoptOrphans before starting anything, so that what the agents leave behind
// stays a descendant.
func KillDescendantsUnder(dir string) int {
	self := os.Getpid()
	parent := processes()
	below := func(pid int) bool {
		for p, hops := parent[pid], 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if p == self {
				return true
			}
		}
		return false
	}
	killed := killWhere(parent, func(pid int) bool { return below(pid) && namesDir(pid, dir) })
	for _, pid := range killed {
		if parent[pid] == self {
			// An adopted orphan: no exec.Cmd waits for it.
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
		}
	}
	return len(killed)
}

// KillUnder SIGKILLs every process that names dir in its command line or runs below it, whoever
// its parent is, and returns how many it killed: the executors, log monitors and tasks Nomad
// clients leave running when they stop end up with init (or whichever subreaper is above), not
// with the process that started the clients. For a folder no one else uses, such as a test's
// temporary one; it does not reap them.
func KillUnder(dir string) int {
	return len(killWhere(processes(), func(pid int) bool { return namesDir(pid, dir) }))
}

// KillGroup SIGKILLs every process in process group pgid and returns how many it found there;
// the sockets of the go-plugin servers among them go too (killWhere). A Nomad agent's group
// holds the plugins it started.
func KillGroup(pgid int) int {
	group := strconv.Itoa(pgid)
	killed := killWhere(processes(), func(pid int) bool {
		fields := statFields(pid)
		return len(fields) > 2 && fields[2] == group
	})
	// Whatever joined the group since the scan.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return len(killed)
}

// KillChildren SIGKILLs the direct children of this process that run the executable exe, and
// returns how many it killed. Nomad 1.6.1's plugin loader leaves the plugin process running when
// SetConfig refuses a config (Dispense returns the error without killing it). It does not reap
// them: the loader's exec.Cmd still waits for each.
func KillChildren(exe string) int {
	self := os.Getpid()
	parent := processes()
	return len(killWhere(parent, func(pid int) bool {
		path, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return err == nil && path == exe && parent[pid] == self
	}))
}

// processes maps every process in /proc to its parent (0 when it is gone already).
func processes() map[int]int {
	parent := map[int]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return parent
	}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			parent[pid] = ppid(pid)
		}
	}
	return parent
}

// killWhere SIGKILLs every process of procs but this one for which match holds, removes the
// go-plugin sockets they listened on, and returns those it killed.
func killWhere(procs map[int]int, match func(pid int) bool) []int {
	self := os.Getpid()
	var matched, killed []int
	for pid := range procs {
		if pid != self && match(pid) {
			matched = append(matched, pid)
		}
	}
	sockets := pluginSockets(matched)
	for _, pid := range matched {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	for _, path := range sockets {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
	}
	return killed
}

// pluginSockets are the Unix sockets named "plugin…" (go-plugin's, made in its TMPDIR) that
// the processes pids listen on. A plugin or executor killed with SIGKILL leaves its socket's
// file behind: these are the files to remove.
func pluginSockets(pids []int) []string {
	inodes := map[string]bool{}
	for _, pid := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
				inodes[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	// Num RefCount Protocol Flags Type St Inode Path: a bound socket has a path.
	data, _ := os.ReadFile("/proc/net/unix")
	var paths []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && inodes[f[6]] && strings.HasPrefix(f[7], "/") && strings.HasPrefix(filepath.Base(f[7]), "plugin") {
			paths = append(paths, f[7])
		}
	}
	return paths
}

// ppid returns a process's parent (0 if it is gone).
func ppid(pid int) int {
	fields := statFields(pid)
	if len(fields) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(fields[1])
	return p
}

// ProcessGone reports whether process pid has ended: it is no longer in /proc, or it is a
// zombie waiting for its parent to reap it (for ever when that parent is a subreaper that does
// not wait for it).
func ProcessGone(pid int) bool {
	fields := statFields(pid)
	return len(fields) == 0 || fields[0] == "Z"
}

// statFields returns the fields of /proc/<pid>/stat after the parenthesised command (which may
// hold spaces and parentheses): state, ppid, ...; nil when the process is gone.
func statFields(pid int) []string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	return strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
}

// namesDir reports whether a process names a path below dir in its arguments or runs in or
// below dir. A path below dir, not dir as a prefix: /tmp/fft-e2e-12 must not match the
// processes of another test's /tmp/fft-e2e-123.
func namesDir(pid int, dir string) bool {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return strings.Contains(string(cmdline), dir+"/") || cwd == dir || strings.HasPrefix(cwd, dir+"/")
}

// UnmountUnder detaches every mount below dir, deepest first: Nomad clients running as root
// mount a tmpfs secrets folder per task and leave it mounted when they stop.
func UnmountUnder(dir string) error {
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
