// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/k3s"
)

// The remote scripts spell no K3s path: they use the variables of k3s.ShellVars (or take the
// path as an argument), so that k3s/paths.go stays the one place a path is written.
func TestScriptsSpellNoK3sPath(t *testing.T) {
	files, _ := filepath.Glob("*/*.sh")
	more, _ := filepath.Glob("../facts/*.sh")
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{k3s.DirBin + "/k3s", k3s.DirDataRoot, k3s.DirConfig, k3s.PathSubnetEnv, k3s.DirSystemd, k3s.DirK3strap} {
			for i, line := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "#") && strings.Contains(line, p) {
					t.Errorf("%s:%d spells %s: use the variable of k3s.ShellVars", f, i+1, p)
				}
			}
		}
	}
}
