// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/k3strap/k3strap/internal/sshtest"
)

func newKey(t *testing.T) ssh.PublicKey { return sshtest.PublicKey(t) }

func TestKnownHostsTrustOnFirstUseThenMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "known_hosts")
	var recorded []string
	kh := &KnownHosts{Path: path, OnRecord: func(a, fp string) { recorded = append(recorded, a+" "+fp) }}
	cb := kh.Callback()
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 10), Port: 22}
	k1 := newKey(t)
	if err := cb("10.0.0.10:22", addr, k1); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if len(recorded) != 1 || !strings.Contains(recorded[0], ssh.FingerprintSHA256(k1)) {
		t.Fatalf("recording not reported: %v", recorded)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("known_hosts mode: %v %v", st, err)
	}
	if err := cb("10.0.0.10:22", addr, k1); err != nil {
		t.Fatalf("known key refused: %v", err)
	}
	if len(recorded) != 1 {
		t.Fatalf("known key recorded again: %v", recorded)
	}
	k2 := newKey(t)
	err = cb("10.0.0.10:22", addr, k2)
	var mm *HostKeyMismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("mismatch not refused: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{ssh.FingerprintSHA256(k2), ssh.FingerprintSHA256(k1), "ssh-keygen -R", path} {
		if !strings.Contains(msg, want) {
			t.Errorf("mismatch message lacks %q: %s", want, msg)
		}
	}
	// Another port on the same address is another host.
	if err := cb("10.0.0.10:2222", &net.TCPAddr{IP: addr.IP, Port: 2222}, k2); err != nil {
		t.Fatalf("other port: %v", err)
	}
}

func TestCmdQuoting(t *testing.T) {
	c := Command("echo", "a b", "$(rm -rf /)", "it's").AsRoot().WithEnv("INSTALL_K3S_EXEC=server --x 'y'")
	line := c.line(becomeSudoN)
	want := `sudo -n -- env 'INSTALL_K3S_EXEC=server --x '"'"'y'"'"'' echo 'a b' '$(rm -rf /)' 'it'"'"'s'`
	if line != want {
		t.Fatalf("line\n got %s\nwant %s", line, want)
	}
	if got := c.line(becomeNone); strings.HasPrefix(got, "sudo") {
		t.Fatalf("root gets sudo: %s", got)
	}
	if got := c.line(becomeSudoPass); !strings.HasPrefix(got, "sudo -S -p '' -- ") {
		t.Fatalf("password sudo: %s", got)
	}
	s := Script("probe", "echo \"$1\"", "x y")
	if got := s.line(becomeNone); got != `sh -c 'echo "$1"' k3strap 'x y'` {
		t.Fatalf("script line: %s", got)
	}
	if got := s.String(); got != "sh -c <probe script> 'x y'" {
		t.Fatalf("script display: %s", got)
	}
}

func TestSudoRefused(t *testing.T) {
	for _, s := range []string{"sudo: a password is required", "sudo: a terminal is required to read the password", "sudo: 1 incorrect password attempt"} {
		if !sudoRefused([]byte(s)) {
			t.Errorf("%q not recognised", s)
		}
	}
	if sudoRefused([]byte("cat: x: No such file or directory")) {
		t.Error("ordinary error taken for sudo")
	}
}

func TestPasswordGoesOnStdinOnly(t *testing.T) {
	c := &Client{cfg: Config{Host: "h", User: "deploy", SudoPassword: "hunter2"}}
	cmd := Command("true").AsRoot()
	if strings.Contains(cmd.line(c.become()), "hunter2") {
		t.Fatal("password on the command line")
	}
	_, in := cmd.sent(c.become(), c.cfg.SudoPassword.Reveal)
	buf := make([]byte, 64)
	n, _ := in.Read(buf)
	if string(buf[:n]) != "hunter2\n" {
		t.Fatalf("stdin = %q", buf[:n])
	}
	if _, in := Command("true").sent(c.become(), c.cfg.SudoPassword.Reveal); in != nil {
		t.Fatal("password sent to a command that does not need root")
	}
}
