// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/k3strap/k3strap/inventory"
)

// TestStaticChecks: the checks that read only the inventory are marked static; all others
// need facts.
func TestStaticChecks(t *testing.T) {
	var got []string
	for _, c := range StaticChecks() {
		got = append(got, c.ID())
	}
	want := []string{"ServerCount", "CriticalConfig", "CloudController", "FirstNodeTaints", "RancherAgentTolerations", "RancherVersion", "AirgapRelease"}
	if !slices.Equal(got, want) {
		t.Errorf("static checks = %v, want %v", got, want)
	}
	// A static check must not depend on facts: with none at all it finds the same as with good ones.
	c := f1Cluster(t)
	withFacts := input(c, nil)
	for _, chk := range StaticChecks() {
		a, b := chk.Run(withFacts), chk.Run(&Input{Cluster: c})
		if len(a) != len(b) {
			t.Errorf("%s: %d findings with facts, %d without", chk.ID(), len(a), len(b))
		}
	}
}

// TestRunStatic: the F1 inventory fails CloudController without any facts; host checks (SSH:
// no facts) do not run.
func TestRunStatic(t *testing.T) {
	r := RunStatic(&Input{Cluster: f1Cluster(t)}, Ignore{})
	var ids []string
	for _, f := range r.Errors() {
		ids = append(ids, f.ID)
	}
	if !slices.Contains(ids, "CloudController") {
		t.Errorf("errors %v lack CloudController", ids)
	}
	for _, f := range r.Findings {
		if !checkByID(t, f.ID).Static() {
			t.Errorf("host check ran: %s", f)
		}
	}
	ign, _ := ParseIgnore([]string{"CloudController"})
	if RunStatic(&Input{Cluster: f1Cluster(t)}, ign).HasErrors() {
		t.Error("ignored CloudController still an error")
	}
	if !RunStatic(nil, Ignore{}).HasErrors() {
		t.Error("nil input passed")
	}
}

func airgapCluster(version string) *inventory.Cluster {
	c := newCluster(host("cp1", inventory.RoleServer), host("w1", inventory.RoleAgent))
	c.Spec.K3s.Version = version
	c.Spec.K3s.Install = inventory.Airgap
	c.Spec.K3s.Airgap = map[string]inventory.AirgapArtifacts{"amd64": {Binary: "/art/k3s"}, "arm64": {Binary: "/art/k3s-arm64"}}
	return c
}

func TestAirgapRelease(t *testing.T) {
	c := airgapCluster("v1.31.4+k3s1")
	online := newCluster(host("cp1", inventory.RoleServer))
	runCases(t, "AirgapRelease", []checkCase{
		{"online install", &Input{Cluster: online, BinaryReleases: map[string]BinaryRelease{"amd64": {File: "/x", Release: "v1.36.3+k3s1"}}}, nil},
		{"not read", &Input{Cluster: c}, nil},
		{"same release", &Input{Cluster: c, BinaryReleases: map[string]BinaryRelease{
			"amd64": {File: "/art/k3s", Release: "v1.31.4+k3s1"}, "arm64": {File: "/art/k3s-arm64", Release: "v1.31.4+k3s1"}}}, nil},
		{"other release", &Input{Cluster: c, BinaryReleases: map[string]BinaryRelease{
			"amd64": {File: "/art/k3s", Release: "v1.36.3+k3s1"}, "arm64": {File: "/art/k3s-arm64", Err: errors.New("no K3s release found")}}}, []want{
			errW("cp1, w1", "spec.k3s.version is v1.31.4+k3s1 but the airgap binary /art/k3s is v1.36.3+k3s1").withFix("spec.k3s.version: v1.36.3+k3s1", "/art/k3s"),
			warnW("cp1, w1", "/art/k3s-arm64", "no K3s release found"),
		}},
	})
}

// TestReadBinaryReleases reads the release of a local file holding K3s's version string.
func TestReadBinaryReleases(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "k3s")
	if err := os.WriteFile(bin, []byte("\x7fELF...k3s version v1.36.3+k3s1 (0123abcd)..."), 0o755); err != nil {
		t.Fatal(err)
	}
	c := airgapCluster("v1.31.4+k3s1")
	c.Spec.K3s.Airgap = map[string]inventory.AirgapArtifacts{"amd64": {Binary: bin}, "arm64": {Binary: filepath.Join(dir, "missing")}}
	got := ReadBinaryReleases(c)
	if got["amd64"].Release != "v1.36.3+k3s1" || got["amd64"].File != bin || got["amd64"].Err != nil {
		t.Errorf("amd64 = %+v", got["amd64"])
	}
	if got["arm64"].Err == nil {
		t.Errorf("arm64 = %+v", got["arm64"])
	}
	r := RunStatic(&Input{Cluster: c, BinaryReleases: got}, Ignore{})
	if errs := r.Errors(); len(errs) != 1 || errs[0].ID != "AirgapRelease" {
		t.Errorf("errors = %v", errs)
	}
	if ReadBinaryReleases(newCluster(host("cp1", inventory.RoleServer))) != nil {
		t.Error("online install read binaries")
	}
}
