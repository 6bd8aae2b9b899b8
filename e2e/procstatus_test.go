// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// procStatusKiB reads /proc/PID/status and returns its memory fields (VmRSS, VmHWM, RssAnon,
// RssFile, ...: the lines whose value ends in " kB") in KiB. The error is the read's: the
// process is gone.
func procStatusKiB(pid string) (map[string]int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		v, kb := strings.CutSuffix(strings.TrimSpace(v), " kB")
		if !ok || !kb {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			m[k] = n
		}
	}
	return m, nil
}

// TestProcStatusKiB reads this test process's own memory fields.
func TestProcStatusKiB(t *testing.T) {
	m, err := procStatusKiB(strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if m["VmRSS"] <= 0 || m["RssAnon"] <= 0 || m["VmHWM"] < m["VmRSS"] {
		t.Errorf("memory fields %v", m)
	}
	if _, err := procStatusKiB("0"); err == nil {
		t.Error("pid 0 read without an error")
	}
}
