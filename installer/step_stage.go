// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// stageStep uploads the files of every joining host that runs no K3s yet (binary, images,
// install script, config.yaml, manifests) in the background while the first server comes up,
// under the same --concurrency and --concurrent-uploads limits, and runs the install script
// there with INSTALL_K3S_SKIP_ENABLE and INSTALL_K3S_SKIP_START: the unit is written but
// neither enabled nor started (a reboot does not start it), so that joining waits for K3s and
// not for the links or the script. The join writes the token file, enables and starts the
// unit. If the first server fails, those hosts stay installed but stopped and disabled, and
// the re-run converges them at their join (no upload again).
// Hosts that already run K3s are converged at their join turn only (a file changed under a
// running service must be followed by its restart in the same step). The token file is
// written at join time: it holds the first server's token.
//
// Reads: joining hosts' plan, facts, fresh. Writes: hostState.staged (closed when done) and
// hostState.staging, in the background.
type stageStep struct{}

func (stageStep) Phase() events.Phase { return events.PhaseStage }

func (stageStep) Summary() string {
	return "upload joining hosts' files and run the install script while the first server boots (unit not enabled, not started)"
}

// stageable are the joining hosts stageStep uploads to.
func (s *session) stageable() []*hostState {
	var out []*hostState
	for _, hs := range s.hosts {
		if hs != s.first && hs.plan != nil && hs.facts != nil && hs.fresh {
			out = append(out, hs)
		}
	}
	return out
}

func (stageStep) Run(ctx context.Context, s *session) error {
	hosts := s.stageable()
	if len(hosts) == 0 {
		return nil
	}
	for _, hs := range hosts {
		hs.staged = make(chan struct{})
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		s.each(ctx, hosts, func(ctx context.Context, hs *hostState) {
			defer close(hs.staged)
			s.stage(ctx, hs)
		})
	}()
	return nil
}

// stage uploads hs's planned files that differ from the host's (except the token file), then
// runs the install script (unit written, not enabled, not started), and records both in
// hs.staging: its join applies them to the facts, so that its converge only writes the token
// file, enables and starts. A failed upload or install is left to the join, which does (and
// retries) what is still missing.
func (s *session) stage(ctx context.Context, hs *hostState) {
	em := s.in.emitter(events.PhaseStage)
	n := 0
	for i := range hs.plan.Files {
		f := &hs.plan.Files[i]
		if f.Path == k3s.PathTokenFile || hs.facts.K3s.Files[f.Path] == f.SHA256 {
			continue
		}
		err := s.retry(ctx, hs, "upload "+f.Path, func(ctx context.Context) error { return s.upload(ctx, hs, f) })
		if err != nil {
			if ctx.Err() == nil {
				em.Warn(hs.host.Name, fmt.Sprintf("staging %s failed (%v); the join uploads it", f.Path, err))
			}
			return
		}
		if hs.staging.files == nil {
			hs.staging.files = map[string]string{}
		}
		hs.staging.files[f.Path] = f.SHA256
		n++
	}
	msg := fmt.Sprintf("uploaded %d files while the first server comes up", n)
	if s.changesFor(hs).install {
		err := s.retry(ctx, hs, "install", func(ctx context.Context) error {
			_, err := s.install(ctx, hs)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				em.Warn(hs.host.Name, fmt.Sprintf("installing ahead failed (%v); the join runs the install script", err))
			}
			return
		}
		hs.staging.installed = true
		msg += "; ran the install script (unit not enabled, not started)"
	}
	em.Step(hs.host.Name, "stage", events.StatusChanged, msg)
}

// staging is what the stage step did on a host.
type staging struct {
	// files are the paths uploaded, with their sha256.
	files map[string]string
	// installed says the install script ran: the unit is written, not enabled, not started.
	installed bool
}

// applyStaging records in hs's facts what the stage step did there (call after hs.staged is
// closed).
func (s *session) applyStaging(hs *hostState) {
	k := &hs.facts.K3s
	for path, sum := range hs.staging.files {
		if k.Files == nil {
			k.Files = map[string]string{}
		}
		k.Files[path] = sum
	}
	if hs.staging.installed {
		k.Service, k.ServiceEnabled, k.ServiceActive = hs.plan.Service, "disabled", "inactive"
		if v := s.in.cluster.Spec.K3s.Version; !hs.plan.Airgap && v != "" {
			// The script installed the pinned release. (Installed from a channel, the
			// version is not known here: the join runs the script again.)
			k.BinaryVersion = v
		}
	}
}

// Preview names the hosts whose files would be uploaded during the first server's bring-up.
func (stageStep) Preview(ctx context.Context, s *session) error {
	for _, hs := range s.stageable() {
		s.in.emitter(events.PhaseStage).Info(hs.host.Name, "would upload its files and run the install script (unit not enabled, not started) while the first server comes up, then write the token file, enable and start K3s once the first server's API answers and its uninitialized taint is gone")
	}
	return ctx.Err()
}
