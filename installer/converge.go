// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// changes is what converging a host takes, decided from its facts (checksums, unit, service
// state) before anything is touched. Every state-changing step goes through it, so
// `apply --dry-run` shows exactly what apply would do.
type changes struct {
	uploads []*plan.File
	install bool
	// enable is true when the unit must be enabled: after every run of the install script
	// (which runs with INSTALL_K3S_SKIP_ENABLE; the official script disables the unit at
	// every run) and whenever the host's unit is not enabled.
	enable bool
	// verb is "start" or "restart" when the service must be (re)started, else "".
	verb string
	// activating says the unit runs but has not told systemd it is ready (docs/k3s.md
	// "Readiness of the unit"): it is neither started again nor counted as a change.
	activating bool
	why        []string
}

func (c changes) any() bool { return len(c.uploads) > 0 || c.install || c.enable || c.verb != "" }

// changesFor compares hs's plan with its facts.
func (s *session) changesFor(hs *hostState) changes {
	var ch changes
	p, f := hs.plan, hs.facts
	restart := false
	switch {
	case f.K3s.Service != p.Service:
		ch.install = true
		ch.why = append(ch.why, fmt.Sprintf("%s.service is not installed", p.Service))
	case f.K3s.ServiceEnabled != "enabled":
		// Installed but not enabled: staged by this run or an earlier one, or disabled by hand.
		ch.enable = true
		ch.why = append(ch.why, fmt.Sprintf("%s.service is not enabled", p.Service))
	}
	for i := range p.Files {
		file := &p.Files[i]
		have := f.K3s.Files[file.Path]
		if have == file.SHA256 || (file.Keep && have != "") {
			continue
		}
		ch.uploads = append(ch.uploads, file)
		if file.Restart {
			restart = true
		}
		// The install script copies the proxy environment into the unit's env file.
		if file.Path == k3s.PathBinary || file.Path == k3s.PathInstallScript || file.Path == k3s.PathProxyEnv {
			ch.install = true
		}
	}
	want := s.in.cluster.Spec.K3s.Version
	if !p.Airgap && want != "" && f.K3s.BinaryVersion != want {
		ch.install, restart = true, true
		ch.why = append(ch.why, fmt.Sprintf("K3s %s installed, %s wanted", orNone(f.K3s.BinaryVersion), want))
	}
	if !p.Airgap && f.K3s.BinaryVersion == "" {
		ch.install = true
	}
	if ch.install {
		ch.enable = true
	}
	// A unit that is activating runs: K3s tells systemd READY only once its network is up (an
	// agent well after its node is Ready), so starting it again would change nothing but the
	// report.
	ch.activating = f.K3s.ServiceActive == "activating" && f.K3s.Service == p.Service
	active := (f.K3s.ServiceActive == "active" || ch.activating) && f.K3s.Service == p.Service
	switch {
	case !active:
		ch.verb = "start"
	case restart || ch.install:
		// The install script may rewrite the unit; restart decides after it ran.
		if restart {
			ch.verb = "restart"
		}
	}
	return ch
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// convergeResult says what converge changed on a host.
type convergeResult struct {
	// upgradedFrom is the K3s version before an upgrade, "" otherwise.
	upgradedFrom string
	uploaded     []string
	installed    bool
	restarted    bool
	// enabled says the unit was enabled (after the install script, or a staged install).
	enabled bool
	// verb is how the service was brought up: "start" or "restart".
	verb    string
	started time.Time // when the service was (re)started; zero when left running
	// activating names the unit when it was left running while still activating (not READY
	// yet); "" otherwise.
	activating string
}

func (r convergeResult) changed() bool {
	return len(r.uploaded) > 0 || r.installed || r.enabled || r.restarted
}

func (r convergeResult) status() events.Status {
	if r.changed() {
		return events.StatusChanged
	}
	return events.StatusUnchanged
}

func (r convergeResult) describe() string {
	if !r.changed() {
		msg := "files, unit and service already match the inventory"
		if r.activating != "" {
			msg += "; " + r.activating + " is still activating: K3s tells systemd it is ready only once its network is up, which for an agent can take minutes after its node is Ready (nothing to do)"
		}
		return msg
	}
	var parts []string
	if r.upgradedFrom != "" {
		parts = append(parts, "upgraded from "+r.upgradedFrom)
	}
	if len(r.uploaded) > 0 {
		parts = append(parts, "wrote "+strings.Join(r.uploaded, ", "))
	}
	if r.installed {
		parts = append(parts, "ran the install script")
	}
	switch {
	case r.restarted && r.enabled && !r.installed:
		parts = append(parts, "enabled and "+r.verb+"ed the service")
	case r.restarted:
		parts = append(parts, r.verb+"ed the service")
	case r.enabled && !r.installed:
		parts = append(parts, "enabled the service")
	}
	return strings.Join(parts, "; ")
}

// converge makes one host match its plan: files whose checksum differs are uploaded
// (atomically), the install script runs when the unit is missing or the binary/script changed,
// and the service is (re)started when a file that needs it changed or it is not running.
// With --dry-run it reports instead (dryRun) and changes nothing.
func (s *session) converge(ctx context.Context, hs *hostState) (convergeResult, error) {
	ch := s.changesFor(hs)
	if s.in.opts.DryRun {
		return convergeResult{}, s.dryRun(ctx, hs, ch)
	}
	var res convergeResult
	p := hs.plan
	if ch.activating && !ch.install && ch.verb == "" {
		res.activating = p.Service
	}
	for _, file := range ch.uploads {
		if err := s.retry(ctx, hs, "upload "+file.Path, func(ctx context.Context) error { return s.upload(ctx, hs, file) }); err != nil {
			return res, s.hostFailure(hs, "upload", KindInstall, err)
		}
		res.uploaded = append(res.uploaded, file.Path)
	}
	verb := ch.verb
	if ch.install {
		var unitChanged bool
		// The install script is idempotent (it compares before it writes): safe to retry.
		err := s.retry(ctx, hs, "install", func(ctx context.Context) error {
			var err error
			unitChanged, err = s.install(ctx, hs)
			return err
		})
		if err != nil {
			return res, s.hostFailure(hs, "install", KindInstall, err)
		}
		res.installed = true
		if unitChanged && verb == "" {
			verb = "restart"
		}
	}
	if verb != "" {
		res.started = time.Now()
		// (Re)starting is not retried blindly: after a lost connection the next run's facts
		// show whether it happened. The unit is enabled right after the start is queued, in
		// the same command: enabling does not delay the start.
		if _, err := hs.c().Check(ctx, hs.startCommand(verb, ch.enable)); err != nil {
			return res, s.hostFailure(hs, "start", KindInstall, err)
		}
		res.restarted, res.verb, res.enabled = true, verb, ch.enable
		s.in.emitter(events.PhaseInstall).Step(hs.host.Name, "start", events.StatusChanged, fmt.Sprintf("%sed %s", verb, p.Service))
	} else if ch.enable {
		err := s.retry(ctx, hs, "enable", func(ctx context.Context) error {
			_, err := hs.c().Check(ctx, hs.enableCommand())
			return err
		})
		if err != nil {
			return res, s.hostFailure(hs, "enable", KindInstall, err)
		}
		res.enabled = true
	}
	s.in.emitter(events.PhaseConfigure).Step(hs.host.Name, "converge", res.status(), res.describe())
	return res, nil
}

// dryRun reports what converge would do: uploads (with a diff against the host's current file
// for text files that are not secret), the install script, the service (re)start.
func (s *session) dryRun(ctx context.Context, hs *hostState, ch changes) error {
	em := s.in.emitter(events.PhaseDryRun)
	name := hs.host.Name
	if !ch.any() {
		hs.setResult(events.StatusUnchanged, "nothing to do")
		em.Step(name, "plan", events.StatusUnchanged, "nothing to do: files, unit and service match the inventory")
		return nil
	}
	var summary []string
	for _, f := range ch.uploads {
		verb := "upload"
		if hs.facts.K3s.Files[f.Path] != "" {
			verb = "replace"
		}
		msg := fmt.Sprintf("would %s %s (mode %04o, %d bytes, sha256 %.12s)", verb, f.Path, f.Mode, f.Size, f.SHA256)
		if f.Secret {
			// No digest, no size: a digest of a secret lets anyone test guesses at it.
			msg = fmt.Sprintf("would %s %s (mode %04o): the secret changed, not shown", verb, f.Path, f.Mode)
		}
		chg := events.Change{Kind: events.ChangeFile, Action: verb, Path: f.Path, Mode: fmt.Sprintf("%04o", f.Mode), Secret: f.Secret, Restart: f.Restart}
		if !f.Secret {
			chg.Size, chg.OldSHA256, chg.NewSHA256 = f.Size, hs.facts.K3s.Files[f.Path], f.SHA256
		}
		hs.addChange(chg)
		e := events.Event{Type: events.Info, Host: name, Message: msg, Change: &chg}
		switch {
		case f.Secret && f.Shown != nil:
			// Secrets masked on both sides (registries.yaml): the diff shows mirrors and users.
			old := ""
			if hs.facts.K3s.Files[f.Path] != "" {
				b, err := hs.c().ReadFile(ctx, f.Path)
				if err != nil {
					return s.hostFailure(hs, "dry-run", KindInstall, err)
				}
				old = plan.ShownOnHost(f.Path, b)
			}
			e.Diff = unifiedDiff(f.Path, old, string(f.Shown))
		case f.Secret:
		case f.LocalPath == "":
			old := ""
			if hs.facts.K3s.Files[f.Path] != "" {
				b, err := hs.c().ReadFile(ctx, f.Path)
				if err != nil {
					return s.hostFailure(hs, "dry-run", KindInstall, err)
				}
				old = k3s.Mask(string(b))
			}
			e.Diff = unifiedDiff(f.Path, old, k3s.Mask(string(f.Content)))
		}
		em.Emit(e)
		summary = append(summary, verb+" "+f.Path)
	}
	change := func(c events.Change, msg string) {
		hs.addChange(c)
		em.Emit(events.Event{Type: events.Info, Host: name, Message: msg, Change: &c})
	}
	if ch.install {
		change(events.Change{Kind: events.ChangeInstall, Action: "run", Path: k3s.PathInstallScript, Unit: hs.plan.Service, Detail: hs.plan.ScriptSource},
			fmt.Sprintf("would run %s (%s) with %s", k3s.PathInstallScript, hs.plan.ScriptSource, strings.Join(hs.plan.InstallEnv, " ")))
		summary = append(summary, "run the install script")
	}
	if ch.verb != "" {
		change(events.Change{Kind: events.ChangeService, Action: ch.verb, Unit: hs.plan.Service}, fmt.Sprintf("would %s %s", ch.verb, hs.plan.Service))
		summary = append(summary, ch.verb+" "+hs.plan.Service)
	} else if ch.enable && !ch.install {
		change(events.Change{Kind: events.ChangeService, Action: "enable", Unit: hs.plan.Service}, fmt.Sprintf("would enable %s", hs.plan.Service))
		summary = append(summary, "enable "+hs.plan.Service)
	}
	hs.setResult(events.StatusChanged, "would "+strings.Join(summary, ", "))
	em.Step(name, "plan", events.StatusChanged, "would "+strings.Join(summary, ", "))
	return nil
}

func unifiedDiff(path, old, new string) string {
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(old), B: difflib.SplitLines(new),
		FromFile: path + " (on the host)", ToFile: path + " (k3strap)", Context: 3,
	})
	return d
}

