// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"al.essio.dev/pkg/shellescape"
)

// TestHostFactsGatheredOnce runs preflight's facts script and doctor's node script on this
// host: both print the host facts with host.sh and both are read by the same section parsers,
// so the facts judges on both sides read (hostname, addresses, memory, the disk under K3s's
// data root, the K3s binary, the clock) come out the same.
func TestHostFactsGatheredOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the scripts target Linux hosts")
	}
	sh := shell{argv: []string{"/bin/sh"}}
	// The facts script goes without comment lines (WithoutComments), host.sh's included.
	if q := "K3STRAP_HOST_SH=" + shellescape.Quote(HostScript()); !strings.Contains(Script(ScriptInput{}), WithoutComments(q)) || !strings.Contains(DoctorNodeScript, q) {
		t.Fatal("host.sh is not in both scripts")
	}
	sent := time.Now()
	pre, err := Parse(runScript(t, sh, Script(ScriptInput{}), ""))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-c", DoctorNodeScript, "k3strap-doctor"}, DoctorNodeArgs()...)
	doc := ParseDoctorNode(runShell(t, args))
	received := time.Now()
	for _, h := range []*Host{pre, &doc.Host} {
		if h.Hostname == "" || h.MemTotalKiB == 0 || h.MemAvailableKiB == 0 || h.DiskPath == "" || h.DiskTotalKiB == 0 || h.RemoteClock.IsZero() {
			t.Fatalf("host facts missing: hostname %q mem %d/%d disk %q %d clock %v", h.Hostname, h.MemTotalKiB, h.MemAvailableKiB, h.DiskPath, h.DiskTotalKiB, h.RemoteClock)
		}
		h.SetClockSkew(sent, received)
		if h.ClockSkew < -time.Minute || h.ClockSkew > time.Minute {
			t.Errorf("clock skew %s against this very host", h.ClockSkew)
		}
	}
	if pre.Hostname != doc.Hostname || !slices.Equal(pre.Addresses, doc.Addresses) || pre.MemTotalKiB != doc.MemTotalKiB ||
		pre.DiskPath != doc.DiskPath || pre.DiskTotalKiB != doc.DiskTotalKiB || pre.K3s.BinaryVersion != doc.K3s.BinaryVersion {
		t.Errorf("the same facts differ:\npreflight %q %v mem %d disk %q %d k3s %q\ndoctor    %q %v mem %d disk %q %d k3s %q",
			pre.Hostname, pre.Addresses, pre.MemTotalKiB, pre.DiskPath, pre.DiskTotalKiB, pre.K3s.BinaryVersion,
			doc.Hostname, doc.Addresses, doc.MemTotalKiB, doc.DiskPath, doc.DiskTotalKiB, doc.K3s.BinaryVersion)
	}
	if d := pre.DiskFreeKiB - doc.DiskFreeKiB; d > pre.DiskTotalKiB/100 || -d > pre.DiskTotalKiB/100 {
		t.Errorf("free disk %d vs %d KiB", pre.DiskFreeKiB, doc.DiskFreeKiB)
	}
}

// runShell runs /bin/sh with args under a 60 s deadline and returns its stdout (the doctor's
// script takes its argument after -c SCRIPT NAME).
func runShell(t *testing.T, args []string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/bin/sh", args...).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("doctor's node script: %v", err)
	}
	return out
}

// TestDoctorNodeRestartTimes runs doctor's node script with systemctl and journalctl stubs in
// front of PATH (a systemd unit k3s whose journal holds two restart lines weeks apart, as
// systemd writes them, among other lines): the script prints the restart lines' times and
// ParseDoctorNode reads them in the host's clock, oldest first, with RestartTimesRead set.
func TestDoctorNodeRestartTimes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the scripts target Linux hosts")
	}
	bin := t.TempDir()
	stub := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub("systemctl", `case "$*" in
*FragmentPath*k3s-agent*) ;;
*FragmentPath*) echo /etc/systemd/system/k3s.service ;;
*ActiveState*) printf 'ActiveState=activating\nSubState=start\nNRestarts=2\n' ;;
esac
`)
	stub("journalctl", `case "$*" in
*short-unix*) cat <<'J'
1761955200.000001 h1 systemd[1]: Starting k3s.service - Lightweight Kubernetes...
1761955300.250000 h1 systemd[1]: k3s.service: Main process exited, code=killed, status=9/KILL
1761955305.500000 h1 systemd[1]: k3s.service: Scheduled restart job, restart counter is at 1.
1763337600.750000 h1 systemd[1]: k3s.service: Scheduled restart job, restart counter is at 2.
1763337601.000000 h1 k3s[900]: time="2025-11-17T00:00:01Z" level=info msg="Starting k3s v1.36.3+k3s1"
J
;;
*) echo 'Nov 17 00:00:01 h1 k3s[900]: time="2025-11-17T00:00:01Z" level=info msg="Starting k3s v1.36.3+k3s1"' ;;
esac
`)
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	args := append([]string{"-c", DoctorNodeScript, "k3strap-doctor"}, DoctorNodeArgs()...)
	doc := ParseDoctorNode(runShell(t, args))
	if doc.Unit != "k3s" || doc.Restarts != 2 || !doc.RestartTimesRead {
		t.Fatalf("unit %q restarts %d read %v", doc.Unit, doc.Restarts, doc.RestartTimesRead)
	}
	want := []time.Time{time.Unix(1761955305, 500000000), time.Unix(1763337600, 750000000)}
	if len(doc.RestartTimes) != len(want) {
		t.Fatalf("restart times %v, want %v", doc.RestartTimes, want)
	}
	for i := range want {
		if d := doc.RestartTimes[i].Sub(want[i]); d > time.Millisecond || d < -time.Millisecond {
			t.Errorf("restart %d at %v, want %v", i, doc.RestartTimes[i], want[i])
		}
	}
	if len(doc.Journal) == 0 {
		t.Error("the journal tail is empty")
	}
}
