// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firstboot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

const site = `# the site
apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: store7}
spec:
  k3s:
    version: v1.31.4+k3s1
    token: from-the-inventory   # secret
  ssh:
    user: root
  hosts:
    - name: s1
      address: 10.0.0.1
      role: server
    - name: a1
      address: 10.0.0.2
      role: agent
      labels: {site: store7}
`

func loadSite(t *testing.T, body string) (*inventory.Cluster, []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "site.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := inventory.Load(p, inventory.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c, []byte(body)
}

func fakeBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "k3strap")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho k3strap\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWriteSeeds: every host gets user-data (cloud-config, no secret), meta-data with an
// instance-id that changes with the payload, and a payload whose inventory loads back with the
// host local and no token in it, the token in a 0600 file, the unit and seed.json.
func TestWriteSeeds(t *testing.T) {
	c, raw := loadSite(t, site)
	out := t.TempDir()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	seeds, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(seeds) != 2 || seeds[0].Host != "s1" || seeds[1].Host != "a1" {
		t.Fatalf("seeds %+v", seeds)
	}
	for _, s := range seeds {
		ud, err := os.ReadFile(filepath.Join(s.Dir, "user-data"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(ud), "#cloud-config\n") || strings.Contains(string(ud), "from-the-inventory") {
			t.Errorf("%s: user-data is not a secret-free cloud-config:\n%s", s.Host, ud)
		}
		var cc map[string]any
		if err := yaml.Unmarshal(ud, &cc); err != nil || cc["runcmd"] == nil {
			t.Errorf("%s: user-data does not parse as cloud-config with runcmd: %v", s.Host, err)
		}
		md, _ := os.ReadFile(filepath.Join(s.Dir, "meta-data"))
		if !strings.Contains(string(md), "instance-id: "+s.InstanceID+"\n") || !strings.Contains(string(md), "local-hostname: "+s.Host) {
			t.Errorf("%s: meta-data %q", s.Host, md)
		}
		pay := filepath.Join(s.Dir, PayloadDir)
		st, err := os.Stat(filepath.Join(pay, TokenName))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: token file %v %v", s.Host, err, st)
		}
		tok, _ := os.ReadFile(filepath.Join(pay, TokenName))
		if string(tok) != "from-the-inventory\n" {
			t.Errorf("%s: token file does not hold the inventory's token", s.Host)
		}
		inv, _ := os.ReadFile(filepath.Join(pay, InventoryName))
		if strings.Contains(string(inv), "from-the-inventory") {
			t.Errorf("%s: the token is in the payload's inventory", s.Host)
		}
		if strings.Contains(string(inv), "ssh:") {
			t.Errorf("%s: SSH settings are in the payload's inventory:\n%s", s.Host, inv)
		}
		if !strings.Contains(string(inv), "# the site") {
			t.Errorf("%s: the inventory's comments were lost", s.Host)
		}
		bc, err := inventory.Load(filepath.Join(pay, InventoryName), inventory.LoadOptions{})
		if err != nil {
			t.Fatalf("%s: payload inventory does not load: %v", s.Host, err)
		}
		if l := bc.LocalHost(); l == nil || l.Name != s.Host {
			t.Errorf("%s: local host is %v", s.Host, l)
		}
		for _, f := range []string{"k3strap", UnitName, "install.sh", SeedInfoName} {
			if _, err := os.Stat(filepath.Join(pay, f)); err != nil {
				t.Errorf("%s: %v", s.Host, err)
			}
		}
		var info Info
		b, _ := os.ReadFile(filepath.Join(pay, SeedInfoName))
		if err := yaml.Unmarshal(b, &info); err != nil || info.Host != s.Host || info.Cluster != "store7" || !info.Created.Equal(now) {
			t.Errorf("%s: seed.json %s (%v)", s.Host, b, err)
		}
	}
	// The same input gives the same instance-id (cloud-init runs nothing again); another
	// token gives another.
	again, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t), Now: now.Add(time.Hour), Hosts: []string{"a1"}})
	if err != nil || again[0].InstanceID != seeds[1].InstanceID {
		t.Errorf("rewrite: %v, instance-id %s, was %s", err, again[0].InstanceID, seeds[1].InstanceID)
	}
	c.Spec.K3s.Token = ""
	other, err := Write(c, raw, "another-token", SeedOptions{Out: out, Binary: fakeBinary(t), Hosts: []string{"a1"}})
	if err != nil || other[0].InstanceID == seeds[1].InstanceID {
		t.Errorf("new token: %v, instance-id unchanged %s", err, other[0].InstanceID)
	}
}

