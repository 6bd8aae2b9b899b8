// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pull

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pull.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfig(t *testing.T) {
	needTools(t)
	signers := allowedSigners(t, `namespaces="git" `, newKey(t, "pinned"))
	good := "host: s1\nsource:\n  git:\n    url: git://10.0.0.1/site.git\n    ref: main\n    path: sites/s1/cluster.yaml\nverify:\n  allowedSigners: " + signers + "\ninterval: 10m\n"
	c, err := LoadConfig(writeConfig(t, good))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if m, err := LoadConfig(writeConfig(t, good+"management:\n  kubeconfig: /etc/k3strap/mgmt.kubeconfig\n  site: store-7\n")); err != nil || m.Management == nil || m.Management.Site != "store-7" {
		t.Errorf("a management section: %+v, %v", m, err)
	}
	if c.Host != "s1" || time.Duration(c.Interval) != 10*time.Minute || time.Duration(c.RetryFor) != DefaultRetryFor ||
		c.StateDir != DefaultStateDir || c.TokenFile != DefaultTokenFile || c.Source.Git.Ref != "main" {
		t.Errorf("config = %+v", c)
	}

	for _, tt := range []struct {
		name, body string
		line       int
		want       string
	}{
		{"unknown key", "host: s1\nsource:\n  git:\n    url: x\n    branch: main\n", 5, "field branch not found"},
		{"git without verification", "source:\n  git:\n    url: git://h/r.git\n    ref: main\n    path: c.yaml\n", 2, "no verification"},
		{"https without digest", "source:\n  https:\n    url: https://h/c.yaml\n", 2, "no verification"},
		{"https with a bad digest", "source:\n  https:\n    url: https://h/c.yaml\n    sha256: abc\n", 4, "64 lowercase hex"},
		{"https with a bad minisign key", "source:\n  https:\n    url: https://h/c.yaml\n    minisignKey: " + signers + "\n", 4, "not a minisign public key"},
		{"http URL", "source:\n  https:\n    url: http://h/c.yaml\n    sha256: " + strings.Repeat("a", 64) + "\n", 3, "must be an https:// URL"},
		{"no source", "host: s1\n", 0, "no source"},
		{"empty", "", 0, "empty"},
		{"not YAML", "source: [\n", 1, "not valid YAML"},
		{"both sources", "source:\n  git: {url: u, ref: r, path: p}\n  https: {url: 'https://h/c', sha256: x}\n", 1, "both set"},
		{"path escapes", "source:\n  git:\n    url: u\n    ref: r\n    path: ../c.yaml\nverify: {allowedSigners: " + signers + "}\n", 5, "relative path inside the repository"},
		{"password in URL", "source:\n  git:\n    url: https://u:secret@h/r.git\n    ref: r\n    path: c.yaml\n", 3, "carries a password"},
		{"bad duration", good + "retryFor: soon\n", 10, "not a duration"},
		{"retry longer than interval", good + "retryFor: 1h\n", 10, "between 0 and the interval"},
		{"management without a site", good + "management:\n  kubeconfig: /etc/k3strap/mgmt.kubeconfig\n", 10, "not a site name"},
		{"management with a relative kubeconfig", good + "management:\n  kubeconfig: mgmt.kubeconfig\n  site: s1\n", 10, "absolute path"},
		{"missing signers file", strings.Replace(good, signers, "/nonexistent/allowed_signers", 1), 8, "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, tt.body)
			_, err := LoadConfig(p)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			if ce.File != p || ce.Line != tt.line || !strings.Contains(ce.Msg, tt.want) {
				t.Errorf("err = %q (line %d), want %s line %d and %q", err, ce.Line, p, tt.line, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error quotes the file's password: %q", err)
			}
		})
	}
}

func TestLoadAllowedSignersRefusesWhatItCannotHonour(t *testing.T) {
	needTools(t)
	k := newKey(t, "ca")
	for opt, want := range map[string]string{
		"cert-authority ":          "cert-authority is not supported",
		`valid-before="20300101" `: "valid-before is not supported",
		"":                         "",
		`namespaces="file,git" `:   "",
		`frobnicate `:              "unknown option",
	} {
		_, err := LoadAllowedSigners(allowedSigners(t, opt, k))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ":3:")) {
			t.Errorf("option %q: err = %v, want %q at line 3", opt, err, want)
		}
	}
}

func TestInstallUnitsIsIdempotent(t *testing.T) {
	root := t.TempDir()
	c := &Config{Path: "/etc/k3strap/pull.yaml", StateDir: "/var/lib/k3strap/pull", Interval: Duration(5 * time.Minute)}
	changed, err := InstallUnits(root, "/var/lib/k3strap/k3strap", c)
	if err != nil || !changed {
		t.Fatalf("first install: changed %t, %v", changed, err)
	}
	svc, _ := os.ReadFile(filepath.Join(root, UnitDir, ServiceName))
	tmr, _ := os.ReadFile(filepath.Join(root, UnitDir, TimerName))
	for _, want := range []string{"ExecStart=/var/lib/k3strap/k3strap pull run --config /etc/k3strap/pull.yaml", "Type=oneshot", "/var/lib/k3strap/pull/status.json"} {
		if !strings.Contains(string(svc), want) {
			t.Errorf("service lacks %q:\n%s", want, svc)
		}
	}
	if !strings.Contains(string(tmr), "OnUnitInactiveSec=300s") || !strings.Contains(string(tmr), "WantedBy=timers.target") {
		t.Errorf("timer:\n%s", tmr)
	}
	if changed, err := InstallUnits(root, "/var/lib/k3strap/k3strap", c); err != nil || changed {
		t.Errorf("second install: changed %t, %v; want unchanged", changed, err)
	}
	c.Interval = Duration(time.Hour)
	if changed, _ := InstallUnits(root, "/var/lib/k3strap/k3strap", c); !changed {
		t.Error("a new interval did not rewrite the timer")
	}
}
