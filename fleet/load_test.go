// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/inventory"
)

// site is a site inventory of one server; extra is indented under spec.
func site(name, addr, extra string) string {
	return `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: ` + name + `
spec:
` + extra + `  hosts:
    - name: cp1
      address: ` + addr + `
      role: server
`
}

// writeFiles writes name → content under a new temporary directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func load(t *testing.T, dir string, opts LoadOptions) (*Fleet, inventory.ErrorList) {
	t.Helper()
	opts.SkipFileChecks = true
	f, err := Load(filepath.Join(dir, "fleet.yaml"), opts)
	if err == nil {
		return f, nil
	}
	var il inventory.ErrorList
	if !errors.As(err, &il) {
		t.Fatalf("Load: %v", err)
	}
	return nil, il
}

const fleetHead = `apiVersion: k3strap.io/v1alpha1
kind: Fleet
metadata:
  name: stores
spec:
`

// TestLoadSites: sites come in fleet order (a glob's files sorted), named by their
// inventories, with the labels of their entry.
func TestLoadSites(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"fleet.yaml": fleetHead + `  sites:
    - path: hq.yaml
    - path: "eu/*.yaml"
      labels: {region: eu}
  defaults:
    k3s: {version: v1.36.3+k3s1}
`,
		"hq.yaml":      site("hq", "192.0.2.1", ""),
		"eu/b.yaml":    site("berlin", "192.0.2.3", ""),
		"eu/a.yaml":    site("amsterdam", "192.0.2.2", ""),
		"eu/notes.txt": "not a site",
	})
	f, errs := load(t, dir, LoadOptions{})
	if errs != nil {
		t.Fatal(errs)
	}
	var got []string
	for _, s := range f.Sites {
		got = append(got, s.Name+":"+filepath.Base(s.Path)+":"+s.Labels["region"])
	}
	if want := "hq:hq.yaml: amsterdam:a.yaml:eu berlin:b.yaml:eu"; strings.Join(got, " ") != want {
		t.Errorf("sites %v, want %s", got, want)
	}
	if !IsFleetFile(filepath.Join(dir, "fleet.yaml")) || IsFleetFile(filepath.Join(dir, "hq.yaml")) || IsFleetFile(filepath.Join(dir, "missing.yaml")) {
		t.Error("IsFleetFile does not tell a fleet from an inventory")
	}
}

