// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package lock

import (
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The holder of a lock is named by the user's login name, the host and the pid — not a uid.
func TestHolderNamesUserHostPid(t *testing.T) {
	at := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	got := Holder("apply", at)
	want := ""
	if cu, err := user.Current(); err == nil && cu.Username != "" {
		want = cu.Username
	} else if u := os.Getenv("USER"); u != "" {
		want = u
	}
	if want == "" {
		t.Skip("this machine knows no name for uid " + strconv.Itoa(os.Getuid()) + " (no passwd entry, no $USER)")
	}
	host, _ := os.Hostname()
	prefix := want + "@" + host + " (pid " + strconv.Itoa(os.Getpid()) + ", k3strap apply since 2026-11-26T18:00:00Z)"
	if got != prefix {
		t.Fatalf("Holder = %q, want %q", got, prefix)
	}
	if strings.HasPrefix(got, "uid ") || strings.HasPrefix(got, strconv.Itoa(os.Getuid())+"@") {
		t.Fatalf("Holder names a uid: %q", got)
	}
}

// Without a passwd entry the name comes from $USER, then $LOGNAME; the uid only when nothing
// names the user.
func TestUserNameFallsBackToEnvironment(t *testing.T) {
	if _, err := user.Current(); err == nil {
		// os/user finds the user: the environment is not consulted; still, the name is one.
		if n := userName(); n == "" || strings.HasPrefix(n, "uid ") {
			t.Fatalf("userName = %q with a passwd entry", n)
		}
		return
	}
	t.Setenv("USER", "")
	t.Setenv("LOGNAME", "alice")
	if n := userName(); n != "alice" {
		t.Fatalf("userName = %q, want alice from $LOGNAME", n)
	}
}
