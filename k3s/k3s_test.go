// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFlagsTable(t *testing.T) {
	tb := Flags()
	for _, c := range []struct {
		role Role
		name string
		kind Kind
		ok   bool
	}{
		{Server, "cluster-cidr", List, true},
		{Server, "disable-cloud-controller", Bool, true},
		{Server, "token", String, true},
		{Server, "node-label+", List, true},
		{Agent, "cluster-init", "", false},
		{Agent, "node-taint", List, true},
		{Server, "no-such-flag", "", false},
	} {
		kind, ok := tb.Lookup(c.role, c.name)
		if ok != c.ok || kind != c.kind {
			t.Errorf("Lookup(%s, %s) = %q, %v; want %q, %v", c.role, c.name, kind, ok, c.kind, c.ok)
		}
	}
	if s, ok := tb.Closest(Server, "flanel-backend"); !ok || s != "flannel-backend" {
		t.Errorf("Closest = %q, %v", s, ok)
	}
	if _, ok := tb.Closest(Server, "zzzzzzzzzzzzzzzzzzzzzz"); ok {
		t.Error("Closest found something for nonsense")
	}
	if n := tb.Names(Agent); !slices.IsSorted(n) || len(n) < 20 || len(tb.Names(Server)) <= len(n) {
		t.Errorf("Names: %d agent, %d server", len(n), len(tb.Names(Server)))
	}
	if _, err := ParseFlags("server\tx"); err == nil {
		t.Error("ParseFlags accepted a short row")
	}
	// Every critical and secret key is a real server flag.
	for _, k := range append(CriticalKeys(), SecretKeys()...) {
		if _, ok := tb.Lookup(Server, k); !ok {
			t.Errorf("%s is not a K3s %s server flag", k, FlagsVersion)
		}
	}
}

func TestCriticalKeysExact(t *testing.T) {
	want := []string{"cluster-cidr", "service-cidr", "cluster-dns", "cluster-domain", "disable-cloud-controller",
		"disable-helm-controller", "disable-network-policy", "disable", "secrets-encryption", "secrets-encryption-provider",
		"embedded-registry", "flannel-backend", "flannel-ipv6-masq", "flannel-external-ip", "egress-selector-mode", "supervisor-metrics"}
	got := CriticalKeys()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("CriticalKeys = %v\nwant %v", got, want)
	}
	if IsCriticalKey("disable-scheduler") || IsCriticalKey("disable-kube-proxy") || !IsCriticalKey("embedded-registry") || !IsCriticalKey("disable+") {
		t.Error("IsCriticalKey")
	}
}

func TestCriticalMismatches(t *testing.T) {
	keys := func(ms []Mismatch) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Key)
		}
		return out
	}
	for _, c := range []struct {
		name string
		a, b map[string]any
		want []string
	}{
		{"both empty", nil, map[string]any{}, nil},
		{"non-critical differs", map[string]any{"disable-scheduler": true}, nil, nil},
		{"embedded-registry", map[string]any{"embedded-registry": true}, nil, []string{"embedded-registry"}},
		{"explicit defaults", map[string]any{"flannel-backend": "vxlan", "cluster-cidr": []string{"10.42.0.0/16"},
			"service-cidr": "10.43.0.0/16", "cluster-dns": "10.43.0.10", "egress-selector-mode": "agent",
			"secrets-encryption": false, "cluster-domain": "cluster.local", "secrets-encryption-provider": "aescbc"}, nil, nil},
		{"bool text", map[string]any{"disable-network-policy": "true"}, map[string]any{"disable-network-policy": ptr(true)}, nil},
		{"nil pointer is absent", map[string]any{"disable-network-policy": (*bool)(nil)}, nil, nil},
		{"servicelb only", map[string]any{"disable": []any{"traefik"}}, map[string]any{"disable": "metrics-server"}, nil},
		{"servicelb differs", map[string]any{"disable": []string{"traefik,servicelb"}}, map[string]any{"disable": []string{"traefik"}}, []string{"disable"}},
		{"cluster-dns follows service-cidr", map[string]any{"service-cidr": "10.96.0.0/12", "cluster-dns": "10.96.0.10"},
			map[string]any{"service-cidr": "10.96.0.0/12"}, nil},
		{"cidr and backend", map[string]any{"cluster-cidr": "10.50.0.0/16", "flannel-backend": "wireguard-native"}, nil,
			[]string{"cluster-cidr", "flannel-backend"}},
		{"append key", map[string]any{"cluster-cidr+": []string{"fd00::/56"}}, map[string]any{"cluster-cidr": "10.42.0.0/16"}, []string{"cluster-cidr"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := keys(CriticalMismatches(c.a, c.b))
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v (%v)", got, c.want, CriticalMismatches(c.a, c.b))
			}
		})
	}
	m := CriticalMismatches(map[string]any{"flannel-backend": "host-gw"}, nil)[0]
	if m.A != "host-gw" || m.B != "vxlan" || m.DefaultA || !m.DefaultB {
		t.Errorf("%+v", m)
	}
}