// TestLoadErrors: every problem names the file, line and column where it stands (the fleet
// file, the site file, or the fleet's defaults for a default a site took) and how to fix it.
func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  []string // substrings of the error list, in order
	}{
		{"unknown field", map[string]string{"fleet.yaml": fleetHead + "  sites: [{path: a.yaml}]\n  rollot: {canary: 1}\n", "a.yaml": site("a", "192.0.2.1", "")},
			[]string{"fleet.yaml:7:3: unknown field \"rollot\" in spec — fix: did you mean rollout?"}},
		{"bad policy", map[string]string{"fleet.yaml": fleetHead + "  sites: [{path: a.yaml}]\n  rollout:\n    batch: lots\n    maxFailedSites: 120%\n    canary: -1\n    orderBy: \"not a label\"\n", "a.yaml": site("a", "192.0.2.1", "")},
			[]string{"fleet.yaml:8:12: rollout.batch \"lots\" is neither a number of sites nor a percentage", "fleet.yaml:9:21: rollout.maxFailedSites \"120%\" is not a percentage", "fleet.yaml:10:13: rollout.canary -1 is negative", "fleet.yaml:11:14: \"not a label\" is not a label key"}},
		{"bad unreachable policy", map[string]string{"fleet.yaml": fleetHead + "  sites: [{path: a.yaml}]\n  rollout:\n    unreachable:\n      attempts: 500\n      retryAfter: 20m\n      maxWait: 5m\n      countAsFailed: maybe\n", "a.yaml": site("a", "192.0.2.1", "")},
			[]string{"fleet.yaml:12:22: ", "countAsFailed"}},
		{"unreachable policy out of range", map[string]string{"fleet.yaml": fleetHead + "  sites: [{path: a.yaml}]\n  rollout:\n    unreachable:\n      attempts: 500\n      retryAfter: 20m\n      maxWait: 5m\n      retyAfter: 1s\n", "a.yaml": site("a", "192.0.2.1", "")},
			[]string{"fleet.yaml:12:7: unknown field \"retyAfter\" in spec.rollout.unreachable — fix: did you mean retryAfter?"}},
		{"unreachable policy values", map[string]string{"fleet.yaml": fleetHead + "  sites: [{path: a.yaml}]\n  rollout:\n    unreachable:\n      attempts: 500\n      retryAfter: 20m\n      maxWait: 5m\n", "a.yaml": site("a", "192.0.2.1", "")},
			[]string{"fleet.yaml:9:17: rollout.unreachable.attempts 500 is not between 1 and 100 — fix: give how many times a wave tries an unreachable site",
				"fleet.yaml:10:19: rollout.unreachable.retryAfter 20m0s is longer than maxWait 5m0s: no retry could start — fix: make retryAfter at most maxWait"}},
		{"missing and unmatched", map[string]string{"fleet.yaml": fleetHead + "  sites:\n    - path: gone.yaml\n    - path: \"x/*.yaml\"\n"},
			[]string{"fleet.yaml:7:13: site inventory", "gone.yaml does not exist", "fleet.yaml:8:13: \"x/*.yaml\" matches no file"}},
		{"twice", map[string]string{"fleet.yaml": fleetHead + "  sites:\n    - path: a.yaml\n    - path: \"*.yaml\"\n", "a.yaml": site("a", "192.0.2.1", ""), "b.yaml": site("a", "192.0.2.2", "")},
			[]string{"fleet.yaml:8:13: ", "a.yaml is already a site (spec.sites[0])", "fleet.yaml:8:13: site a (metadata.name of", "is also the name of"}},
		{"site problem", map[string]string{"fleet.yaml": fleetHead + "  sites: [{path: a.yaml}]\n", "a.yaml": site("a", "192.0.2.1", "  k3s: {version: v1.36.3+k3s1, cloudControler: embedded}\n")},
			[]string{"a.yaml:6:32: unknown field \"cloudControler\" in spec.k3s — fix: did you mean cloudController?"}},
		{"bad default reported once at the fleet", map[string]string{"fleet.yaml": fleetHead + "  sites: [{path: \"*.yaml\"}]\n  defaults:\n    k3s:\n      version: \"1.36.3\"\n",
			"a.yaml": site("a", "192.0.2.1", ""), "b.yaml": site("b", "192.0.2.2", ""), "c.yaml": site("c", "192.0.2.3", "  k3s: {version: v1.36.3+k3s1}\n")},
			[]string{"fleet.yaml:9:16: K3s version \"1.36.3\" is not a K3s release (in 2 site inventories: a.yaml, ...) — fix: K3s releases look like v1.31.4+k3s1: write v1.36.3+k3s1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, c.files)
			_, errs := load(t, dir, LoadOptions{})
			if errs == nil {
				t.Fatal("loaded")
			}
			text := strings.ReplaceAll(errs.Error(), dir+"/", "")
			rest := text
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("errors lack %q (in order):\n%s", w, text)
				}
				rest = rest[i+len(w):]
			}
			if c.name == "bad default reported once at the fleet" && strings.Count(text, "is not a K3s release") != 1 {
				t.Errorf("the default's problem is not reported once:\n%s", text)
			}
		})
	}
}

