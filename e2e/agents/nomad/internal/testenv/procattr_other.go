//go:build !linux

package testenv

import "syscall"

// agentProcAttr puts the agent in its own process group, so its plugins can be killed with it.
func agentProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// unmountUnder does nothing: only Linux clients mount task directories.
func unmountUnder(string) error { return nil }

// reapChildren does nothing outside Linux.
func reapChildren(string) int { return 0 }

// killUnder does nothing outside Linux.
func killUnder(string) int { return 0 }
