// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"embed"
	"fmt"

	"github.com/k3strap/k3strap/k3s"
)

// The shell scripts k3strap runs on hosts, embedded from scripts/*.sh (POSIX sh; `make test`
// runs shellcheck on them). Each file's comment says what it does and what its arguments are;
// the host paths it uses come from k3s.ShellVars, put before its body.
//
//go:embed scripts/*.sh
var scriptFiles embed.FS

// Scripts run with remote.Script.
var (
	probeScript        = script("probe.sh")
	installScript      = script("install.sh")
	startScript        = script("start.sh")
	enableScript       = script("enable.sh")
	resetScript        = script("reset.sh")
	systemctlScript    = script("systemctl.sh")
	etcdCheckScript    = script("etcd-check.sh")
	restoreStateScript = script("restore-state.sh")
	clusterResetScript = script("cluster-reset.sh")
	moveDBAsideScript  = script("move-db-aside.sh")
	certRotateScript   = script("certificate-rotate.sh")
	tokenRotateScript  = script("token-rotate.sh")
	tokenFileScript    = script("token-file.sh")
	snapshotSaveScript = script("snapshot-save.sh")
	snapshotListScript = script("snapshot-list.sh")
	snapshotDirScript  = script("snapshot-dir.sh")
	sha256Script       = script("sha256.sh")
)

// script returns the embedded script name with the host paths before it.
func script(name string) string { return k3s.ShellVars() + scriptFile(name) }

// scriptFile returns the embedded file name. A missing file is a build mistake, caught by every
// test.
func scriptFile(name string) string {
	b, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(fmt.Sprintf("embedded script %s: %v", name, err))
	}
	return string(b)
}