// TestDefaultsMerge: field by field, a site keeps what it sets and takes the fleet's defaults
// for the rest, group by group (docs/fleet.md#defaults); a command-line override beats both.
func TestDefaultsMerge(t *testing.T) {
	fleetFile := fleetHead + `  sites: [{path: "sites/*.yaml"}]
  defaults:
    k3s:
      version: v1.36.3+k3s1
      install: airgap
      airgap: {amd64: {binary: art/k3s}}
      installScriptURL: https://mirror.example/install.sh
    ssh:
      user: ops
      port: 2222
      keyPath: keys/fleet
      connectTimeout: 7s
      bastion: {address: jump.example, user: jump}
      sudoPasswordEnv: FLEET_SUDO
    registries:
      mirrors: {docker.io: {endpoint: ["https://fleet-mirror:5000"]}}
`
	dir := writeFiles(t, map[string]string{
		"fleet.yaml": fleetFile,
		// takes everything
		"sites/bare.yaml": site("bare", "192.0.2.1", ""),
		// sets its own of every group
		"sites/own.yaml": site("own", "192.0.2.2", `  k3s:
    channel: stable
    install: online
    releaseURL: https://releases.example
  ssh:
    user: pi
    connectTimeout: 3s
    bastion: {address: own-jump}
    sudoPasswordFile: ./pw
  registries:
    mirrors: {docker.io: {endpoint: ["https://own:5000"]}}
`),
		// sets a version only: the release is its own, the artifacts the fleet's
		"sites/pinned.yaml": site("pinned", "192.0.2.3", "  k3s: {version: v1.35.1+k3s1}\n"),
	})
	f, errs := load(t, dir, LoadOptions{})
	if errs != nil {
		t.Fatal(errs)
	}
	by := map[string]*inventory.Cluster{}
	for _, s := range f.Sites {
		by[s.Name] = s.Cluster
	}
	bare, own, pinned := by["bare"], by["own"], by["pinned"]
	k := bare.Spec.K3s
	if k.Version != "v1.36.3+k3s1" || k.Install != inventory.Airgap || k.Airgap["amd64"].Binary != filepath.Join(dir, "art/k3s") {
		t.Errorf("bare k3s: %+v", k)
	}
	if k.InstallScriptURL != "" {
		t.Errorf("an airgap site took the online group: %q", k.InstallScriptURL)
	}
	s := bare.Spec.SSH
	if s.User != "ops" || s.Port != 2222 || s.KeyPath != filepath.Join(dir, "keys/fleet") || s.ConnectTimeout.D().String() != "7s" ||
		s.Bastion == nil || s.Bastion.Address != "jump.example" || s.SudoPasswordEnv != "FLEET_SUDO" {
		t.Errorf("bare ssh: %+v", s)
	}
	if r := bare.Spec.Registries; r == nil || r.Mirrors["docker.io"].Endpoint[0] != "https://fleet-mirror:5000" {
		t.Errorf("bare registries: %+v", r)
	}
	if src := bare.Overridden["spec.ssh.port"]; !strings.Contains(src, "spec.defaults.ssh.port") || !strings.Contains(src, "fleet.yaml:15:13)") {
		t.Errorf("bare's port is not recorded as the fleet's: %q", src)
	}

	k = own.Spec.K3s
	if k.Channel != "stable" || k.Version != "" || k.Install != inventory.Online || len(k.Airgap) != 0 ||
		k.ReleaseURL != "https://releases.example" || k.InstallScriptURL != "" {
		t.Errorf("own k3s: %+v", k)
	}
	s = own.Spec.SSH
	if s.User != "pi" || s.Port != 2222 || s.ConnectTimeout.D().String() != "3s" || s.Bastion.Address != "own-jump" || s.Bastion.User != "" ||
		s.SudoPasswordEnv != "" || s.SudoPasswordFile == "" {
		t.Errorf("own ssh (port is the fleet's, the rest its own): %+v", s)
	}
	if own.Spec.Registries.Mirrors["docker.io"].Endpoint[0] != "https://own:5000" {
		t.Errorf("own registries: %+v", own.Spec.Registries)
	}

	if k := pinned.Spec.K3s; k.Version != "v1.35.1+k3s1" || k.Install != inventory.Airgap || len(k.Airgap) != 1 {
		t.Errorf("pinned: %+v", k)
	}

	// A command-line override (flag or K3STRAP_*) beats the site and the fleet.
	f, errs = load(t, dir, LoadOptions{Override: func(c *inventory.Cluster) inventory.ErrorList {
		c.Spec.SSH.Port = 2200
		return nil
	}})
	if errs != nil {
		t.Fatal(errs)
	}
	for _, st := range f.Sites {
		if st.Cluster.Spec.SSH.Port != 2200 {
			t.Errorf("%s: port %d, want the override's 2200", st.Name, st.Cluster.Spec.SSH.Port)
		}
	}
}

