// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"

	"github.com/k3strap/k3strap/airgapbundle"
)

// The K3STRAP_* environment: the names k3strap reads, the deprecated names it still reads with
// a warning, and a warning for any other K3STRAP_* variable (a misspelt name would otherwise be
// silently ignored, as K3STRAP_SSH_KEY_PATH was before v0.4).

// knownEnv returns every K3STRAP_* variable the k3strap binary reads: $K3STRAP_FILE,
// $K3STRAP_CACHE_DIR and each override key's variable (OverrideKeys), sorted.
func knownEnv() []string {
	names := []string{envFile, airgapbundle.CacheDirEnv}
	for _, k := range OverrideKeys() {
		names = append(names, k.Env)
	}
	sort.Strings(names)
	return names
}

// toolingEnv are K3STRAP_* variables of this repository's build and tests (Makefile, e2e
// harness, benchmarks) that are present in the environment of the k3strap processes those
// tests start; the binary does not read them and does not warn about them. A name matches an
// entry equal to it or, for an entry ending in '_' or "E2E", starting with it.
var toolingEnv = []string{"K3STRAP_E2E", "K3STRAP_TEST_", "K3STRAP_BENCH_", "K3STRAP_HARNESS_SCRIPT", "K3STRAP_COMMIT", "K3STRAP_RELEASE_DIST", "K3STRAP_LOCK_HELPER"}

func isToolingEnv(name string) bool {
	for _, t := range toolingEnv {
		if name == t || ((strings.HasSuffix(t, "_") || strings.HasSuffix(t, "E2E")) && strings.HasPrefix(name, t)) {
			return true
		}
	}
	return false
}

// warnEnv writes to w a warning for each deprecated override variable set in environ (a
// KEY=VALUE list, os.Environ's shape) — naming the new name, and saying which wins when both
// are set — and for each other K3STRAP_* variable k3strap does not read, with the closest known
// name when one is within three edits. Values are never printed (a variable may hold a secret).
func warnEnv(w io.Writer, environ []string) {
	set := map[string]bool{}
	var names []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix+"_") && !set[name] {
			set[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	known := knownEnv()
	old := map[string]string{}
	for _, k := range OverrideKeys() {
		if k.OldEnv != "" {
			old[k.OldEnv] = k.Env
		}
	}
	for _, name := range names {
		switch {
		case slices.Contains(known, name), isToolingEnv(name):
		case old[name] != "":
			msg := fmt.Sprintf("warning: $%s is deprecated and will be ignored from the next release — rename it $%s (the flag's name)", name, old[name])
			if set[old[name]] {
				msg += fmt.Sprintf("; both are set: $%s is used", old[name])
			}
			fmt.Fprintln(w, msg)
		default:
			msg := fmt.Sprintf("warning: $%s is not a variable k3strap reads; it is ignored", name)
			if near := closestEnv(name, known); near != "" {
				msg += fmt.Sprintf(" — did you mean $%s?", near)
			} else {
				msg += " (k3strap reads: " + strings.Join(known, ", ") + ")"
			}
			fmt.Fprintln(w, msg)
		}
	}
}

// closestEnv returns the known name nearest to name if it is within three edits, else "".
func closestEnv(name string, known []string) string {
	best, bestD := "", 4
	for _, k := range known {
		if d := levenshtein.ComputeDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}
