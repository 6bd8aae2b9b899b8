// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/k3strap/k3strap/events"
)

// silentSSH listens on a loopback port whose connections are accepted and never answered (no
// SSH banner): a connect to it waits until its deadline or until the run is cancelled.
func silentSSH(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	t.Cleanup(func() {
		_ = l.Close()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// TestCancelledConnectSummary: a run cancelled while it connects (Ctrl-C) ends with 130 at once
// and says so — the host's connect and its summary line "skipped", the connect phase "stopped
// while connecting" — not that the host failed, nor "use of closed network connection".
func TestCancelledConnectSummary(t *testing.T) {
	port := silentSSH(t)
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := writeFile(t, dir, "id_ed25519", string(pem.EncodeToMemory(block)), 0o600)
	kh := writeFile(t, dir, "known_hosts", "", 0o600)
	f := writeFile(t, dir, "cluster.yaml", fmt.Sprintf(`apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: test}
spec:
  ssh: {user: root, port: %d, keyPath: %s, knownHosts: %s, connectTimeout: 60s}
  k3s: {version: v1.36.3+k3s1}
  hosts:
    - {name: cp1, address: 127.0.0.1, role: server}
`, port, key, kh), 0o600)
	t.Setenv("K3STRAP_FILE", "")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"preflight", "-f", f, "--output", "json", "--ssh-config", "none"}, strings.NewReader(""), &out, &errb)
	took := time.Since(start)
	if code != 130 || took > 6*time.Second {
		t.Fatalf("exit %d after %s, want 130 within a few seconds of the cancel\n%s%s", code, took, out.String(), errb.String())
	}
	if strings.Contains(out.String()+errb.String(), "use of closed network connection") {
		t.Errorf("the cancelled connect is reported as a transport error:\n%s", out.String())
	}
	var step, phase, summary events.Status
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var e events.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch {
		case e.Type == events.HostStep && e.Step == "connect":
			step = e.Status
		case e.Type == events.PhaseFinished && e.Phase == events.PhaseConnect:
			phase = e.Status
			if !strings.Contains(e.Message, "stopped while connecting (0 of 1 hosts connected)") {
				t.Errorf("connect phase: %q", e.Message)
			}
		case e.Type == events.Summary:
			for _, h := range e.Summary.Hosts {
				summary = h.Status
				if h.Message != "not connected: the run was stopped while connecting" {
					t.Errorf("summary of cp1: %s %q", h.Status, h.Message)
				}
			}
		}
	}
	if step != events.StatusSkipped || phase != events.StatusSkipped || summary != events.StatusSkipped {
		t.Errorf("connect step %q, phase %q, summary %q: want skipped for each (stopped, not failed)\n%s", step, phase, summary, out.String())
	}
}
