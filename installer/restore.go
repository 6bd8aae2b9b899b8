// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/inventory"
)

// A restore is resumable: the first server keeps k3s.PathRestoreState (id, snapshot, whether
// --cluster-reset ran), every server k3s.PathRestoreDone (the id of the restore it rejoined
// after). A re-run for the same snapshot picks up where the last one stopped.

func (s *session) readKV(ctx context.Context, hs *hostState, file string) (map[string]string, error) {
	out, err := hs.sh(ctx, "restore state", restoreStateScript, "", file, "read")
	if err != nil {
		return nil, err
	}
	kv := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			kv[k] = v
		}
	}
	return kv, nil
}

func (s *session) writeKV(ctx context.Context, hs *hostState, file string, kv map[string]string) error {
	var b strings.Builder
	for _, k := range []string{"id", "snapshot", "reset", "done"} {
		if v, ok := kv[k]; ok {
			fmt.Fprintf(&b, "%s=%s\n", k, v)
		}
	}
	_, err := hs.sh(ctx, "restore state", restoreStateScript, b.String(), file, "write")
	return err
}

// servers returns the session's servers but the first, in inventory order; agents likewise.
func (s *session) others(role inventory.Role) []*hostState {
	var out []*hostState
	for _, hs := range s.hosts {
		if hs != s.first && hs.host.Role == role {
			out = append(out, hs)
		}
	}
	return out
}