func ptr[T any](v T) *T { return &v }

func TestMask(t *testing.T) {
	tok := "K10" + strings.Repeat("ab", 32) + "::server:pw"
	for in, want := range map[string]string{
		"env K3S_TOKEN=abc INSTALL_K3S_EXEC=server":                  "env K3S_TOKEN=******** INSTALL_K3S_EXEC=server",
		"k3s server --token s3cr3t --debug":                          "k3s server --token ******** --debug",
		"--agent-token=xyz":                                          "--agent-token=********",
		"--bootstrap-password 'a b' x":                               "--bootstrap-password ******** x",
		"token " + tok + " x":                                        "token ******** x",
		"nothing secret here: token-file is a path":                  "nothing secret here: token-file is a path",
		"token-file: /etc/t\ntoken: abc\nsecrets-encryption: true\n": "token-file: /etc/t\ntoken: ********\nsecrets-encryption: true\n",
		"  datastore-endpoint: \"mysql://u:p@tcp(h)/k\"":             "  datastore-endpoint: ********",
		"etcd-s3-secret-key: x\netcd-s3-bucket: b":                   "etcd-s3-secret-key: ********\netcd-s3-bucket: b",
		"SUDO_PASSWORD=x K3S_TOKEN_FILE=/p AWS_SECRET_ACCESS_KEY=y":  "SUDO_PASSWORD=******** K3S_TOKEN_FILE=/p AWS_SECRET_ACCESS_KEY=********",
		"K3S_DATASTORE_ENDPOINT=postgres://u:p@h/db":                 "K3S_DATASTORE_ENDPOINT=********",
		"time=\"x\" level=info msg=\"Running kubelet --token=abc\"":  "time=\"x\" level=info msg=\"Running kubelet --token=********",
	} {
		if got := Mask(in); got != want {
			t.Errorf("Mask(%q)\n = %q\nwant %q", in, got, want)
		}
	}
	got := MaskEnv([]string{"K3S_TOKEN=a b", "INSTALL_K3S_EXEC=server --token x", "sudo_password=x", "PATH=/bin"})
	want := []string{"K3S_TOKEN=********", "INSTALL_K3S_EXEC=server --token ********", "sudo_password=********", "PATH=/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("MaskEnv = %q", got)
	}
	if !IsSecretKey("token") || IsSecretKey("token-file") || IsSecretKey("secrets-encryption") || !IsSecretEnv("k3s_agent_token") || IsSecretEnv("K3S_URL") {
		t.Error("IsSecretKey / IsSecretEnv")
	}
}

func TestMilestones(t *testing.T) {
	// The order a real K3s v1.36.3 reaches them in (the real-K3s lane's TestRealApply).
	names := []string{"api-ready", "service-active", "node-registered", "node-ready", "uninitialized-taint-gone", "podcidr-set", "subnet-env"}
	for i, m := range Milestones() {
		if string(m) != names[i] || m.Index() != i || !m.Known() {
			t.Errorf("milestone %d = %q", i, m)
		}
	}
	if Milestone("x").Known() {
		t.Error("unknown milestone known")
	}
}

