//go:build !linux

package agentrun

import "syscall"

// procAttr puts a started program in its own process group.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// AdoptOrphans does nothing outside Linux.
func AdoptOrphans() error { return nil }

// KillDescendantsUnder does nothing outside Linux, where it cannot list processes.
func KillDescendantsUnder(string) int { return 0 }

// KillUnder does nothing outside Linux, where it cannot list processes.
func KillUnder(string) int { return 0 }

// KillGroup SIGKILLs process group pgid; it cannot count them outside Linux.
func KillGroup(pgid int) int {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return 0
}

// KillChildren does nothing outside Linux, where it cannot list processes.
func KillChildren(string) int { return 0 }

// UnmountUnder does nothing: only Linux clients mount task folders.
func UnmountUnder(string) error { return nil }

// ProcessGone reports whether process pid has ended (a zombie counts as running here).
func ProcessGone(pid int) bool { return syscall.Kill(pid, 0) != nil }
