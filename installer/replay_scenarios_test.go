// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/installer/remote/transcript"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/preflight"
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
		name, tier, config string
		// inv, when set, changes the inventory (inventoryText of tier and config) the way
		// record.sh changed the one it recorded the scenario with.
		inv func(string) string
		// speed, when set, divides the recorded pace of the hosts' streams (a scenario whose
		// steps wait on them, replayed faster to keep the package's tests short).
		speed float64
		run   func(ctx context.Context, in *Installer, r *replayRun) error
		opts  Options
		check func(t *testing.T, o outcome)
	}{
		{name: "sim-f1-preflight", tier: "one", config: replayF1Config, run: func(ctx context.Context, in *Installer, _ *replayRun) error {
			_, err := in.Preflight(ctx)
			return err
		}, check: func(t *testing.T, o outcome) {
			if kindOf(o.err) != KindPreflight || !strings.Contains(fmt.Sprint(o.err), "CloudController") {
				t.Fatalf("preflight of an F1 inventory: %v, want a CloudController error\n%s", o.err, o.r.log())
			}
		}},
		{name: "sim-f1-diagnosed", tier: "one", config: replayF1Config,
			opts: Options{IgnorePreflight: mustIgnore(t, "CloudController"), StallGrace: 5 * time.Second, Timeout: 3 * time.Minute},
			run:  func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Apply(ctx) },
			check: func(t *testing.T, o outcome) {
				var f *Failure
				if !errors.As(o.err, &f) || f.Kind != KindBringUp || f.Info.Diagnosis != "F1-cloud-controller" {
					t.Fatalf("apply with F1: %v, want the F1 diagnosis\n%s", o.err, o.r.log())
				}
				if !strings.Contains(f.Info.Fix, "cloudController") {
					t.Errorf("the fix does not say how: %s", f.Info.Fix)
				}
				for _, h := range o.r.summary(t).Hosts {
					if h.Host != "cp1" && strings.Contains(h.Message, "enabled and started") {
						t.Errorf("%s: %q: an agent started although the first server never came up", h.Host, h.Message)
					}
				}
			}},
		{name: "sim-conflict", tier: "two", opts: Options{ReconcileTaints: true},
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Apply(ctx) },
			check: func(t *testing.T, o outcome) {
				noErr(t, o.err, o.r)
				if !strings.Contains(o.r.log(), "by-hand") || !strings.Contains(o.r.log(), "tier") {
					t.Errorf("the label changed by hand is not reported as repaired:\n%s", o.r.log())
				}
				// The node write answered 409 Conflict and the one after it were both asked
				// (the read-modify-write retried through the API).
				for _, u := range o.r.hosts["cp1"].Unused(transcript.OpHTTP) {
					if strings.HasPrefix(u, "http PUT ") {
						t.Errorf("the recorded node write %s was not replayed: the conflict was not retried", u)
					}
				}
			}},
		{name: "sim-rotate-certificates", tier: "one", run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.RotateCertificates(ctx) },
			check: func(t *testing.T, o outcome) { noErr(t, o.err, o.r) }},
		{name: "sim-fresh-dryrun", tier: "one", opts: Options{DryRun: true, DetailedExitCode: true},
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Apply(ctx) },
			check: func(t *testing.T, o outcome) {
				if kindOf(o.err) != KindChangesPending {
					t.Fatalf("dry-run on fresh hosts: %v, want changes pending\n%s", o.err, o.r.log())
				}
				for _, h := range o.r.summary(t).Hosts {
					if len(h.Changes) == 0 {
						t.Errorf("%s: no pending change listed for a fresh host", h.Host)
					}
				}
				for name, h := range o.r.hosts {
					if b := h.Written(k3s.PathConfig); b != nil {
						t.Errorf("%s: a dry-run wrote config.yaml", name)
					}
				}
			}},
		{name: "sim-doctor-fix", tier: "two", run: func(ctx context.Context, in *Installer, r *replayRun) error {
			bundle := filepath.Join(r.dir, "bundle.tar.gz")
			rep, err := in.Doctor(ctx, DoctorRequest{Fix: true, Confirm: func([]string) bool { return true }, Bundle: bundle})
			if rep == nil {
				return fmt.Errorf("no report: %w", err)
			}
			if st, serr := os.Stat(bundle); serr != nil || st.Size() == 0 {
				return fmt.Errorf("no support bundle: %v", serr)
			}
			if !strings.Contains(strings.Join(rep.Repaired, "\n"), "w2") {
				return fmt.Errorf("w2's label not repaired: %v (%v)", rep.Repaired, err)
			}
			return nil
		}, check: func(t *testing.T, o outcome) { noErr(t, o.err, o.r) }},
		{name: "sim-rotate-token", tier: "one", run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.RotateToken(ctx) },
			check: func(t *testing.T, o outcome) { noErr(t, o.err, o.r) }},
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
		{name: "sim-suc-stall", tier: "one", inv: upgradeInventory, opts: Options{StallGrace: 5 * time.Second},
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.UpgradeSUC(ctx) },
			check: func(t *testing.T, o outcome) {
				// w2 carries a taint set by hand (by-hand=yes:NoSchedule) the Plans do not
				// tolerate: its job's pod stays Pending, the watch names the taint.
				var f *Failure
				if !errors.As(o.err, &f) || f.Phase != events.PhaseSUCWatch || f.Host != "w2" || f.Info.Diagnosis != checkid.SUCUntoleratedTaint {
					t.Fatalf("upgrade --via suc with an untolerated taint on w2: %v, want the watch to fail on w2 with %s\n%s", o.err, checkid.SUCUntoleratedTaint, o.r.log())
				}
				if !strings.Contains(f.Info.Message+strings.Join(f.Info.Evidence, "\n"), "by-hand") {
					t.Errorf("the diagnosis does not name the taint: %q %q", f.Info.Message, f.Info.Evidence)
				}
				if !strings.Contains(f.Info.Resume, "upgrade --watch") {
					t.Errorf("the failure does not say how to watch again: %q", f.Info.Resume)
				}
				want := map[string]events.Status{"cp1": events.StatusChanged, "w1": events.StatusChanged, "w2": events.StatusFailed}
				for _, h := range o.r.summary(t).Hosts {
					if h.Status != want[h.Host] {
						t.Errorf("%s: %s %q, want %s", h.Host, h.Status, h.Message, want[h.Host])
					}
				}
				// The deploy created the controller, its RBAC and both Plans through the API as
				// the recorded run did: no recorded create left unasked.
				for _, u := range o.r.hosts["cp1"].Unused(transcript.OpHTTP) {
					if strings.HasPrefix(u, "http POST ") {
						t.Errorf("the recorded create %s was not asked: the deploy skipped an object", u)
					}
				}
			}},
		{name: "sim-suc-watch", tier: "one", inv: upgradeInventory, opts: Options{StallGrace: 20 * time.Second},
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.WatchUpgrade(ctx) },
			check: func(t *testing.T, o outcome) {
				// The taint removed, w2's job runs: the watch ends with every node on the version.
				noErr(t, o.err, o.r)
				for _, h := range o.r.summary(t).Hosts {
					if h.Status == events.StatusFailed || h.Status == events.StatusSkipped {
						t.Errorf("%s: %s %q, want upgraded", h.Host, h.Status, h.Message)
					}
				}
				if !strings.Contains(o.r.log(), "3 nodes on v1.36.4+k3s1") {
					t.Errorf("the watch does not end with the 3 nodes on v1.36.4+k3s1:\n%s", o.r.log())
				}
				var w2 []string
				for _, e := range o.r.events {
					if e.Host == "w2" && e.Phase == events.PhaseSUCWatch && e.Type == events.HostStep {
						w2 = append(w2, e.Step)
					}
				}
				if j := strings.Join(w2, ","); !strings.Contains(j, events.SUCStepUpgrade) || !strings.HasSuffix(j, events.SUCStepUncordon) {
					t.Errorf("w2's steps %v: want it upgraded, then uncordoned", w2)
				}
			}},
		{name: "sim-cni-flannel", tier: "one", inv: cniInventory, speed: 4,
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Apply(ctx) },
			check: func(t *testing.T, o outcome) {
				// K3s without its own flannel, the standalone flannel rolled out by k3strap and
				// waited for on every node.
				noErr(t, o.err, o.r)
				for name, h := range o.r.hosts {
					if cfg := string(h.Written(k3s.PathConfig)); name == "cp1" && !strings.Contains(cfg, "flannel-backend: none") {
						t.Errorf("cp1's config.yaml does not turn K3s's flannel off:\n%s", cfg)
					}
				}
				var finished string
				for _, e := range o.r.events {
					if e.Phase == events.PhaseCNI && e.Type == events.PhaseFinished {
						finished = e.Message
					}
				}
				if !strings.Contains(finished, "kube-flannel") || !strings.Contains(finished, "runs on 3 node(s)") {
					t.Errorf("the rollout's end %q does not say flannel runs on the 3 nodes\n%s", finished, o.r.log())
				}
				for _, h := range o.r.summary(t).Hosts {
					if h.Status != events.StatusChanged {
						t.Errorf("%s: %s %q, want changed", h.Host, h.Status, h.Message)
					}
				}
			}},
		{name: "sim-backup-to", tier: "one", inv: haInventory, run: func(ctx context.Context, in *Installer, r *replayRun) error {
			to := filepath.Join(r.dir, "backups")
			saved, err := in.Backup(ctx, BackupRequest{Name: "before", To: to})
			if err != nil {
				return err
			}
			// The snapshot, the token and their checksums copied, each 0600.
			name := filepath.Base(saved)
			if !strings.HasPrefix(name, "before-cp1-") {
				return fmt.Errorf("snapshot %q, want before-cp1-…", saved)
			}
			for _, f := range []string{name, name + ".token", name + ".sha256"} {
				fi, err := os.Stat(filepath.Join(to, f))
				if err != nil {
					return err
				}
				if fi.Mode().Perm() != 0o600 {
					return fmt.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
				}
			}
			tok, err := os.ReadFile(filepath.Join(to, name+".token"))
			if err != nil || string(tok) != replayToken {
				return fmt.Errorf("the copied token is not the server's: %v", err)
			}
			sums, err := os.ReadFile(filepath.Join(to, name+".sha256"))
			if want := fmt.Sprintf("%x  %s.token", sha256.Sum256(tok), name); err != nil || !strings.Contains(string(sums), want) {
				return fmt.Errorf("%s.sha256 %q lacks %q (%v)", name, sums, want, err)
			}
			return nil
		}, check: func(t *testing.T, o outcome) { noErr(t, o.err, o.r) }},
		{name: "sim-backup-list", tier: "one", inv: haInventory, run: func(ctx context.Context, in *Installer, _ *replayRun) error {
			snaps, err := in.BackupList(ctx)
			if err != nil {
				return err
			}
			// The snapshot the recorded backup saved is listed, with where it is and its size.
			for _, sn := range snaps {
				if strings.HasPrefix(sn.Name, "before-cp1-") && strings.HasSuffix(sn.Location, "/"+sn.Name) && sn.Size != "" {
					return nil
				}
			}
			return fmt.Errorf("no before-cp1-… snapshot with its location and size in %+v", snaps)
		}, check: func(t *testing.T, o outcome) { noErr(t, o.err, o.r) }},
		{name: "sim-restore-missing", tier: "one", inv: haInventory,
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Restore(ctx, "nosuch") },
			check: func(t *testing.T, o outcome) {
				// Refused as invalid input, naming the snapshot and the host, before any server
				// is stopped.
				var f *Failure
				if !errors.As(o.err, &f) || f.Kind != KindInvalid || f.Phase != events.PhaseRestoreCheck || !strings.Contains(f.Info.Message, "nosuch") || f.Host != "cp1" {
					t.Fatalf("restore of a snapshot that does not exist: %v, want an invalid-input failure at restore-check naming it\n%s", o.err, o.r.log())
				}
				if !strings.Contains(f.Info.Fix, "backup list") {
					t.Errorf("the fix does not point at backup list: %q", f.Info.Fix)
				}
				for _, e := range o.r.events {
					if e.Phase == events.PhaseRestoreStop || e.Phase == events.PhaseClusterReset {
						t.Errorf("a refused restore went on to %s: %s %s", e.Phase, e.Host, e.Message)
					}
				}
			}},
		{name: "sim-restore", tier: "one", inv: haInventory, speed: 4,
			run: func(ctx context.Context, in *Installer, _ *replayRun) error { return in.Restore(ctx, "before") },
			check: func(t *testing.T, o outcome) {
				// The newest snapshot named "before" found on cp1, the cluster reset from it on
				// cp1, cp2 rejoined with its etcd data moved aside, the agent restarted.
				noErr(t, o.err, o.r)
				steps := map[string]events.Event{}
				for _, e := range o.r.events {
					if e.Type == events.HostStep {
						steps[string(e.Phase)+" "+e.Host+" "+e.Step] = e
					}
				}
				for key, want := range map[string]string{
					"restore-check cp1 snapshot":      "restoring /var/lib/rancher/k3s/server/db/snapshots/before-cp1-",
					"cluster-reset cp1 cluster-reset": "etcd restored from the snapshot",
					"rejoin-servers cp2 db":           "etcd data moved to ",
				} {
					if e, ok := steps[key]; !ok || !strings.Contains(e.Message, want) {
						t.Errorf("step %s: %q, want %q\n%s", key, e.Message, want, o.r.log())
					}
				}
				for _, h := range o.r.summary(t).Hosts {
					if h.Status != events.StatusChanged {
						t.Errorf("%s: %s %q, want changed", h.Host, h.Status, h.Message)
					}
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: the replays keep the recorded pace of streams, which a supervisor
			// judges; on a loaded machine their timers would drift.
			if _, err := os.Stat(filepath.Join("testdata", "transcripts", tc.name)); err != nil {
				t.Fatalf("scenario not recorded (installer/testdata/transcripts/record.sh): %v", err)
			}
			text := inventoryText(tc.tier, tc.config)
			if tc.inv != nil {
				text = tc.inv(text)
			}
			r, c := newReplayRunInventory(t, tc.name, text)
			for _, h := range r.hosts {
				h.Speed = tc.speed
			}
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

// upgradeInventory is the inventory with the version record.sh's upgrade.yaml asks for.
func upgradeInventory(s string) string {
	return strings.Replace(s, "version: v1.36.3+k3s1", "version: v1.36.4+k3s1", 1)
}

// cniInventory is the inventory with the standalone flannel of record.sh's cni.yaml.
func cniInventory(s string) string {
	return strings.Replace(s, "\n  ssh:\n", "\n  cni:\n    type: flannel-standalone\n  ssh:\n", 1)
}

// haInventory is the inventory of record.sh's ha.yaml: the second host a server, cp2 (two
// servers: embedded etcd).
func haInventory(s string) string {
	return strings.Replace(s, "    - name: w1\n      address: 10.125.0.12\n      role: agent\n      taints: [\"dedicated=edge:NoSchedule\"]\n",
		"    - name: cp2\n      address: 10.125.0.12\n      role: server\n", 1)
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

func mustIgnore(t *testing.T, ids ...string) preflight.Ignore {
	ign, err := preflight.ParseIgnore(ids)
	if err != nil {
		t.Fatal(err)
	}
	return ign
}

// TestReplayUnreachableAgent: w2 cannot be reached at all: preflight fails naming it, and no
// host is changed.
func TestReplayUnreachableAgent(t *testing.T) {
	r, c := newReplayRun(t, "sim-1s2a")
	opts := r.options(Options{InsecureIgnoreHostKey: true})
	connect := opts.Connect
	opts.Connect = func(ctx context.Context, h *inventory.Host) (remote.Host, error) {
		if h.Name == "w2" {
			return nil, &remote.ConnectError{Host: "w2", Step: "connect", Err: errors.New("dial tcp 10.125.0.13:22: connect: no route to host")}
		}
		return connect(ctx, h)
	}
	err := New(c, opts, r).Apply(context.Background())
	if kindOf(err) != KindPreflight || !strings.Contains(err.Error(), "SSH") {
		t.Fatalf("apply with w2 unreachable: %v, want a preflight failure\n%s", err, r.log())
	}
	if !strings.Contains(r.log(), "w2") || !strings.Contains(r.log(), "no route to host") {
		t.Errorf("the run does not say why w2 failed:\n%s", r.log())
	}
	for name, h := range r.hosts {
		if b := h.Written(k3s.PathConfig); b != nil {
			t.Errorf("%s changed although preflight failed", name)
		}
	}
}

// TestReplayInterruptedBringUp: Ctrl-C while the first server comes up: the run ends as
// cancelled at once, and the summary says what the first server got (installed and started,
// not up yet), not "skipped".
func TestReplayInterruptedBringUp(t *testing.T) {
	r, c := newReplayRun(t, "sim-1s2a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.hosts["cp1"].Rewrite = chain(r.hosts["cp1"].Rewrite, func(e transcript.Entry) transcript.Entry {
		if e.Label == "bring-up probe" {
			time.AfterFunc(500*time.Millisecond, cancel)
		}
		return e
	})
	start := time.Now()
	err := New(c, r.options(Options{InsecureIgnoreHostKey: true}), r).Apply(ctx)
	if KindOf(err) != KindCancelled {
		t.Fatalf("interrupted apply: %v, want cancelled\n%s", err, r.log())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the interrupted run took %s to end", d)
	}
	for _, h := range r.summary(t).Hosts {
		if h.Host == "cp1" && (h.Status == events.StatusSkipped || !strings.Contains(h.Message, "not up")) {
			t.Errorf("cp1: %s %q, want what it got so far (changed, not up yet)", h.Status, h.Message)
		}
	}
}

// chain applies f, then g.
func chain(f, g func(transcript.Entry) transcript.Entry) func(transcript.Entry) transcript.Entry {
	return func(e transcript.Entry) transcript.Entry {
		if f != nil {
			e = f(e)
		}
		return g(e)
	}
}
