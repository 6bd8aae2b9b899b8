// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

var at = time.Date(2026, 5, 1, 9, 4, 5, 0, time.Local)

// run emits a fixed run (every kind of event) into sink.
func run(sink events.Sink) {
	em := events.Emitter{Sink: sink, Phase: "connect", Now: func() time.Time { return at }}
	em.Started("connecting to 1 host")
	em.Step("cp1", "connect", events.StatusOK, "connected to 192.0.2.10:22 as root")
	em.WithPhase("install").Debug("cp1", "sh -c <install K3s script> with INSTALL_K3S_EXEC=server K3S_TOKEN=abc123")
	up := em.WithPhase("upload")
	up.Progress("cp1", events.Upload{File: "/usr/local/bin/k3s", Bytes: 1 << 20, Total: 4 << 20})
	up.Progress("cp1", events.Upload{File: "/usr/local/bin/k3s", Bytes: 4 << 20, Total: 4 << 20, Done: true})
	em.WithPhase("preflight").Finding("cp1", events.PreflightResult{Check: "Swap", Severity: "warning", Message: "swap is on", Fix: "swapoff -a"})
	em.WithPhase("supervise").Milestone("cp1", events.MilestoneInfo{Name: "api-ready", Seconds: 2.25})
	em.WithPhase("supervise").Warn("cp1", "slow disk")
	em.WithPhase("supervise").Fail("cp1", "supervise", events.ErrorInfo{Message: "stalled", Fix: "a\nb", Evidence: []string{"journal line"}, Resume: "re-run"})
	em.WithPhase("apply").Summary(events.SummaryInfo{Command: "apply", ExitCode: 5, Seconds: 12.34,
		Hosts: []events.HostResult{{Host: "cp1", Role: "server", Status: events.StatusFailed, Message: "bring-up"}}})
}

var lineRE = regexp.MustCompile(`^\d\d:\d\d:\d\d \S+ \S+ `)

func TestPlainEveryLineHasThePrefix(t *testing.T) {
	var buf bytes.Buffer
	run(&Plain{W: &buf, Verbose: true})
	out := buf.String()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !lineRE.MatchString(l) {
			t.Errorf("line without `HH:MM:SS host phase` prefix: %q", l)
		}
	}
	for _, want := range []string{
		"09:04:05 cp1 connect connect: ok (connected to 192.0.2.10:22 as root)",
		"09:04:05 cp1 upload /usr/local/bin/k3s 1.0 MiB/4.0 MiB",
		"09:04:05 cp1 preflight [WARNING Swap] swap is on",
		"09:04:05 cp1 preflight     fix: swapoff -a",
		"09:04:05 cp1 supervise +2.2s api-ready",
		"09:04:05 cp1 supervise     fix: a",
		"09:04:05 cp1 supervise     fix: b",
		"09:04:05 - apply apply FAILED (exit 5) in 12.3s",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing line %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "abc123") || !strings.Contains(out, "K3S_TOKEN=********") {
		t.Errorf("verbose output does not mask the token:\n%s", out)
	}
}

func TestPlainQuietAndVerbose(t *testing.T) {
	var normal, quiet, verbose bytes.Buffer
	run(&Plain{W: &normal})
	run(&Plain{W: &quiet, Quiet: true})
	run(&Plain{W: &verbose, Verbose: true})
	if strings.Contains(normal.String(), "install") || strings.Contains(normal.String(), "1.0 MiB/4.0 MiB") {
		t.Errorf("default output shows debug lines or intermediate upload progress:\n%s", normal.String())
	}
	if !strings.Contains(normal.String(), "4.0 MiB/4.0 MiB") {
		t.Errorf("default output lacks the finished upload:\n%s", normal.String())
	}
	if !strings.Contains(verbose.String(), "sh -c <install K3s script>") {
		t.Errorf("verbose output lacks the remote command line:\n%s", verbose.String())
	}
	q := quiet.String()
	for _, gone := range []string{"connected to", "api-ready", "upload"} {
		if strings.Contains(q, gone) {
			t.Errorf("quiet output shows %q:\n%s", gone, q)
		}
	}
	for _, kept := range []string{"WARNING slow disk", "[WARNING Swap]", "ERROR stalled", "apply FAILED"} {
		if !strings.Contains(q, kept) {
			t.Errorf("quiet output lacks %q:\n%s", kept, q)
		}
	}
}

