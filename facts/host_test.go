// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"context"
	"os/exec"
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
	if q := "K3STRAP_HOST_SH=" + shellescape.Quote(HostScript()); !strings.Contains(Script(ScriptInput{}), q) || !strings.Contains(DoctorNodeScript, q) {
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