// TestWriteGeneratesOneToken: without a token anywhere, the first Write generates one and
// later Writes into the same directory reuse it (boxes seeded apart join one cluster).
func TestWriteGeneratesOneToken(t *testing.T) {
	c, raw := loadSite(t, strings.Replace(site, "    token: from-the-inventory   # secret\n", "", 1))
	out := t.TempDir()
	if _, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t), Hosts: []string{"s1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t), Hosts: []string{"a1"}}); err != nil {
		t.Fatal(err)
	}
	t1, _ := os.ReadFile(filepath.Join(out, "s1", PayloadDir, TokenName))
	t2, _ := os.ReadFile(filepath.Join(out, "a1", PayloadDir, TokenName))
	if len(strings.TrimSpace(string(t1))) < 32 || string(t1) != string(t2) {
		t.Errorf("tokens differ or are short: %d %d bytes", len(t1), len(t2))
	}
}

// TestWriteUnknownHost: a seed for a host not in the inventory is a SeedError naming it, the
// file and the hosts there are; nothing is written.
func TestWriteUnknownHost(t *testing.T) {
	c, raw := loadSite(t, site)
	out := filepath.Join(t.TempDir(), "seeds")
	_, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t), Hosts: []string{"a9"}})
	var se SeedError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), `no host "a9"`) || !strings.Contains(err.Error(), "s1, a1") || !strings.Contains(err.Error(), c.Source) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output written for a refused seed: %v", err)
	}
	if _, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t), BundleOnMedia: "media/site.tar"}); !errors.As(err, &se) {
		t.Errorf("relative --bundle-on-media: %v", err)
	}
}

// TestSeedClock: a clock before the seed's creation (less a day) is refused with a fix; a day
// early or any later time passes.
func TestSeedClock(t *testing.T) {
	created := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	info := Info{Created: created}
	var ce *ClockError
	if err := CheckSeedClock(time.Date(1970, 1, 1, 0, 0, 5, 0, time.UTC), info); !errors.As(err, &ce) || !strings.Contains(ce.Msg, "1970-01-01") || !strings.Contains(ce.Fix, "timedatectl") {
		t.Errorf("1970 clock: %v", err)
	}
	for _, ok := range []time.Time{created.Add(-23 * time.Hour), created, created.AddDate(1, 0, 0)} {
		if err := CheckSeedClock(ok, info); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestStatusAndCollector: a failed preflight's findings (check, message, fix) become the
// status; the status file, its JSON and the banner lines say failure, fix and exit meaning.
func TestStatusAndCollector(t *testing.T) {
	var passed int
	col := &Collector{Next: events.SinkFunc(func(events.Event) { passed++ })}
	col.Emit(events.Event{Type: events.HostStep, Finding: &events.PreflightResult{Check: "CloudController", Severity: "error", Message: "the embedded cloud controller is disabled", Fix: "set cloudController: external"}})
	col.Emit(events.Event{Type: events.HostStep, Finding: &events.PreflightResult{Check: "Swap", Severity: "warning", Message: "swap on"}})
	col.Emit(events.Event{Type: events.Error, Phase: events.PhasePreflight, Error: &events.ErrorInfo{Message: "preflight found 1 error"}})
	if passed != 3 {
		t.Errorf("%d events passed on, want 3", passed)
	}
	st := Status{Cluster: "store7", Host: "s1", State: StateFailed, ExitCode: 3, ExitMeaning: "preflight failed", Started: time.Now()}
	col.Fill(&st)
	if st.Step != "preflight" || !strings.Contains(st.Message, "CloudController: the embedded") || st.Fix != "CloudController: set cloudController: external" || strings.Contains(st.Message, "Swap") {
		t.Fatalf("status %+v", st)
	}
	dir, root := t.TempDir(), t.TempDir()
	if err := (Reporter{Dir: dir, Root: root}).Write(st); err != nil {
		t.Fatal(err)
	}
	txt, _ := os.ReadFile(filepath.Join(dir, StatusName))
	for _, want := range []string{"state:   failed", "fix:     CloudController: set cloudController: external", "exit:    3 (preflight failed)", "journalctl -u " + UnitName} {
		if !strings.Contains(string(txt), want) {
			t.Errorf("status file lacks %q:\n%s", want, txt)
		}
	}
	back, err := ReadStatus(dir)
	if err != nil || back.State != StateFailed || back.Fix != st.Fix || back.Updated.IsZero() {
		t.Errorf("ReadStatus %+v %v", back, err)
	}
	for _, p := range []string{MotdPath, IssuePath} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || !strings.Contains(string(b), "s1 FAILED at step preflight (exit 3, preflight failed)") || !strings.Contains(string(b), "fix: CloudController") {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	ok := &Collector{}
	ok.Emit(events.Event{Type: events.Summary, Summary: &events.SummaryInfo{Hosts: []events.HostResult{{Host: "s1", Status: events.StatusUnchanged}}}})
	st = Status{Host: "s1", State: StateConverged}
	ok.Fill(&st)
	if st.Changed || !strings.Contains(st.Line(), "nothing changed") {
		t.Errorf("unchanged run: %+v %q", st, st.Line())
	}
}
