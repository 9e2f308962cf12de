//go:build !linux

package devcluster

import "syscall"

// procAttr puts a started program in its own process group.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// adoptOrphans does nothing outside Linux.
func adoptOrphans() error { return nil }

// killOrphans does nothing outside Linux, where it cannot list processes.
func killOrphans(string) int { return 0 }

// unmountUnder does nothing: only Linux clients mount task folders.
func unmountUnder(string) error { return nil }
