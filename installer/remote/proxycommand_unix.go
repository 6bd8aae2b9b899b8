// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !windows

package remote

import (
	"os/exec"
	"syscall"
)

// proxyShell runs a ProxyCommand line with /bin/sh -c, as OpenSSH does with the user's shell
// ("exec" so that the shell does not stay in between).
func proxyShell(command string) *exec.Cmd { return exec.Command("/bin/sh", "-c", "exec "+command) }

// ownProcessGroup starts cmd in a process group of its own, so that killProcessGroup ends
// whatever the command started too.
func ownProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killProcessGroup sends SIGKILL to cmd's process group.
func killProcessGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
