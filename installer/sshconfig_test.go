// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// sessionWithSSHConfig is a session whose ~/.ssh/config is the text given.
func sessionWithSSHConfig(t *testing.T, text string) *session {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{{Name: "n1", Address: "n1", Role: inventory.RoleServer}}}}
	return New(c, Options{SSHConfig: p}, &events.Recorder{}).newSession(commandFor("preflight"))
}

// ssh_config as OpenSSH reads it: every IdentityFile and CertificateFile in order, a ProxyJump
// with two hops each resolved with its own Host entry, the host reached through the last.
func TestResolveEndpointOpenSSH(t *testing.T) {
	s := sessionWithSSHConfig(t, `
Host n1
  HostName 10.0.0.5
  User ops
  IdentityFile /keys/a
  IdentityFile /keys/b
  CertificateFile /keys/b-cert.pub
  ProxyJump jump1,admin@jump2:2222

Host jump1
  HostName 192.0.2.1
  User gate
  IdentityFile /keys/gate

Host *
  IdentityFile /keys/default
`)
	e, err := s.resolveEndpoint("n1", inventory.SSH{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.address != "10.0.0.5" || e.user != "ops" || e.keyPath != "/keys/a" || !reflect.DeepEqual(e.keyPaths, []string{"/keys/b", "/keys/default"}) ||
		!reflect.DeepEqual(e.certPaths, []string{"/keys/b-cert.pub"}) {
		t.Fatalf("host: %+v", e)
	}
	j2 := e.jump
	if j2 == nil || j2.address != "jump2" || j2.user != "admin" || j2.port != 2222 || j2.keyPath != "/keys/default" {
		t.Fatalf("last hop: %+v", j2)
	}
	j1 := j2.jump
	if j1 == nil || j1.address != "192.0.2.1" || j1.user != "gate" || j1.keyPath != "/keys/gate" || j1.jump != nil {
		t.Fatalf("first hop: %+v", j1)
	}

	// The inventory's jump hosts win, in order, and log in like the host unless told.
	e, err = s.resolveEndpoint("n1", inventory.SSH{KeyPath: "/inv/key", Bastions: []inventory.Bastion{{Address: "b1"}, {Address: "b2", User: "u2", Port: 23}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.keyPath != "/inv/key" || e.jump == nil || e.jump.address != "b2" || e.jump.user != "u2" || e.jump.port != 23 ||
		e.jump.jump == nil || e.jump.jump.address != "b1" || e.jump.jump.user != "ops" || e.jump.jump.keyPath != "/inv/key" {
		t.Fatalf("inventory bastions: %+v / %+v", e, e.jump)
	}
}

// ProxyCommand: tokens expanded for the resolved host; an unknown token names the file and line.
func TestResolveEndpointProxyCommand(t *testing.T) {
	s := sessionWithSSHConfig(t, "Host n1\n  HostName 10.0.0.5\n  Port 2200\n  ProxyCommand ssh -W %h:%p %r@gw -oTag=%n\n\nHost bad\n  User x\n  ProxyCommand connect %C\n")
	e, err := s.resolveEndpoint("n1", inventory.SSH{User: "k"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.proxyCommand != "ssh -W 10.0.0.5:2200 k@gw -oTag=n1" || e.jump != nil {
		t.Fatalf("proxyCommand %q", e.proxyCommand)
	}
	_, err = s.resolveEndpoint("bad", inventory.SSH{}, 0)
	if err == nil || !strings.Contains(err.Error(), s.sshcfg.path+" (Host bad, line 8)") || !strings.Contains(err.Error(), "unknown token %C") {
		t.Fatalf("unknown token: %v", err)
	}
	// The inventory's proxyCommand wins over the file's.
	e, err = s.resolveEndpoint("n1", inventory.SSH{ProxyCommand: "nc %h %p"}, 0)
	if err != nil || e.proxyCommand != "nc 10.0.0.5 2200" {
		t.Fatalf("inventory proxyCommand: %q, %v", e.proxyCommand, err)
	}
}

// The passphrase sources: the environment variable, the file's first line, and without
// either (and no terminal: tests run without one) ErrNoPassphrase, so the agent takes over.
func TestPassphraseSources(t *testing.T) {
	s := sessionWithSSHConfig(t, "")
	ctx := context.Background()
	t.Setenv("K3STRAP_TEST_KEYPASS", "from env")
	p, src, err := s.passphrase("K3STRAP_TEST_KEYPASS", "")(ctx, "/k")
	if err != nil || string(p) != "from env" || src != "$K3STRAP_TEST_KEYPASS" {
		t.Fatalf("env: %q %q %v", p, src, err)
	}
	if _, _, err := s.passphrase("K3STRAP_TEST_UNSET_VAR", "")(ctx, "/k"); err == nil || !strings.Contains(err.Error(), "K3STRAP_TEST_UNSET_VAR, which is not set") {
		t.Fatalf("unset env: %v", err)
	}
	f := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(f, []byte("from file\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, src, err = s.passphrase("", f)(ctx, "/k")
	if err != nil || string(p) != "from file" || src != "file "+f {
		t.Fatalf("file: %q %q %v", p, src, err)
	}
	if _, _, err := s.passphrase("", "")(ctx, "/k"); !errors.Is(err, remote.ErrNoPassphrase) {
		t.Fatalf("no source: %v", err)
	}
}
