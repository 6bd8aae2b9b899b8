// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package remote

import "os/exec"

// processGroup leaves c as it is: local mode targets Linux hosts; elsewhere a cancelled
// command is killed (exec.CommandContext's default).
func processGroup(*exec.Cmd) {}
