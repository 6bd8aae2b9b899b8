// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"bytes"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// recordedRun is an apply recorded from the simulator e2e (TestWholeCluster: 3 servers,
// 2 agents), its `-o json` stdout as written.
const recordedRun = "testdata/apply-whole-cluster.jsonl"

// wantMilestones are the bring-up milestones every started server reports (k3s.Milestones).
var wantMilestones = []string{"service-active", "api-ready", "node-registered", "uninitialized-taint-gone", "podcidr-set", "subnet-env", "node-ready"}

func readRecorded(t *testing.T, name string) []events.Event {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := ReadEvents(f, name)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// expected lists, from the events themselves, every row's stages and marks the page must show.
func expected(evs []events.Event) (hosts map[string]bool, stages map[string]map[string]bool, marks map[string]map[string]bool) {
	hosts, stages, marks = map[string]bool{}, map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, e := range evs {
		if e.Host == "" || e.Type == events.Debug {
			continue
		}
		h := e.Host
		if e.Site != "" {
			h = e.Site + "/" + e.Host
		}
		hosts[h] = true
		if stages[h] == nil {
			stages[h], marks[h] = map[string]bool{}, map[string]bool{}
		}
		if st := Stage(e.Phase); st != "" {
			stages[h][st] = true
		}
		if e.Milestone != nil && !e.Milestone.Skipped {
			marks[h][e.Milestone.Name] = true
		}
		if e.Type == events.Error {
			marks[h]["failed"] = true
		}
		if e.Step == "node" && strings.HasPrefix(e.Message, "node Ready") || e.Milestone != nil && e.Milestone.Name == "node-ready" {
			marks[h]["Ready"] = true
		}
	}
	return
}

var (
	barRE  = regexp.MustCompile(`data-stage="([^"]*)"`)
	markRE = regexp.MustCompile(`data-milestone="([^"]*)"`)
)

// pageRows maps each row's label to the stages and marks drawn in it (from the HTML/DOM).
func pageRows(page string) (map[string]map[string]bool, map[string]map[string]bool) {
	bars, marks := map[string]map[string]bool{}, map[string]map[string]bool{}
	parts := strings.Split(page, `<g class="row" data-row="`)
	for _, p := range parts[1:] {
		label := html.UnescapeString(p[:strings.Index(p, `"`)])
		bars[label], marks[label] = map[string]bool{}, map[string]bool{}
		for _, m := range barRE.FindAllStringSubmatch(p, -1) {
			bars[label][html.UnescapeString(m[1])] = true
		}
		for _, m := range markRE.FindAllStringSubmatch(p, -1) {
			marks[label][html.UnescapeString(m[1])] = true
		}
	}
	return bars, marks
}

func assertPage(t *testing.T, evs []events.Event, page string) {
	t.Helper()
	hosts, stages, marks := expected(evs)
	if len(hosts) == 0 {
		t.Fatal("the stream has no host events")
	}
	bars, got := pageRows(page)
	for h := range hosts {
		if bars[h] == nil {
			t.Errorf("host %s has no row", h)
			continue
		}
		for s := range stages[h] {
			if !bars[h][s] {
				t.Errorf("host %s: stage %s not drawn (drawn: %v)", h, s, bars[h])
			}
		}
		for m := range marks[h] {
			if !got[h][m] {
				t.Errorf("host %s: mark %s not drawn (drawn: %v)", h, m, got[h])
			}
		}
	}
	for _, bad := range []string{"<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("page holds %q: not self-contained", bad)
		}
	}
}