// TestDigest: a site's digest changes with its inventory and with the defaults it takes, not
// with its secrets or with defaults it does not take.
func TestDigest(t *testing.T) {
	files := map[string]string{
		"fleet.yaml": fleetHead + "  sites: [{path: \"*.yaml\"}]\n  defaults:\n    k3s: {version: v1.36.3+k3s1}\n",
		"a.yaml":     site("a", "192.0.2.1", "  k3s: {token: K10secretsecretsecret}\n"),
		"b.yaml":     site("b", "192.0.2.2", "  k3s: {version: v1.35.1+k3s1}\n"),
	}
	digests := func(files map[string]string) map[string]string {
		t.Helper()
		f, errs := load(t, writeFiles(t, files), LoadOptions{})
		if errs != nil {
			t.Fatal(errs)
		}
		out := map[string]string{}
		for _, s := range f.Sites {
			out[s.Name] = s.Digest
			if !strings.HasPrefix(s.Digest, "sha256:") || len(s.Digest) != 71 {
				t.Errorf("digest %q", s.Digest)
			}
		}
		return out
	}
	base := digests(files)
	again := digests(files)
	if base["a"] != again["a"] || base["a"] == base["b"] {
		t.Fatalf("digests not stable or not distinct: %v %v", base, again)
	}
	with := func(name, body string) map[string]string {
		m := map[string]string{}
		for k, v := range files {
			m[k] = v
		}
		m[name] = body
		return digests(m)
	}
	if d := with("a.yaml", site("a", "192.0.2.1", "  k3s: {token: K10othertokenothertoken}\n")); d["a"] != base["a"] {
		t.Error("a new token changed the digest: the digest depends on a secret")
	}
	if d := with("a.yaml", site("a", "192.0.2.9", "  k3s: {token: K10secretsecretsecret}\n")); d["a"] == base["a"] {
		t.Error("a new address did not change the digest")
	}
	d := with("fleet.yaml", fleetHead+"  sites: [{path: \"*.yaml\"}]\n  defaults:\n    k3s: {version: v1.36.4+k3s1}\n")
	if d["a"] == base["a"] {
		t.Error("a new default version did not change the digest of a site that takes it")
	}
	if d["b"] != base["b"] {
		t.Error("a new default version changed the digest of a site that pins its own")
	}
}

// TestExampleFleet: examples/fleet loads (apart from the artifacts `make` builds, which it
// reports once, at the fleet defaults' lines) and plans its waves by region.
func TestExampleFleet(t *testing.T) {
	const path = "../examples/fleet/fleet.yaml"
	f, err := Load(path, LoadOptions{SkipFileChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := wavesText(f.PlanWaves(f.Sites, true)); got != "[canary:store-eu-berlin] [store-eu-lyon] [store-us-austin]" {
		t.Errorf("waves %s", got)
	}
	if _, err := os.Stat("../.artifacts/k3s"); err == nil {
		return // built: nothing is missing
	}
	_, err = Load(path, LoadOptions{})
	var il inventory.ErrorList
	if !errors.As(err, &il) || len(il) != 3 {
		t.Fatalf("want the 3 missing artifacts, once each: %v", err)
	}
	for _, e := range il {
		if e.File != path || e.Line == 0 || !strings.Contains(e.Message, "does not exist (in 3 site inventories") || !strings.Contains(e.Fix, "fleet file's directory") {
			t.Errorf("problem not located at the fleet's default: %v", e)
		}
	}
}
