// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTimelineCommand: `k3strap timeline` turns the recorded apply (frontend/testdata) into an
// HTML page naming every host, from a file (-O) and from stdin (-f -, page on stdout); plain
// lines (what --log-file holds) and a missing -f are usage errors (exit 2) that quote nothing.
func TestTimelineCommand(t *testing.T) {
	rec := filepath.Join("..", "..", "frontend", "testdata", "apply-whole-cluster.jsonl")
	out := filepath.Join(t.TempDir(), "run.html")
	code, _, errOut := runCLI("timeline", "-f", rec, "-O", out)
	if code != 0 {
		t.Fatalf("timeline: exit %d: %s", code, errOut)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"cp1", "cp2", "cp3", "a1", "a2"} {
		if !bytes.Contains(page, []byte(`data-row="`+h+`"`)) {
			t.Errorf("page has no row for %s", h)
		}
	}
	if !strings.Contains(errOut, "wrote "+out) {
		t.Errorf("stderr %q does not say where the page went", errOut)
	}

	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"timeline", "-f", "-"}, bytes.NewReader(data), &stdout, &stderr); code != 0 || !bytes.Equal(stdout.Bytes(), page) {
		t.Errorf("timeline -f -: exit %d, %d bytes (want the same %d bytes as -O): %s", code, stdout.Len(), len(page), stderr.String())
	}

	plain := "19:38:14 cp1 connect connect: ok K3S_TOKEN=K10secret\n"
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"timeline", "-f", "-"}, strings.NewReader(plain), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "<stdin>:1: not a k3strap JSON event") || strings.Contains(stderr.String(), "K10secret") {
		t.Errorf("plain lines: exit %d, stderr %q; want 2 naming <stdin>:1 without the line", code, stderr.String())
	}
	if code, _, errOut := runCLI("timeline"); code != 2 || !strings.Contains(errOut, "-f events.jsonl") {
		t.Errorf("no -f: exit %d, stderr %q", code, errOut)
	}
}
