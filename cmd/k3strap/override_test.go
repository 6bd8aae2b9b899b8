// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/k3strap/k3strap/inventory"
)

const overrideInventory = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: override}
spec:
  k3s:
    channel: stable
  ssh:
    user: fileuser
    port: 2200
    keyPath: keys/id
  hosts:
    - name: cp1
      address: 192.0.2.1
      role: server
`

// newFlagViper returns NewViper with flags bound the way cmd binds them, after parsing args.
func newFlagViper(t *testing.T, args ...string) *viper.Viper {
	t.Helper()
	v := NewViper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("ssh-user", "", "")
	fs.Int("ssh-port", 22, "")
	fs.String("ssh-key", "", "")
	fs.String("k3s-version", "", "")
	fs.Duration("connect-timeout", 10*time.Second, "")
	for key, flag := range map[string]string{OverrideSSHUser: "ssh-user", OverrideSSHPort: "ssh-port", OverrideSSHKeyPath: "ssh-key",
		OverrideK3sVersion: "k3s-version", OverrideSSHConnectTimeout: "connect-timeout"} {
		if err := v.BindPFlag(key, fs.Lookup(flag)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return v
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func writeInventory(t *testing.T, data string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Precedence: a changed flag beats the environment, which beats the file; unchanged flags
// (their defaults) do not override the file.
func TestOverridePrecedence(t *testing.T) {
	cwd := mustAbs(t, ".")
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		user       string
		port       int
		keyPath    func(file string) string
		version    string
		channel    string
		timeout    time.Duration
		overridden []string
	}{
		{name: "file only", user: "fileuser", port: 2200,
			keyPath: func(f string) string { return filepath.Join(filepath.Dir(f), "keys/id") }, channel: "stable", timeout: 10 * time.Second},
		{name: "env over file", env: map[string]string{"K3STRAP_SSH_USER": "envuser", "K3STRAP_SSH_PORT": "2300", "K3STRAP_SSH_KEYPATH": "env/id", "K3STRAP_K3S_VERSION": "v1.31.4+k3s1", "K3STRAP_SSH_CONNECTTIMEOUT": "30s"},
			user: "envuser", port: 2300, keyPath: func(string) string { return filepath.Join(cwd, "env/id") }, version: "v1.31.4+k3s1", timeout: 30 * time.Second,
			overridden: []string{"spec.ssh.user", "spec.ssh.port", "spec.ssh.keyPath", "spec.k3s.version", "spec.ssh.connectTimeout"}},
		{name: "flag over env", env: map[string]string{"K3STRAP_SSH_USER": "envuser", "K3STRAP_SSH_PORT": "2300"},
			args: []string{"--ssh-user=flaguser", "--ssh-key=/abs/id", "--connect-timeout=5s"},
			user: "flaguser", port: 2300, keyPath: func(string) string { return "/abs/id" }, channel: "stable", timeout: 5 * time.Second,
			overridden: []string{"spec.ssh.user", "spec.ssh.port", "spec.ssh.keyPath", "spec.ssh.connectTimeout"}},
		{name: "flag over file", args: []string{"--ssh-port=2400", "--k3s-version=v1.30.1+k3s2"},
			user: "fileuser", port: 2400, keyPath: func(f string) string { return filepath.Join(filepath.Dir(f), "keys/id") }, version: "v1.30.1+k3s2", timeout: 10 * time.Second,
			overridden: []string{"spec.ssh.port", "spec.k3s.version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			file := writeInventory(t, overrideInventory)
			c, err := inventory.Load(file, inventory.LoadOptions{Override: overrideLayer(newFlagViper(t, tt.args...))})
			if err != nil {
				t.Fatal(err)
			}
			s := c.Spec.SSH
			if s.User != tt.user || s.Port != tt.port || s.KeyPath != tt.keyPath(file) || s.ConnectTimeout.D() != tt.timeout {
				t.Errorf("ssh = user %q port %d key %q timeout %v, want %q %d %q %v", s.User, s.Port, s.KeyPath, s.ConnectTimeout.D(), tt.user, tt.port, tt.keyPath(file), tt.timeout)
			}
			if c.Spec.K3s.Version != tt.version || c.Spec.K3s.Channel != tt.channel {
				t.Errorf("release = version %q channel %q, want %q %q", c.Spec.K3s.Version, c.Spec.K3s.Channel, tt.version, tt.channel)
			}
			if len(c.Overridden) != len(tt.overridden) {
				t.Errorf("Overridden = %v, want %v", c.Overridden, tt.overridden)
			}
			for _, f := range tt.overridden {
				if _, ok := c.Overridden[f]; !ok {
					t.Errorf("%s not marked overridden: %v", f, c.Overridden)
				}
			}
		})
	}
}

func TestOverrideEveryKeyFromEnv(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	env := map[string]string{
		"K3STRAP_SSH_USER": "u", "K3STRAP_SSH_PORT": "2022", "K3STRAP_SSH_KEY_PATH": "~/k", "K3STRAP_SSH_KNOWN_HOSTS": "/kh",
		"K3STRAP_SSH_AGENT": "false", "K3STRAP_SSH_CONNECT_TIMEOUT": "1m", "K3STRAP_K3S_CHANNEL": "latest",
		"K3STRAP_K3S_TOKEN": "tok", "K3STRAP_K3S_INSTALL": "online",
		"K3STRAP_SSH_CERTIFICATE_PATH": "~/k-cert.pub", "K3STRAP_SSH_PROXY_COMMAND": "nc %h %p",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	c, err := inventory.Parse("", []byte(overrideInventory), inventory.LoadOptions{Override: overrideLayer(NewViper())})
	if err != nil {
		t.Fatal(err)
	}
	s, k := c.Spec.SSH, c.Spec.K3s
	if s.User != "u" || s.Port != 2022 || s.KeyPath != "/home/tester/k" || s.KnownHosts != "/kh" || s.Agent == nil || *s.Agent ||
		s.ConnectTimeout.D() != time.Minute || s.CertificatePath != "/home/tester/k-cert.pub" || s.ProxyCommand != "nc %h %p" || k.Channel != "latest" || k.Token.Reveal() != "tok" || k.Install != inventory.Online {
		t.Errorf("overrides not applied: ssh %+v k3s channel %q install %q", s, k.Channel, k.Install)
	}
	keys := OverrideKeys()
	if len(c.Overridden) != len(keys)-1 { // every key but k3s.version
		t.Errorf("Overridden = %v", c.Overridden)
	}
	for _, o := range keys {
		if _, ok := env[o.Env]; !ok && o.Key != OverrideK3sVersion {
			t.Errorf("override %s (env %q) not covered by this test", o.Key, o.Env)
		}
	}
}

// Override values that do not convert, or that fail validation, are reported without a file
// position and name where they came from.
func TestOverrideErrors(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"K3STRAP_SSH_PORT": "abc", "K3STRAP_SSH_AGENT": "perhaps", "K3STRAP_SSH_CONNECT_TIMEOUT": "5"},
			[]string{
				`spec.ssh.port from override ssh.port (a command-line flag or $K3STRAP_SSH_PORT) must be a whole number, not "abc" — fix: give a TCP port between 1 and 65535`,
				`spec.ssh.agent from override ssh.agent (a command-line flag or $K3STRAP_SSH_AGENT) must be true or false, not "perhaps"`,
				`spec.ssh.connectTimeout from override ssh.connectTimeout (a command-line flag or $K3STRAP_SSH_CONNECT_TIMEOUT) must be a duration, not "5"`,
			}},
		{map[string]string{"K3STRAP_SSH_PORT": "70000"},
			[]string{"SSH port 70000 is out of range (set by override ssh.port (a command-line flag or $K3STRAP_SSH_PORT)) — fix: use a TCP port between 1 and 65535"}},
		{map[string]string{"K3STRAP_K3S_INSTALL": "airgap"},
			[]string{
				// The file's channel now contradicts the install mode: positioned in the file.
				":6:5: a channel only applies to online installs",
				"install: airgap needs the K3s artifacts in spec.k3s.airgap (set by override k3s.install (a command-line flag or $K3STRAP_K3S_INSTALL))",
			}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(mapKeys(tt.env), ","), func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			file := writeInventory(t, overrideInventory)
			_, err := inventory.Load(file, inventory.LoadOptions{Override: overrideLayer(NewViper())})
			var list inventory.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("err = %v", err)
			}
			if len(list) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(list), len(tt.want), list)
			}
			for i, w := range tt.want {
				got := list[i].Error()
				if !strings.Contains(got, w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got, w)
				}
				if !strings.HasPrefix(w, ":") && (list[i].Line != 0 || list[i].File != "") {
					t.Errorf("override problem %d has a file position: %q", i, got)
				}
			}
		})
	}
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Without a viper instance the environment is not read.
func TestNoViperNoEnv(t *testing.T) {
	t.Setenv("K3STRAP_SSH_USER", "envuser")
	c, err := inventory.Parse("", []byte(overrideInventory), inventory.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.SSH.User != "fileuser" {
		t.Errorf("user = %q", c.Spec.SSH.User)
	}
}

func TestOverrideKeysDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range OverrideKeys() {
		if seen[k.Key] || k.Usage == "" || !strings.HasPrefix(k.Field, "spec.") {
			t.Errorf("bad override key %+v", k)
		}
		seen[k.Key] = true
		if (k.Key == OverrideK3sToken) != k.Secret {
			t.Errorf("%s: Secret = %v", k.Key, k.Secret)
		}
	}
	if got := OverrideKeys()[2]; got.Key != OverrideSSHKeyPath || got.Env != "K3STRAP_SSH_KEY_PATH" || got.OldEnv != "K3STRAP_SSH_KEYPATH" {
		t.Errorf("keyPath override = %+v", got)
	}
	// Every variable is its flag's name: --ssh-key-path ↔ K3STRAP_SSH_KEY_PATH.
	for _, k := range OverrideKeys() {
		if want := "K3STRAP_" + strings.ToUpper(strings.ReplaceAll(flagName(k.Key), "-", "_")); k.Env != want {
			t.Errorf("%s: env %s, want %s (from --%s)", k.Key, k.Env, want, flagName(k.Key))
		}
	}
}

// The pre-v0.4 names (K3STRAP_SSH_KEYPATH) are still read, the new name winning when both are
// set.
func TestOverrideOldEnvNames(t *testing.T) {
	t.Setenv("K3STRAP_SSH_KEYPATH", "/old/key")
	t.Setenv("K3STRAP_SSH_CONNECTTIMEOUT", "42s")
	c, err := inventory.Parse("", []byte(overrideInventory), inventory.LoadOptions{Override: overrideLayer(NewViper())})
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.SSH.KeyPath != "/old/key" || c.Spec.SSH.ConnectTimeout.D() != 42*time.Second {
		t.Errorf("old names not read: keyPath %q connectTimeout %v", c.Spec.SSH.KeyPath, c.Spec.SSH.ConnectTimeout.D())
	}
	t.Setenv("K3STRAP_SSH_KEY_PATH", "/new/key")
	c, err = inventory.Parse("", []byte(overrideInventory), inventory.LoadOptions{Override: overrideLayer(NewViper())})
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.SSH.KeyPath != "/new/key" {
		t.Errorf("with both set keyPath = %q, want the new name's /new/key", c.Spec.SSH.KeyPath)
	}
}
