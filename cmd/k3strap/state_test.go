// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/fleet"
)

// A state file k3strap cannot use — truncated, or another fleet's — is refused the same way by
// every command that reads it: exit 2, naming the file and the fix; another fleet's state is
// never merged.
func TestStateFileRefusedAlike(t *testing.T) {
	port, dials := sshTrap(t)
	path := fleetDir(t, port, "")
	state := fleet.StatePath(path, fleet.Shard{})
	truncated := `{"version": 1, "fleet": "stores", "sites": {"store-a": {"inventory": "x", "rollout": {"command": "apply", "sta`
	other := `{"version": 1, "fleet": "warehouses", "fleetFile": "/elsewhere/w.yaml", "sites": {"wh-1": {"inventory": "w.yaml"}}}`
	for _, c := range []struct {
		name, content string
		want          string
	}{
		{"truncated", truncated, "state file " + state + ": is "},
		{"another fleet", other, "state file " + state + ": records fleet warehouses, not stores"},
	} {
		if err := os.WriteFile(state, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"fleet", "status", "-f", path},
			{"fleet", "status", "--state", state, "-f", path},
			{"apply", "-f", path, "--yes"},
			{"preflight", "-f", path},
		} {
			code, out, errs := runIn(t, "", args...)
			if code != 2 || !strings.Contains(errs, c.want) || !strings.Contains(errs, "— fix: ") {
				t.Errorf("%s: %v: exit %d, want 2 with %q and a fix\n%s%s", c.name, args, code, c.want, out, errs)
			}
			if strings.Contains(out, "wh-1") {
				t.Errorf("%s: %v: another fleet's site merged:\n%s", c.name, args, out)
			}
		}
	}
	if dials.Load() != 0 {
		t.Errorf("a refused state file still connected %d times", dials.Load())
	}
	// Two state files of different fleets given to status without a fleet file: refused too.
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.state.json"), filepath.Join(dir, "b.state.json")
	_ = os.WriteFile(a, []byte(`{"version": 1, "fleet": "stores", "sites": {}}`), 0o600)
	_ = os.WriteFile(b, []byte(other), 0o600)
	code, out, errs := runIn(t, "", "fleet", "status", "--state", a, "--state", b)
	if code != 2 || !strings.Contains(errs, "records fleet warehouses, not stores (state file "+a+")") {
		t.Errorf("mixed --state: exit %d\n%s%s", code, out, errs)
	}
}
