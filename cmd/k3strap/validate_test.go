// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sshTrap listens where the inventory's hosts point and counts connections: validate must
// open none.
func sshTrap(t *testing.T) (port int, dials *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", ":0") // every loopback address 127.0.0.x
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	dials = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			_ = c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, dials
}

func inventoryFile(t *testing.T, port int, k3s, hosts string) string {
	t.Helper()
	doc := fmt.Sprintf(`apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: test}
spec:
  ssh:
    user: root
    port: %d
    connectTimeout: 60s
  k3s:
%s
  hosts:
%s`, port, k3s, hosts)
	p := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func runValidate(t *testing.T, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	t.Setenv("K3STRAP_FILE", "")
	var out, errb bytes.Buffer
	start := time.Now()
	code = run(context.Background(), append([]string{"validate"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String(), time.Since(start)
}

// TestValidateF1 is the acceptance case: the F1 inventory exits 2 naming CloudController and
// its fix, without any connection to the hosts.
func TestValidateF1(t *testing.T) {
	port, dials := sshTrap(t)
	f := inventoryFile(t, port, `    version: v1.36.3+k3s1
    config:
      disable-cloud-controller: true
      kubelet-arg: [cloud-provider=external]`, `    - {name: cp1, address: 127.0.0.1, role: server}
    - {name: w1, address: 127.0.0.2, role: agent}`)
	code, out, errOut, took := runValidate(t, "-f", f)
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "[ERROR CloudController] cp1:") || !strings.Contains(out, "fix: ") || !strings.Contains(errOut, "CloudController") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if n := dials.Load(); n != 0 || took > 10*time.Second {
		t.Errorf("validate connected %d times and took %s", n, took)
	}
	// Ignoring the check lets it pass with a warning.
	if code, out, errOut, _ := runValidate(t, "-f", f, "--ignore-preflight-errors=CloudController"); code != 0 || !strings.Contains(out, "[WARNING CloudController]") {
		t.Errorf("ignored: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestValidateCriticalConfig: servers may differ in disable-scheduler (not one of K3s's
// critical keys); embedded-registry per server is refused.
func TestValidateCriticalConfig(t *testing.T) {
	port, dials := sshTrap(t)
	ok := inventoryFile(t, port, `    version: v1.36.3+k3s1`, `    - {name: cp1, address: 127.0.0.1, role: server}
    - {name: cp2, address: 127.0.0.2, role: server, k3s: {config: {disable-scheduler: true}}}
    - {name: cp3, address: 127.0.0.3, role: server}`)
	if code, out, errOut, _ := runValidate(t, "-f", ok); code != 0 || strings.Contains(out, "CriticalConfig]") {
		t.Errorf("disable-scheduler: exit %d\n%s\n%s", code, out, errOut)
	}
	bad := inventoryFile(t, port, `    version: v1.36.3+k3s1`, `    - {name: cp1, address: 127.0.0.1, role: server}
    - {name: cp2, address: 127.0.0.2, role: server, k3s: {config: {embedded-registry: true}}}
    - {name: cp3, address: 127.0.0.3, role: server}`)
	code, out, errOut, _ := runValidate(t, "-f", bad)
	if code != 2 || !strings.Contains(out+errOut, "embedded-registry") {
		t.Errorf("embedded-registry: exit %d\n%s\n%s", code, out, errOut)
	}
	if dials.Load() != 0 {
		t.Error("validate connected")
	}
}

// TestValidateAirgapRelease: spec.k3s.version v1.31.4+k3s1 with a v1.36.3+k3s1 airgap binary
// is refused before anything is installed, naming both versions and the file.
func TestValidateAirgapRelease(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "k3s")
	if err := os.WriteFile(bin, []byte("\x7fELF\x00k3s version v1.36.3+k3s1 (deadbeef)\x00"), 0o755); err != nil {
		t.Fatal(err)
	}
	port, _ := sshTrap(t)
	f := inventoryFile(t, port, fmt.Sprintf(`    version: v1.31.4+k3s1
    install: airgap
    airgap:
      amd64: {binary: %s}`, bin), `    - {name: cp1, address: 127.0.0.1, role: server}`)
	code, out, errOut, _ := runValidate(t, "-f", f)
	want := "spec.k3s.version is v1.31.4+k3s1 but the airgap binary " + bin + " is v1.36.3+k3s1"
	if code != 2 || !strings.Contains(out, "[ERROR AirgapRelease]") || !strings.Contains(out, want) || !strings.Contains(errOut, "AirgapRelease") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestValidateUnreadableInventory: a missing file or a directory is exit 2 with the name and
// a fix.
func TestValidateUnreadableInventory(t *testing.T) {
	dir := t.TempDir()
	for name, path := range map[string]string{"missing": filepath.Join(dir, "nope.yaml"), "directory": dir} {
		code, _, errOut, _ := runValidate(t, "-f", path)
		if code != 2 || !strings.Contains(errOut, path) || !strings.Contains(errOut, "fix:") {
			t.Errorf("%s: exit %d, stderr %q", name, code, errOut)
		}
	}
	if os.Geteuid() != 0 { // root reads anything
		p := filepath.Join(dir, "secret.yaml")
		if err := os.WriteFile(p, []byte("x: y\n"), 0o000); err != nil {
			t.Fatal(err)
		}
		code, _, errOut, _ := runValidate(t, "-f", p)
		if code != 2 || !strings.Contains(errOut, p) || !strings.Contains(errOut, "chmod") {
			t.Errorf("unreadable: exit %d, stderr %q", code, errOut)
		}
	}
}

// TestValidateCapsErrors: an inventory with thousands of problems prints a few dozen and says
// how many more there are.
func TestValidateCapsErrors(t *testing.T) {
	var hosts strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&hosts, "    - {name: Bad_Name_%d, address: 10.0.%d.%d, role: server}\n", i, i/250, i%250+1)
	}
	f := inventoryFile(t, 22, "    version: v1.36.3+k3s1", hosts.String())
	code, _, errOut, took := runValidate(t, "-f", f)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 2 || len(lines) > maxPrintedErrors+2 || !strings.Contains(lines[len(lines)-1], "more problems not shown") {
		t.Errorf("exit %d, %d lines, last %q (took %s)", code, len(lines), lines[len(lines)-1], took)
	}
}