func TestPlainMultiLineAndControlCharacters(t *testing.T) {
	e := events.Event{Time: at, Type: events.Info, Host: "cp1", Phase: "install", Message: "first\nsecond \x1b[31mred\x1b[0m\x07"}
	got := PlainLines(e)
	want := []string{"09:04:05 cp1 install first", "09:04:05 cp1 install     second red"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestPlainNilPayloads(t *testing.T) {
	for _, ty := range []events.Type{events.UploadProgress, events.Finding, events.Milestone, events.Error, events.Summary} {
		var buf bytes.Buffer
		(&Plain{W: &buf, Verbose: true}).Emit(events.Event{Time: at, Type: ty, Message: "m"})
		if !strings.Contains(buf.String(), " m") {
			t.Errorf("%s without payload: %q", ty, buf.String())
		}
	}
}

// TestSanitizeMasks: text shown to the user passes through k3s.Mask (the one masking rule).
func TestSanitizeMasks(t *testing.T) {
	for in, want := range map[string]string{
		"env K3S_TOKEN=abc INSTALL_K3S_EXEC=server":              "env K3S_TOKEN=******** INSTALL_K3S_EXEC=server",
		"k3s server --token s3cr3t --debug":                      "k3s server --token ******** --debug",
		"--agent-token=xyz":                                      "--agent-token=********",
		"token K10" + strings.Repeat("ab", 32) + "::server:pw x": "token ******** x",
		"nothing secret here: token-file is a path":              "nothing secret here: token-file is a path",
		"\x1b[31mred\x1b[0m SUDO_PASSWORD=x":                     "red SUDO_PASSWORD=********",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPlainStepNamedLikeASecret: a step named like a secret key (rotate token's "token") keeps
// its line; a secret in the message is still masked.
func TestPlainStepNamedLikeASecret(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lines := PlainLines(events.Event{Time: at, Type: events.HostStep, Host: "cp1", Phase: "rotate-token", Step: "token",
		Status: events.StatusChanged, Message: "server token rotated (the old token no longer joins)"})
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "token: changed (server token rotated (the old token no longer joins))") {
		t.Errorf("step line: %q", lines)
	}
	lines = PlainLines(events.Event{Time: at, Type: events.HostStep, Host: "cp1", Step: "token", Status: events.StatusFailed,
		Message: "k3s token rotate --token s3cr3t failed"})
	if len(lines) != 1 || strings.Contains(lines[0], "s3cr3t") {
		t.Errorf("a secret in the message shows: %q", lines)
	}
}

func TestJSONQuietVerbose(t *testing.T) {
	count := func(j *JSON) map[events.Type]int {
		var buf bytes.Buffer
		j.W = &buf
		run(j)
		n := map[events.Type]int{}
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var e events.Event
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			n[e.Type]++
		}
		return n
	}
	if n := count(&JSON{}); n[events.Debug] != 0 || n[events.UploadProgress] != 2 {
		t.Errorf("default JSON: %v", n)
	}
	if n := count(&JSON{Verbose: true}); n[events.Debug] != 1 {
		t.Errorf("verbose JSON: %v", n)
	}
	if n := count(&JSON{Quiet: true}); n[events.HostStep] != 0 || n[events.Summary] != 1 || n[events.Error] != 1 {
		t.Errorf("quiet JSON: %v", n)
	}
}

func TestPlainDiff(t *testing.T) {
	e := events.Event{Time: at, Type: events.Info, Host: "cp1", Phase: "dry-run", Message: "would replace x", Diff: "--- x\n+++ x\n-a\n+b\n"}
	got := strings.Join(PlainLines(e), "\n")
	want := "09:04:05 cp1 dry-run would replace x\n09:04:05 cp1 dry-run     | --- x\n09:04:05 cp1 dry-run     | +++ x\n09:04:05 cp1 dry-run     | -a\n09:04:05 cp1 dry-run     | +b"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