func TestUninitializedTaintStays(t *testing.T) {
	for _, c := range []struct {
		name     string
		cfg      map[string]any
		external bool
		want     bool
	}{
		{"default", nil, false, false},
		{"disable alone", map[string]any{"disable-cloud-controller": true}, false, false},
		{"F1", map[string]any{"disable-cloud-controller": true, "kubelet-arg": []any{"cloud-provider=external"}}, false, true},
		{"F1 with external", map[string]any{"disable-cloud-controller": "true", "kubelet-arg": "--cloud-provider=external"}, true, false},
		{"embedded with external arg", map[string]any{"kubelet-arg": []string{"cloud-provider=external"}}, false, false},
	} {
		if got := CloudSettingsFrom(c.cfg, nil, c.external).UninitializedTaintStays(); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
	agent := CloudSettingsFrom(map[string]any{"kubelet-arg": "cloud-provider=external"}, map[string]any{"disable-cloud-controller": true}, false)
	if !agent.UninitializedTaintStays() {
		t.Error("agent of an F1 server")
	}
	if !(CloudSettings{}).KubeletCloudProviderExternal() {
		t.Error("the embedded controller sets cloud-provider=external")
	}
}

func TestRelease(t *testing.T) {
	if !IsRelease(DefaultVersion) || !IsRelease("v1.36.0-rc1+k3s1") || IsRelease("1.31.4") || IsRelease("stable") || IsRelease("v1.31.4+k3s1 ") {
		t.Error("IsRelease")
	}
	if got := FindRelease("k3s version v1.36.3+k3s1 (abcdef) go version go1.25"); got != "v1.36.3+k3s1" {
		t.Errorf("FindRelease = %q", got)
	}
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"v1.31.4+k3s1", "v1.36.3+k3s1", -1},
		{"v1.36.3+k3s2", "v1.36.3+k3s1", 1},
		{"v1.36.3-rc1+k3s1", "v1.36.3+k3s1", -1},
		{"1.36.3", "v1.36.3", 0},
	} {
		a, okA := ParseRelease(c.a)
		b, okB := ParseRelease(c.b)
		if !okA || !okB || a.Compare(b) != c.want || b.Compare(a) != -c.want {
			t.Errorf("%s vs %s", c.a, c.b)
		}
	}
	if r, _ := ParseRelease("v1.36.3-rc1+k3s2"); r.String() != "v1.36.3-rc1+k3s2" || !r.AtLeast(1, 35) || r.AtLeast(1, 37) {
		t.Errorf("%v", r)
	}
	for _, bad := range []string{"", "stable", "v1.36", "v1.x.3"} {
		if _, ok := ParseRelease(bad); ok {
			t.Errorf("ParseRelease(%q) ok", bad)
		}
	}
}

func TestBinaryReleaseScan(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "k3s")
	data := append(make([]byte, 3<<20-10), []byte("k3s version v1.36.3+k3s1 (abc)")...) // straddles a chunk boundary
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := BinaryReleaseFile(p); err != nil || v != "v1.36.3+k3s1" {
		t.Errorf("BinaryReleaseFile = %q, %v", v, err)
	}
	if err := os.WriteFile(p, []byte("not a binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := BinaryReleaseFile(p); err == nil || !strings.Contains(err.Error(), "no K3s release") {
		t.Errorf("err = %v", err)
	}
	if _, err := BinaryReleaseFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file")
	}
	if _, err := BinaryReleaseFile(dir); err == nil {
		t.Error("directory")
	}
}

// TestBinaryReleaseBuildInfo builds a tiny Go program with -X main.version and
// -X …/version.Version and reads the release from its build information.
func TestBinaryReleaseBuildInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	dir := t.TempDir()
	src := "package main\n\nvar version = \"dev\"\n\nfunc main() { println(version) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/fake\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ldflags, want string }{
		{"-X main.version=v1.31.4+k3s1", "v1.31.4+k3s1"},
		{"-s -w -X github.com/k3s-io/k3s/pkg/version.Version=v1.36.3+k3s1 -X main.other=x", "v1.36.3+k3s1"},
	} {
		out := filepath.Join(dir, "bin")
		cmd := exec.Command(goBin, "build", "-o", out, "-ldflags", c.ldflags, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		if v, err := BinaryReleaseFile(out); err != nil || v != c.want {
			t.Errorf("%s: BinaryReleaseFile = %q, %v; want %s", c.ldflags, v, err, c.want)
		}
	}
}

// The crash-loop rule: failed, or CrashLoopRestarts restarts within the window; one restart is
// not a crash loop.
func TestCrashLoop(t *testing.T) {
	for _, c := range []struct {
		state    string
		restarts int
		want     bool
	}{{"activating", 0, false}, {"activating", 1, false}, {"active", 1, false}, {"activating", 2, true}, {"failed", 0, true}, {"active", 5, true}} {
		if got := CrashLoop(c.state, c.restarts); got != c.want {
			t.Errorf("CrashLoop(%q, %d) = %v, want %v", c.state, c.restarts, got, c.want)
		}
	}
}
