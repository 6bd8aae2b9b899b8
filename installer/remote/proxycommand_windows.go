// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build windows

package remote

import "os/exec"

// proxyShell runs a ProxyCommand line with cmd.exe /c (Windows' OpenSSH runs it through the
// command interpreter too).
func proxyShell(command string) *exec.Cmd { return exec.Command("cmd.exe", "/c", command) }

// ownProcessGroup does nothing on Windows: there are no process groups to signal.
func ownProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the command's process (Windows has no process-group signal).
func killProcessGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
