// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package remote

import (
	"os/exec"
	"syscall"
)

// processGroup starts c in its own process group and makes its cancellation SIGTERM the whole
// group (a script's children too), as sshd's SIGTERM ends a remote command's session.
func processGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error {
		return syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	}
}
