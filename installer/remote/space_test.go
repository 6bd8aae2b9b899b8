// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestWriteVerdict(t *testing.T) {
	c := &Client{cfg: Config{Host: "w1", User: "deploy"}}
	cause := errors.New(`sftp: "Failure" (SSH_FX_FAILURE)`)
	df := func(avail, mount, opts, writable string) []byte {
		return []byte("dir /usr/local/bin\navail " + avail + "\nmount " + mount + "\nifree 1000\nopts " + opts + "\nwritable " + writable + "\n")
	}
	for _, tc := range []struct {
		name string
		w    writeNeed
		out  []byte
		want string // "" = the cause itself
	}{
		{"full", writeNeed{dir: "/usr/local/bin", need: 68 << 20}, df("24576", "/usr/local/bin", "rw,relatime", "yes"),
			"w1: no space left on /usr/local/bin (24 MiB free, 68 MiB needed)"},
		{"full, on /", writeNeed{dir: "/usr/local/bin", need: 136 << 20, what: "68 MiB uploaded, then copied into place"},
			df("24576", "/", "rw", "yes"), "w1: no space left on /usr/local/bin (on the filesystem mounted at /) (24 MiB free, 136 MiB needed: 68 MiB uploaded, then copied into place)"},
		{"read-only", writeNeed{dir: "/usr/local/bin", need: 1}, df("999999", "/usr", "ro,nosuid", "no"), "w1: read-only filesystem: /usr/local/bin (on the filesystem mounted at /usr) is mounted read-only"},
		{"permission", writeNeed{dir: "/usr/local/bin", need: 1}, df("999999", "/", "rw", "no"), "w1: permission denied: deploy cannot write to /usr/local/bin"},
		{"inodes", writeNeed{dir: "/usr/local/bin", need: 1}, []byte("dir /usr/local/bin\navail 9999\nmount /\nifree 0\nwritable yes\n"), "w1: no free inodes on /usr/local/bin"},
		{"nothing wrong", writeNeed{dir: "/usr/local/bin", need: 1}, df("999999", "/", "rw", "yes"), ""},
		{"df failed", writeNeed{dir: "/usr/local/bin", need: 1}, []byte("dir /usr/local/bin\nwritable yes\n"), ""},
	} {
		err := c.writeVerdict(tc.w, tc.out, cause)
		if tc.want == "" {
			if err != cause {
				t.Errorf("%s: want the cause, got %v", tc.name, err)
			}
			continue
		}
		var we *WriteError
		if !errors.As(err, &we) || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, cause) || IsTransient(err) {
			t.Errorf("%s:\n got %v\nwant %s...", tc.name, err, tc.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 24 << 10: "24 KiB", 68 << 20: "68 MiB", 3 << 29: "1.5 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestUploadToFullDisk: an upload into a directory on a small tmpfs fails with what the
// filesystem says — no space, how much free and needed — and leaves no partial file; on the
// same tmpfs mounted read-only it says read-only. Needs root (mount).
func TestUploadToFullDisk(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	s := newTestServer(t)
	c := s.dial(t, nil)
	src, sum := bigFile(t, 4<<20)
	var err error
	within(t, 10*time.Second, "upload to a full disk", func() {
		_, err = c.WriteFileResumable(context.Background(), dir+"/k3s", 0o755, src, 4<<20, sum, nil)
	})
	var we *WriteError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "no space left on "+dir+" (1 MiB free, 8 MiB needed: 4 MiB uploaded, then copied into place)") {
		t.Fatalf("want no space named, got %v", err)
	}
	if IsTransient(err) {
		t.Error("a full disk is retried")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v %s", err, out)
	}
	err = c.WriteFile(context.Background(), dir+"/config.yaml", 0o600, strings.NewReader("x: 1\n"), 5, nil)
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "read-only filesystem: "+dir) {
		t.Fatalf("want read-only named, got %v", err)
	}
}