func TestTimelineRecordedRun(t *testing.T) {
	evs := readRecorded(t, recordedRun)
	var buf bytes.Buffer
	if err := Timeline(&buf, evs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	assertPage(t, evs, page)
	// The recorded apply: every host connects, uploads, installs and joins; every server
	// reports every milestone.
	_, stages, marks := expected(evs)
	for _, h := range []string{"cp1", "cp2", "cp3", "a1", "a2"} {
		for _, s := range []string{"connect", "facts", "upload", "install"} {
			if !stages[h][s] {
				t.Errorf("recording: %s has no %s events", h, s)
			}
		}
		if !marks[h]["Ready"] {
			t.Errorf("recording: %s never Ready", h)
		}
	}
	for _, m := range wantMilestones {
		if !marks["cp1"][m] {
			t.Errorf("recording: cp1 lacks milestone %s", m)
		}
	}
	if !strings.Contains(html.UnescapeString(page), "<title>cp1 api-ready at +") {
		t.Error("milestones have no hover title")
	}
	// Hosts in the inventory's order (the summary's), the cluster row first.
	last := strings.Index(page, `data-row="cluster"`)
	for _, h := range []string{"cp1", "cp2", "cp3", "a1", "a2"} {
		i := strings.Index(page, `data-row="`+h+`"`)
		if i < last {
			t.Errorf("row %s out of the inventory's order", h)
		}
		last = i
	}
	if n := strings.Count(page, `class="axis"`); n < 3 {
		t.Errorf("time axis has %d ticks", n)
	}
}

// A failed run: the failing host's bar and the error are drawn in red with the message.
func TestTimelineMarksFailures(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	now := t0
	rec := &events.Recorder{}
	em := events.Emitter{Sink: rec, Phase: events.PhaseConnect, Now: func() time.Time { return now }}
	em.Started("connecting")
	em.Step("cp1", "connect", events.StatusOK, "ok")
	now = now.Add(2 * time.Second)
	sup := em.WithPhase(events.PhaseSupervise)
	sup.Milestone("cp1", events.MilestoneInfo{Name: "service-active", Seconds: 1})
	now = now.Add(40 * time.Second)
	sup.Fail("cp1", "supervise", events.ErrorInfo{Message: "stalled <uninitialized> taint", Fix: "set cloud-provider"})
	em.WithPhase("apply").Summary(events.SummaryInfo{Command: "apply", ExitCode: 5, Seconds: 42})
	var buf bytes.Buffer
	if err := Timeline(&buf, rec.Events()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	assertPage(t, rec.Events(), page)
	for _, want := range []string{`class="s-start failed"`, `class="failmark"`, "stalled &lt;uninitialized&gt; taint", "FAILED (exit 5)", `<tr class="failed">`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// A fleet run: a row per site labelled with its wave, the waves on top, hosts as site/host.
func TestTimelineFleet(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	now := t0
	rec := &events.Recorder{}
	fl := events.Emitter{Sink: rec, Phase: events.PhaseFleet, Now: func() time.Time { return now }}
	for i, wave := range [][]string{{"store-1"}, {"store-2", "store-3"}} {
		fl.Wave(events.StatusRunning, "wave", events.WaveInfo{Number: i + 1, Of: 2, Canary: i == 0, Sites: wave})
		for _, s := range wave {
			em := events.Emitter{Sink: events.SiteSink(s, rec), Phase: events.PhaseConnect, Now: func() time.Time { return now }}
			em.Step("edge1", "connect", events.StatusOK, "ok")
			now = now.Add(3 * time.Second)
			em.WithPhase(events.PhaseUpload).Progress("edge1", events.Upload{File: "/usr/local/bin/k3s", Bytes: 10, Total: 10, Done: true})
			em.WithPhase(events.PhaseSupervise).Milestone("edge1", events.MilestoneInfo{Name: "node-ready", Seconds: 20})
			now = now.Add(20 * time.Second)
			fl.Site(events.SiteResult{Site: s, Wave: i + 1, Status: events.SiteDone, Action: "apply", Seconds: 23})
		}
		fl.Wave(events.StatusOK, "wave done", events.WaveInfo{Number: i + 1, Of: 2, Sites: wave, Done: len(wave)})
	}
	var buf bytes.Buffer
	if err := Timeline(&buf, rec.Events()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if d := os.Getenv("K3STRAP_TIMELINE_FLEET"); d != "" { // to look at it
		_ = os.WriteFile(d, buf.Bytes(), 0o644)
	}
	assertPage(t, rec.Events(), page)
	bars, _ := pageRows(page)
	if !strings.Contains(page, "fleet waves wave 1: &#43;0s, took 23s — canary: store-1") {
		t.Error("wave 1 is not one bar from its start to its end, marked canary")
	}
	for row, stage := range map[string]string{"fleet waves": "wave 1", "wave 2 · site store-3": "site", "wave 1 · site store-1": "site"} {
		if !bars[row][stage] {
			t.Errorf("row %q lacks %q (rows: %v)", row, stage, bars)
		}
	}
}

func TestReadEventsErrors(t *testing.T) {
	for in, want := range map[string]string{
		"": "run.jsonl: no events",
		`{"v":1,"time":"2026-05-01T09:00:00Z","type":"info"}` + "\n09:00:00 cp1 connect connect: ok K3S_TOKEN=secret\n": "run.jsonl:2: not a k3strap JSON event",
		`{"v":1}`: "run.jsonl:1: not a k3strap JSON event",
	} {
		_, err := ReadEvents(strings.NewReader(in), "run.jsonl")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("ReadEvents(%q) = %v, want %q without the line's text", in, err, want)
		}
	}
}

// TestTimelineInChromium renders the recorded run's page in headless Chromium (Debian package
// chromium, installed by `make setup`) and checks the DOM it builds names every host, stage and
// milestone, and that a screenshot is made.
func TestTimelineInChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (make setup installs it): the page is not rendered in a browser")
	}
	evs := readRecorded(t, recordedRun)
	dir := t.TempDir()
	file := filepath.Join(dir, "run.html")
	var buf bytes.Buffer
	if err := Timeline(&buf, evs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir=" + filepath.Join(dir, "profile")}
	dom, err := exec.Command(bin, append(args, "--dump-dom", "file://"+file)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	assertPage(t, evs, string(dom))
	shot := filepath.Join(dir, "run.png")
	if out, err := exec.Command(bin, append(args, "--window-size=1300,900", "--screenshot="+shot, "file://"+file)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Fatalf("screenshot %s: %v (size %v)", shot, err, st)
	}
	if d := os.Getenv("K3STRAP_TIMELINE_SHOT"); d != "" { // to look at it
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(d, b, 0o644)
	}
}
