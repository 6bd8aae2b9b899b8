// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// dryRunSession is a session of apply --dry-run over one server whose host has K3s installed,
// enabled and running, with config.yaml holding oldConfig (its sha256) and the token in place.
func dryRunSession(t *testing.T, detailed bool, newConfig string) (*session, *hostState, *events.Recorder) {
	t.Helper()
	rec := &events.Recorder{}
	c := &inventory.Cluster{Source: "cluster.yaml", Spec: inventory.Spec{Hosts: []inventory.Host{{Name: "cp1", Address: "192.0.2.1", Role: inventory.RoleServer}}}}
	in := New(c, Options{DryRun: true, DetailedExitCode: detailed, Exit: func(err error) (int, string) {
		if KindOf(err) == KindChangesPending {
			return 9, "changes pending"
		}
		if err != nil {
			return 4, "install failed"
		}
		return 0, "success"
	}}, rec)
	s := in.newSession(commandFor("apply"))
	hs := s.first
	cfg := plan.File{Path: k3s.PathConfig, Mode: 0o600, Content: []byte(newConfig), Size: int64(len(newConfig)), Restart: true}
	cfg.SHA256 = sha(newConfig)
	tok := plan.File{Path: k3s.PathTokenFile, Mode: 0o600, Content: []byte("s3cret\n"), Size: 7, Secret: true, Restart: true, SHA256: sha("s3cret\n")}
	hs.plan = &plan.HostPlan{Host: hs.host, Service: "k3s", Airgap: true, Files: []plan.File{tok, cfg}}
	hs.facts = &facts.Host{K3s: facts.K3sInstall{Service: "k3s", ServiceEnabled: "enabled", ServiceActive: "active",
		Files: map[string]string{k3s.PathConfig: sha("old: config\n"), k3s.PathTokenFile: tok.SHA256}}}
	return s, hs, rec
}

// The dry-run's changes are machine-readable: each file with its mode and old/new sha256 (a
// secret with neither), the restart, in events (change) and per host in the summary; with
// --detailed-exitcode pending changes end the run as KindChangesPending (exit 9), nothing
// pending as success; the summary's next line after a failed dry-run suggests the dry-run
// again, never a real apply.
func TestDryRunPlan(t *testing.T) {
	s, hs, rec := dryRunSession(t, true, "new: config\n")
	hs.facts.K3s.Files = map[string]string{k3s.PathConfig: ""} // config.yaml missing: no read from the host
	hs.facts.K3s.Files[k3s.PathTokenFile] = sha("old-token\n")
	ch := s.changesFor(hs)
	// The token differs and is secret: replacing it needs no read from the host either.
	if err := s.dryRun(context.Background(), hs, ch); err != nil {
		t.Fatal(err)
	}
	err := s.changesPending(nil)
	if KindOf(err) != KindChangesPending {
		t.Fatalf("changesPending = %v, want KindChangesPending", err)
	}
	s.summary(time.Now(), err)
	var sum *events.SummaryInfo
	var changeEvents []events.Change
	for _, e := range rec.Events() {
		if e.Change != nil {
			changeEvents = append(changeEvents, *e.Change)
		}
		if e.Summary != nil {
			sum = e.Summary
		}
	}
	if sum == nil || !sum.OK || sum.ExitCode != 9 || sum.Changes != 3 || len(sum.Hosts) != 1 {
		t.Fatalf("summary %+v", sum)
	}
	got := sum.Hosts[0].Changes
	if len(got) != 3 || len(changeEvents) != 3 {
		t.Fatalf("changes %+v, events %+v", got, changeEvents)
	}
	token, cfg, svc := got[0], got[1], got[2]
	if token.Kind != events.ChangeFile || token.Path != k3s.PathTokenFile || !token.Secret || token.OldSHA256 != "" || token.NewSHA256 != "" || token.Size != 0 || token.Action != "replace" {
		t.Errorf("token change shows too much or too little: %+v", token)
	}
	if cfg.Path != k3s.PathConfig || cfg.Mode != "0600" || cfg.Action != "upload" || cfg.OldSHA256 != "" || cfg.NewSHA256 != sha("new: config\n") || !cfg.Restart {
		t.Errorf("config change: %+v", cfg)
	}
	if svc.Kind != events.ChangeService || svc.Action != "restart" || svc.Unit != "k3s" {
		t.Errorf("service change: %+v", svc)
	}
	if len(sum.Next) != 1 || !strings.Contains(sum.Next[0], "k3strap apply -f cluster.yaml") || !strings.Contains(sum.Next[0], "3 changes") {
		t.Errorf("next after a dry-run with changes: %q", sum.Next)
	}

	// Nothing to change: success, exit 0, even with --detailed-exitcode.
	s2, hs2, _ := dryRunSession(t, true, "old: config\n")
	if err := s2.dryRun(context.Background(), hs2, s2.changesFor(hs2)); err != nil {
		t.Fatal(err)
	}
	if err := s2.changesPending(nil); err != nil {
		t.Errorf("nothing pending: %v", err)
	}
	// Without --detailed-exitcode pending changes are a success.
	s3, hs3, _ := dryRunSession(t, false, "x: y\n")
	hs3.facts.K3s.Files[k3s.PathConfig] = ""
	if err := s3.dryRun(context.Background(), hs3, s3.changesFor(hs3)); err != nil {
		t.Fatal(err)
	}
	if err := s3.changesPending(nil); err != nil {
		t.Errorf("pending without --detailed-exitcode: %v", err)
	}

	// A failed dry-run: the next lines never suggest a command that changes anything.
	s4, hs4, rec4 := dryRunSession(t, true, "x: y\n")
	_ = s4.hostFailure(hs4, "facts", KindInstall, errors.New("connection lost"))
	s4.summary(time.Now(), s4.changesPending(&Failure{Kind: KindInstall, Host: "cp1"}))
	for _, e := range rec4.Events() {
		if e.Summary == nil {
			continue
		}
		if e.Summary.OK || e.Summary.ExitCode != 4 {
			t.Errorf("failed dry-run summary %+v", e.Summary)
		}
		for _, n := range e.Summary.Next {
			if strings.Contains(n, "k3strap") && !strings.Contains(n, "--dry-run") {
				t.Errorf("a failed dry-run suggests %q", n)
			}
		}
		if len(e.Summary.Next) == 0 {
			t.Error("a failed dry-run suggests nothing")
		}
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