// upload writes one planned file, reporting progress. Concurrent uploads across hosts are
// bounded by --concurrent-uploads.
func (s *session) upload(ctx context.Context, hs *hostState, f *plan.File) error {
	if f.LocalPath != "" {
		select {
		case s.uploadSlots <- struct{}{}:
			defer func() { <-s.uploadSlots }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	em := s.in.emitter(events.PhaseUpload)
	r, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	last := time.Time{}
	progress := func(sent int64) {
		if now := time.Now(); now.Sub(last) > 200*time.Millisecond || sent == f.Size {
			last = now
			em.Progress(hs.host.Name, events.Upload{File: f.Path, Bytes: sent, Total: f.Size})
		}
	}
	if rs, ok := r.(io.ReadSeeker); ok && f.LocalPath != "" && f.SHA256 != "" {
		// Artifacts resume after a dropped link (in this run after reconnecting, or in the next).
		tr, err := hs.c().WriteFileResumable(ctx, f.Path, f.Mode, rs, f.Size, f.SHA256, progress)
		em.Debug(hs.host.Name, fmt.Sprintf("upload of %s: sent %d bytes of %d from byte %d", f.Path, tr.Sent, f.Size, tr.Resumed))
		if tr.Resumed > 0 {
			em.Info(hs.host.Name, fmt.Sprintf("resumed the upload of %s at byte %d of %d (the host held a verified prefix)", f.Path, tr.Resumed, f.Size))
		}
		if err != nil {
			if tr.Sent > 0 {
				return madeProgress{err}
			}
			return err
		}
	} else if err := hs.c().WriteFile(ctx, f.Path, f.Mode, r, f.Size, progress); err != nil {
		return err
	}
	em.Progress(hs.host.Name, events.Upload{File: f.Path, Bytes: f.Size, Total: f.Size, Done: true})
	return nil
}

// install runs the install script on hs (its unit written, not enabled, not started) and says
// whether the unit or its env file changed.
func (s *session) install(ctx context.Context, hs *hostState) (unitChanged bool, err error) {
	cmd := remote.Script("install K3s", installScript, k3s.PathInstallScript).AsRoot().WithEnv(hs.plan.InstallEnv...).WithTimeout(installTimeout)
	res, err := hs.c().Check(ctx, cmd)
	if err != nil {
		return false, err
	}
	changed := strings.Contains(string(res.Stdout), "@k3strap unit-changed")
	msg := "ran " + hs.plan.ScriptSource + " (unit unchanged)"
	if changed {
		msg = "ran " + hs.plan.ScriptSource + " (unit written)"
	}
	s.in.emitter(events.PhaseInstall).Step(hs.host.Name, "install", events.StatusChanged, msg)
	return changed, nil
}
