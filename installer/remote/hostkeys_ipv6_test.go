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

// TestKnownHostsIPv6 records IPv6 hosts as OpenSSH does (bare "fd00::1" on port 22,
// "[fd00::1]:2222" on another; knownhosts.Normalize), verifies them on the next connect and
// refuses another key for the same address.
func TestKnownHostsIPv6(t *testing.T) {
	newKey := func() ssh.PublicKey { return sshtest.PublicKey(t) }
	path := filepath.Join(t.TempDir(), "known_hosts")
	kh := &KnownHosts{Path: path}
	cb := kh.Callback()
	for _, tc := range []struct{ dial, line string }{
		{net.JoinHostPort("fd00::1", "22"), "fd00::1 "},
		{net.JoinHostPort("fd00::2", "2222"), "[fd00::2]:2222 "},
	} {
		key := newKey()
		host, port, _ := net.SplitHostPort(tc.dial)
		remote := &net.TCPAddr{IP: net.ParseIP(host)}
		remote.Port, _ = net.LookupPort("tcp", port)
		if err := cb(tc.dial, remote, key); err != nil {
			t.Fatalf("%s first connect: %v", tc.dial, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\n"+tc.line) && !strings.HasPrefix(string(b), tc.line) {
			t.Errorf("%s: no line starting %q in\n%s", tc.dial, tc.line, b)
		}
		if err := cb(tc.dial, remote, key); err != nil {
			t.Errorf("%s second connect, same key: %v", tc.dial, err)
		}
		var mm *HostKeyMismatchError
		if err := cb(tc.dial, remote, newKey()); !errors.As(err, &mm) {
			t.Errorf("%s other key: %v, want a HostKeyMismatchError", tc.dial, err)
		}
	}
}
