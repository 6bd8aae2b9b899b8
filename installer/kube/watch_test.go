// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/installer/remote"
)

// fakeStream prints lines (as kubectl's indented JSON would arrive) and then fails with err.
type fakeStream struct {
	lines []string
	err   error
	cmd   remote.Cmd
}

func (f *fakeStream) Host() string { return "cp1" }
func (f *fakeStream) Stream(_ context.Context, cmd remote.Cmd, onLine func(string)) error {
	f.cmd = cmd
	for _, l := range f.lines {
		onLine(l)
	}
	return f.err
}

func indented(t *testing.T, typ, name, rv string) []string {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"type": typ, "object": map[string]any{
		"kind": "Node", "apiVersion": "v1", "metadata": map[string]any{"name": name, "resourceVersion": rv}}}, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

func TestWatchNodes(t *testing.T) {
	var lines []string
	lines = append(lines, indented(t, "ADDED", "cp1", "10")...)
	lines = append(lines, indented(t, "MODIFIED", "a1", "12")...)
	lines = append(lines, indented(t, "DELETED", "a2", "13")...)
	f := &fakeStream{lines: lines, err: &remote.CommandError{Host: "cp1", ExitCode: 124}}
	var got []string
	err := WatchNodes(context.Background(), f, "", 90*time.Second+time.Millisecond, func(ev NodeEvent) {
		got = append(got, ev.Type+" "+ev.Node.Name+" "+ev.Node.ResourceVersion)
	})
	if err != nil {
		t.Fatalf("a watch ended by timeout(1) is a normal end, got %v", err)
	}
	if want := "ADDED cp1 10|MODIFIED a1 12|DELETED a2 13"; strings.Join(got, "|") != want {
		t.Errorf("events %q, want %q", strings.Join(got, "|"), want)
	}
	if s := f.cmd.String(); !strings.Contains(s, "91") || !strings.Contains(s, "--output-watch-events") {
		t.Errorf("command %s: want a 91 s bound and watch events", s)
	}

	f = &fakeStream{err: &remote.CommandError{Host: "cp1", ExitCode: 1, Stderr: "The connection to the server 127.0.0.1:6443 was refused"}}
	if err := WatchNodes(context.Background(), f, "", time.Minute, func(NodeEvent) {}); !errors.Is(err, ErrAPIDown) {
		t.Errorf("API down: got %v, want ErrAPIDown", err)
	}

	f = &fakeStream{lines: []string{`{"type": "ADDED", "object": {`, `not json`}}
	if err := WatchNodes(context.Background(), f, "", time.Minute, func(NodeEvent) {}); err == nil || !strings.Contains(err.Error(), "decoding") {
		t.Errorf("garbage: got %v, want a decoding error", err)
	}
}
