// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// agentInventory is singleServer logging in with the ssh-agent only (no key file).
const agentInventory = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: e2e
spec:
  k3s:
{{template "k3s-airgap" .}}
  ssh:
    user: root
    agent: true
    knownHosts: {{.KnownHosts}}
    connectTimeout: {{.Extra.timeout}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
`

// silentAgent listens on a unix socket as an ssh-agent that accepts connections and never
// answers (an agent waiting on a confirmation prompt, or forwarded over a dead session), and
// sets SSH_AUTH_SOCK to it for the k3strap runs of the test.
func silentAgent(t *testing.T) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
		_ = os.RemoveAll(dir)
	})
	t.Setenv("SSH_AUTH_SOCK", filepath.Join(dir, "agent.sock"))
}

// TestPreflightSilentAgent: with ssh.agent on and an agent that never answers, preflight fails
// within the connect timeout naming the agent (exit 3, the SSH finding), and — with a connect
// timeout far off — Ctrl-C (SIGINT) or SIGTERM ends it with exit 130 within 5 s.
func TestPreflightSilentAgent(t *testing.T) {
	c := newCluster(t, 1)
	silentAgent(t)
	c.writeInventory(agentInventory, map[string]any{"timeout": "3s"})
	r := c.k3strap(time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 || r.duration > 15*time.Second {
		t.Fatalf("exit %d after %s, want 3 within 15 s (connect timeout 3 s)", r.code, r.duration)
	}
	named := false
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "SSH" && e.Host == "cp1" && strings.Contains(e.Finding.Message, "ssh-agent did not answer within 3s") {
			named = true
		}
	}
	if !named {
		t.Fatal("no SSH finding saying the ssh-agent did not answer within 3s")
	}
	if strings.Count(r.stdout, "retrying") != 0 {
		t.Error("an agent that does not answer was retried")
	}
	for _, e := range r.ofType(events.PhaseFinished) {
		if e.Phase == events.PhaseConnect && e.Status != events.StatusFailed {
			t.Errorf("connect phase finished %q (%s) with its only host failed", e.Status, e.Message)
		}
	}

	c.writeInventory(agentInventory, map[string]any{"timeout": "10m"})
	for _, sg := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		a := c.start(2*time.Minute, "preflight")
		a.waitFor(t, 30*time.Second, "the connect phase", func(e events.Event) bool {
			return e.Type == events.PhaseStarted && e.Phase == events.PhaseConnect
		})
		time.Sleep(time.Second) // the connect now waits on the agent
		sent := time.Now()
		if err := a.cmd.Process.Signal(sg); err != nil {
			t.Fatal(err)
		}
		r := a.wait(t)
		took := time.Since(sent)
		t.Logf("exit %d %s after %v", r.code, took.Round(10*time.Millisecond), sg)
		if r.code != 130 || took > 5*time.Second {
			r.dump(t)
			t.Fatalf("exit %d %s after %v, want 130 within 5 s", r.code, took, sg)
		}
		if strings.Contains(r.stdout, "use of closed network connection") {
			t.Errorf("the connect cancelled by %v is reported as a transport error", sg)
		}
	}
}

// TestUploadFullDisk: /usr/local/bin on a tmpfs too small for the K3s binary — preflight
// refuses it up front (UploadSpace naming host, directory, free and needed), and apply told to
// ignore that fails in seconds with exit 4 saying no space is left there, how much is free and
// needed, leaving no partial file behind.
func TestUploadFullDisk(t *testing.T) {
	c := newCluster(t, 1)
	st, err := os.Stat(filepath.Join(c.bin.artifacts, "k3s"))
	if err != nil {
		t.Fatal(err)
	}
	mib := st.Size()>>20/2 + 1 // half the binary: the upload itself runs out of space
	c.exec(0, "mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(mib, 10)+"m", "tmpfs", "/usr/local/bin")
	t.Cleanup(func() { _, _ = c.h.Exec(t.Context(), c.hosts[0].Index, "umount", "-l", "/usr/local/bin") })
	c.writeInventory(singleServer, nil)

	r := c.k3strap(2*time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("preflight exited %d, want 3", r.code)
	}
	found := false
	for _, e := range r.ofType(events.Finding) {
		m := e.Finding.Message
		if e.Finding.Check == "UploadSpace" && e.Host == "cp1" && strings.Contains(m, "free on /usr/local/bin") &&
			strings.Contains(m, "k3strap writes") && strings.Contains(m, "/usr/local/bin/k3s") {
			found = true
			t.Log(m)
		}
	}
	if !found {
		t.Fatal("no UploadSpace finding naming cp1, /usr/local/bin, free and needed")
	}

	r = c.k3strap(2*time.Minute, "apply", "--ignore-preflight-errors=UploadSpace", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 4 || r.duration > time.Minute {
		t.Fatalf("apply exited %d after %s, want 4", r.code, r.duration)
	}
	want := "no space left on /usr/local/bin ("
	said := ""
	for _, e := range r.events {
		if e.Type == events.Error && e.Error != nil && strings.Contains(e.Error.Message, want) {
			said = e.Error.Message
		}
	}
	if said == "" || !strings.Contains(said, "MiB free") || !strings.Contains(said, "needed") || strings.Contains(said, "SSH_FX_FAILURE") {
		t.Fatalf("the failure does not say %q with free and needed space: %q", want, said)
	}
	t.Log(said)
	if left := c.exec(0, "sh", "-c", "ls -A /usr/local/bin /var/tmp | grep k3strap || true"); left != "" {
		t.Errorf("left behind: %s", left)
	}
}

// TestFactsCommandHangs: a host whose facts command never finishes (df hangs, as on a dead
// network mount) — Ctrl-C during the facts phase exits 130 within 5 s; left alone, preflight
// fails when the facts deadline (2 minutes) passes, saying that the command did not finish,
// not blaming keys or known_hosts (exit 3).
func TestFactsCommandHangs(t *testing.T) {
	c := newCluster(t, 1)
	c.exec(0, "sh", "-c", "mv /usr/bin/df /usr/bin/df.real && printf '#!/bin/sh\\nexec sleep 100000\\n' > /usr/bin/df && chmod 755 /usr/bin/df")
	t.Cleanup(func() { _, _ = c.h.Exec(t.Context(), c.hosts[0].Index, "mv", "-f", "/usr/bin/df.real", "/usr/bin/df") })
	c.writeInventory(singleServer, nil)

	a := c.start(time.Minute, "preflight")
	a.waitFor(t, 30*time.Second, "the facts phase", func(e events.Event) bool {
		return e.Type == events.PhaseStarted && e.Phase == events.PhaseFacts
	})
	time.Sleep(2 * time.Second) // the facts command now hangs on df
	sig := time.Now()
	if err := a.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := a.wait(t)
	took := time.Since(sig)
	t.Logf("exit %d %s after SIGINT", r.code, took.Round(10*time.Millisecond))
	if r.code != 130 || took > 5*time.Second {
		r.dump(t)
		t.Fatalf("exit %d %s after SIGINT, want 130 within 5 s", r.code, took)
	}

	r = c.k3strap(4*time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 || r.duration < 2*time.Minute || r.duration > 2*time.Minute+30*time.Second {
		t.Fatalf("exit %d after %s, want 3 after the 2-minute facts deadline", r.code, r.duration)
	}
	said := ""
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "SSH" && e.Host == "cp1" {
			said = e.Finding.Message + " | " + e.Finding.Fix
		}
	}
	t.Log(said)
	if !strings.Contains(said, "gather facts on cp1 did not finish within 2m0s") || strings.Contains(said, "authorized_keys") || strings.Contains(said, "known_hosts") {
		t.Fatalf("the SSH finding does not name the hung facts command alone: %q", said)
	}
}
