// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote/transcript"
	"github.com/k3strap/k3strap/k3s"
)

// TestReplayScenarios runs k3strap's commands against the recorded hosts of each scenario in
// testdata/transcripts (record.sh says how they were recorded) and checks what each command
// concluded and did, and that it asked the hosts nothing the recorded run did not.
func TestReplayScenarios(t *testing.T) {
	ctx := context.Background()
	type outcome struct {
		r   *replayRun
		err error
	}
	cases := []struct {
		name, tier string
		run        func(ctx context.Context, in *Installer, r *replayRun) error
		opts       Options
		check      func(t *testing.T, o outcome)
	}{
		{name: "sim-1s2a-rerun", tier: "one", run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Apply(ctx) },
			check: func(t *testing.T, o outcome) {
				noErr(t, o.err, o.r)
				for _, h := range o.r.summary(t).Hosts {
					if h.Status != events.StatusUnchanged {
						t.Errorf("%s: %s %q, want unchanged", h.Host, h.Status, h.Message)
					}
				}
				if b := o.r.hosts["cp1"].Written(k3s.PathConfig); b != nil {
					t.Errorf("a re-run rewrote cp1's config.yaml")
				}
			}},
		{name: "sim-drift-dryrun", tier: "two", opts: Options{DryRun: true, DetailedExitCode: true},
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Apply(ctx) },
			check: func(t *testing.T, o outcome) {
				if kindOf(o.err) != KindChangesPending {
					t.Fatalf("dry-run with a changed label: %v, want changes pending\n%s", o.err, o.r.log())
				}
				if !strings.Contains(o.r.log(), "tier") {
					t.Errorf("the dry-run does not name the changed label:\n%s", o.r.log())
				}
				for _, h := range o.r.hosts {
					if b := h.Written(k3s.PathConfig); b != nil {
						t.Errorf("%s: a dry-run wrote config.yaml", h.Host())
					}
				}
			}},
		{name: "sim-drift-check", tier: "two", run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Check(ctx) },
			check: func(t *testing.T, o outcome) {
				if kindOf(o.err) != KindDrift {
					t.Fatalf("check with a changed label: %v, want drift\n%s", o.err, o.r.log())
				}
				if !strings.Contains(o.r.log(), "w2") || !strings.Contains(o.r.log(), "tier") {
					t.Errorf("check does not name w2's tier label:\n%s", o.r.log())
				}
			}},
		{name: "sim-drift-reconcile", tier: "two", opts: Options{ReconcileTaints: true},
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Apply(ctx) },
			check: func(t *testing.T, o outcome) {
				noErr(t, o.err, o.r)
				if cfg := string(o.r.hosts["w2"].Written(k3s.PathConfig)); !strings.Contains(cfg, "tier=two") {
					t.Errorf("w2's config.yaml does not get its new label:\n%s", cfg)
				}
				for _, h := range o.r.summary(t).Hosts {
					if want := map[bool]events.Status{true: events.StatusChanged, false: events.StatusUnchanged}[h.Host == "w2"]; h.Status != want {
						t.Errorf("%s: %s %q, want %s", h.Host, h.Status, h.Message, want)
					}
				}
			}},
		{name: "sim-doctor", tier: "two", run: func(ctx context.Context, in *Installer, r *replayRun) error {
			rep, err := in.Doctor(ctx, DoctorRequest{})
			if err == nil && rep == nil {
				return errors.New("doctor returned no report")
			}
			return err
		}, check: func(t *testing.T, o outcome) { noErr(t, o.err, o.r) }},
		{name: "sim-preflight", tier: "two", run: func(ctx context.Context, in *Installer, _ *replayRun) error {
			rep, err := in.Preflight(ctx)
			if err == nil && len(rep.Errors()) > 0 {
				return fmt.Errorf("preflight errors on a healthy cluster: %v", rep.Errors())
			}
			return err
		}, check: func(t *testing.T, o outcome) {
			noErr(t, o.err, o.r)
			if !strings.Contains(o.r.log(), "preflight succeeded") || !strings.Contains(o.r.log(), "14 paths ok") {
				t.Errorf("preflight did not judge the recorded facts and paths:\n%s", o.r.log())
			}
		}},
		{name: "sim-kubeconfig", tier: "two", run: func(ctx context.Context, in *Installer, r *replayRun) error {
			p, err := in.Kubeconfig(ctx, KubeconfigRequest{Path: filepath.Join(r.dir, "out.kubeconfig")})
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !strings.Contains(string(b), "https://10.125.0.11:6443") {
				return errors.New("the kubeconfig does not point at cp1's address:\n" + string(b))
			}
			return nil
		}, check: func(t *testing.T, o outcome) { noErr(t, o.err, o.r) }},
		{name: "sim-remove-node", tier: "two", run: func(ctx context.Context, in *Installer, _ *replayRun) error {
			return in.RemoveNodes(ctx, []string{"w2"})
		},
			check: func(t *testing.T, o outcome) { noErr(t, o.err, o.r) }},
		{name: "sim-reset", tier: "two", run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Reset(ctx) },
			check: func(t *testing.T, o outcome) {
				noErr(t, o.err, o.r)
				for _, h := range o.r.summary(t).Hosts {
					if h.Host == "w2" { // removed by the recorded remove-node before
						if h.Status != events.StatusUnchanged {
							t.Errorf("w2: %s %q, want unchanged (no K3s)", h.Status, h.Message)
						}
						continue
					}
					if h.Status != events.StatusChanged || !strings.Contains(h.Message, "uninstalled") {
						t.Errorf("%s: %s %q, want K3s uninstalled", h.Host, h.Status, h.Message)
					}
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, c := newReplayRunTier(t, tc.name, tc.tier)
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			opts := tc.opts
			opts.InsecureIgnoreHostKey = true
			in := New(c, r.options(opts), r)
			err := tc.run(ctx, in, r)
			tc.check(t, outcome{r: r, err: err})
			if u := r.unanswered(); len(u) > 0 {
				t.Errorf("calls the transcripts could not answer: %v", u)
			}
		})
	}
}

// TestReplayLostAgent replays a fresh install in which w1's host is lost as its K3s is
// started: the run must fail naming w1 as unreachable, and still bring up the others.
func TestReplayLostAgent(t *testing.T) {
	r, c := newReplayRun(t, "sim-1s2a")
	w1 := r.hosts["w1"]
	w1.Rewrite = func(e transcript.Entry) transcript.Entry {
		if strings.HasPrefix(e.Label, "start and enable") {
			w1.Lose(errors.New("keepalive: no answer from the host"))
		}
		return e
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := New(c, r.options(Options{InsecureIgnoreHostKey: true, Timeout: 20 * time.Second}), r).Apply(ctx)
	if err == nil {
		t.Fatalf("apply succeeded with w1 lost\n%s", r.log())
	}
	if !strings.Contains(err.Error(), "w1") {
		t.Errorf("the failure does not name w1: %v", err)
	}
	for _, h := range r.summary(t).Hosts {
		switch h.Host {
		case "w1":
			if h.Status != events.StatusFailed {
				t.Errorf("w1: %s %q, want failed", h.Status, h.Message)
			}
		default:
			if h.Status != events.StatusChanged {
				t.Errorf("%s: %s %q, want changed", h.Host, h.Status, h.Message)
			}
		}
	}
}

func noErr(t *testing.T, err error, r *replayRun) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v\n%s", err, r.log())
	}
}

func kindOf(err error) Kind {
	const none Kind = -1
	var f *Failure
	if errors.As(err, &f) {
		return f.Kind
	}
	return none
}
