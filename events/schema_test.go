// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package events_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/frontend"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(events.Schema()))
	if err != nil {
		t.Fatalf("schema.json is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema.json does not compile: %v", err)
	}
	return s
}

// emitAll emits one event of every kind through an Emitter into the JSON front-end (what
// `--output json` writes), with realistic payloads, and returns the lines.
func emitAll(t *testing.T) []string {
	t.Helper()
	var buf bytes.Buffer
	sink := &frontend.JSON{W: &buf, Verbose: true}
	em := events.Emitter{Sink: sink, Phase: "connect", Now: func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 123, time.UTC) }}
	em.Started("connecting to 2 hosts")
	em.Step("cp1", "connect", events.StatusOK, "connected to 192.0.2.10:22 as root")
	em.Step("w1", "connect", events.StatusFailed, "w1 (192.0.2.11:22): connect failed: i/o timeout")
	em.Finished(events.StatusOK, "")
	pf := em.WithPhase("preflight")
	pf.Finding("cp1", events.PreflightResult{Check: "CloudController", Severity: "error", Message: "kubelet runs with cloud-provider=external", Fix: "remove kubelet-arg cloud-provider=external"})
	pf.Finding("", events.PreflightResult{Check: "Swap", Severity: "ignored", Message: "swap is on"})
	pf.Warn("cp1", "clock skew 3 s")
	pf.Info("cp1", "kernel 6.1")
	up := em.WithPhase("upload")
	up.Progress("cp1", events.Upload{File: "/usr/local/bin/k3s", Bytes: 1 << 20, Total: 70 << 20})
	up.Progress("cp1", events.Upload{File: "/usr/local/bin/k3s", Bytes: 70 << 20, Total: 70 << 20, Done: true})
	em.WithPhase("install").Debug("cp1", "sh -c <install K3s script> /var/lib/k3strap/install.sh")
	sv := em.WithPhase("supervise")
	sv.Milestone("cp1", events.MilestoneInfo{Name: "api-ready", Seconds: 3.25})
	sv.Milestone("cp1", events.MilestoneInfo{Name: "subnet-env", Skipped: true, Detail: "flannel is off"})
	sv.Fail("cp1", "supervise", events.ErrorInfo{Message: "the uninitialized taint stayed", Fix: "line one\nline two", Diagnosis: "F1-cloud-controller",
		Evidence: []string{"journal: ..."}, Resume: "re-run `k3strap apply`"})
	em.WithPhase("findings").Doctor(events.DoctorFinding{ID: "F5-lost-taint", Severity: "error", Node: "cp1", Title: "taint gone",
		Evidence: []events.EvidenceLine{{Text: "node-taint: a=b:NoSchedule", Source: "kubectl get node cp1"}}, Commands: []string{"kubectl taint nodes cp1 a=b:NoSchedule"}, Repairable: true})
	em.WithPhase("dry-run").Emit(events.Event{Type: events.Info, Host: "cp1", Message: "config.yaml would change", Diff: "--- a\n+++ b\n"})
	em.WithPhase("apply").Summary(events.SummaryInfo{Command: "apply", OK: false, ExitCode: 5, Seconds: 80.5,
		Hosts:      []events.HostResult{{Host: "cp1", Role: "server", Status: events.StatusFailed, Message: "bring-up", SSHCommands: 9, FileTransfers: 4}},
		Kubeconfig: "/tmp/lab.kubeconfig", RancherURL: "https://rancher.192.0.2.10.sslip.io", Next: []string{"kubectl get nodes"}})
	// A fleet run: a site's own events carry the site; the fleet adds waves, site results and
	// a summary listing the sites.
	fl := em.WithPhase(events.PhaseFleet)
	wave := events.WaveInfo{Number: 1, Of: 3, Canary: true, Sites: []string{"store-1"}}
	fl.Wave(events.StatusRunning, "wave 1/3 (canary): store-1", wave)
	site := events.Emitter{Sink: events.SiteSink("store-1", sink), Phase: "connect", Now: em.Now}
	site.Step("cp1", "connect", events.StatusOK, "connected to 192.0.2.10:22 as root")
	res := events.SiteResult{Site: "store-1", Wave: 1, Status: events.SiteFailed, Action: "apply", ExitCode: 3, Exit: "preflight failed",
		Host: "cp1", Phase: "preflight", Message: "CloudController", Seconds: 2.5}
	fl.Site(res)
	wave.Failed = 1
	fl.Wave(events.StatusFailed, "wave 1/3 (canary): 1 failed", wave)
	fl.Summary(events.SummaryInfo{Command: "apply", OK: false, ExitCode: 3, Seconds: 3, Waves: 3,
		Sites: []events.SiteResult{res, {Site: "store-2", Wave: 2, Status: events.SitePending, Seconds: 0}}})
	var lines []string
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// TestSchemaValidatesEmittedEvents: every event the Emitter produces, as the JSON front-end
// writes it, is valid against schema.json, and carries the version field.
func TestSchemaValidatesEmittedEvents(t *testing.T) {
	s := compileSchema(t)
	lines := emitAll(t)
	if len(lines) != 22 {
		t.Fatalf("%d events written, want 22", len(lines))
	}
	types := map[string]bool{}
	for _, l := range lines {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(l))
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if err := s.Validate(inst); err != nil {
			t.Errorf("event does not match the schema: %s\n%v", l, err)
		}
		var e events.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e.Version != events.SchemaVersion {
			t.Errorf("event without version %d: %s", events.SchemaVersion, l)
		}
		types[string(e.Type)] = true
	}
	for _, ty := range allTypes {
		if !types[string(ty)] {
			t.Errorf("no %s event was emitted: the test does not cover it", ty)
		}
	}
}

// allTypes is every events.Type; the schema's enum must list exactly these.
var allTypes = []events.Type{events.PhaseStarted, events.PhaseFinished, events.HostStep, events.UploadProgress, events.Finding,
	events.DoctorFindingType, events.Milestone, events.Warning, events.Error, events.Info, events.Debug, events.Summary,
	events.WaveType, events.SiteResultType}

// TestSchemaRejects: the schema is not a rubber stamp.
func TestSchemaRejects(t *testing.T) {
	s := compileSchema(t)
	const ts = `"time":"2026-05-01T12:00:00Z"`
	bad := map[string]string{
		"no version":                      `{` + ts + `,"type":"info"}`,
		"other version":                   `{"v":2,` + ts + `,"type":"info"}`,
		"unknown type":                    `{"v":1,` + ts + `,"type":"progress"}`,
		"unknown field":                   `{"v":1,` + ts + `,"type":"info","token":"x"}`,
		"upload without payload":          `{"v":1,` + ts + `,"type":"upload_progress","host":"cp1"}`,
		"payload of another type":         `{"v":1,` + ts + `,"type":"info","upload":{"file":"f","bytes":1,"total":2}}`,
		"bad severity":                    `{"v":1,` + ts + `,"type":"preflight_finding","finding":{"check":"X","severity":"fatal","message":"m"}}`,
		"host step without status":        `{"v":1,` + ts + `,"type":"host_step","host":"cp1","step":"connect"}`,
		"summary with an unknown exit":    `{"v":1,` + ts + `,"type":"summary","summary":{"command":"apply","ok":false,"exitCode":11,"seconds":1}}`,
		"time that is not a time":         `{"v":1,"time":"yesterday","type":"info"}`,
		"negative bytes":                  `{"v":1,` + ts + `,"type":"upload_progress","host":"h","upload":{"file":"f","bytes":-1,"total":2}}`,
		"milestone without seconds":       `{"v":1,` + ts + `,"type":"milestone","host":"cp1","milestone":{"name":"api-ready"}}`,
		"unknown field in a host result":  `{"v":1,` + ts + `,"type":"summary","summary":{"command":"apply","ok":true,"exitCode":0,"seconds":1,"hosts":[{"host":"a","role":"server","status":"ok","sshCommands":1,"fileTransfers":0,"password":"x"}]}}`,
		"error event without explanation": `{"v":1,` + ts + `,"type":"error","message":"boom"}`,
		"wave without payload":            `{"v":1,` + ts + `,"type":"wave","status":"running"}`,
		"site result without a site":      `{"v":1,` + ts + `,"type":"site_result","status":"ok","siteResult":{"site":"s","status":"done","exitCode":0,"seconds":1}}`,
		"site result of another status":   `{"v":1,` + ts + `,"type":"site_result","site":"s","status":"ok","siteResult":{"site":"s","status":"great","exitCode":0,"seconds":1}}`,
		"empty site":                      `{"v":1,` + ts + `,"type":"info","site":""}`,
	}
	for name, doc := range bad {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := s.Validate(inst); err == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
}

// TestSchemaCoversEvent: every JSON field of Event and its payloads is described in the schema,
// and the type enum lists exactly the Type constants — a field added to events.go without the
// schema fails here.
func TestSchemaCoversEvent(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(events.Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	defs := doc["$defs"].(map[string]any)
	props := func(m map[string]any) []string {
		var out []string
		for k := range m["properties"].(map[string]any) {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	check := func(name string, typ reflect.Type, schema map[string]any) {
		var fields []string
		for f := range typ.Fields() {
			tag := strings.Split(f.Tag.Get("json"), ",")[0]
			if tag != "" && tag != "-" {
				fields = append(fields, tag)
			}
		}
		sort.Strings(fields)
		if got := props(schema); !slices.Equal(got, fields) {
			t.Errorf("%s: schema properties %v, Go fields %v", name, got, fields)
		}
	}
	check("Event", reflect.TypeFor[events.Event](), doc)
	check("upload", reflect.TypeFor[events.Upload](), defs["upload"].(map[string]any))
	check("finding", reflect.TypeFor[events.PreflightResult](), defs["finding"].(map[string]any))
	check("milestone", reflect.TypeFor[events.MilestoneInfo](), defs["milestone"].(map[string]any))
	check("error", reflect.TypeFor[events.ErrorInfo](), defs["error"].(map[string]any))
	check("summary", reflect.TypeFor[events.SummaryInfo](), defs["summary"].(map[string]any))
	check("hostResult", reflect.TypeFor[events.HostResult](), defs["hostResult"].(map[string]any))
	check("doctorFinding", reflect.TypeFor[events.DoctorFinding](), defs["doctorFinding"].(map[string]any))
	check("evidenceLine", reflect.TypeFor[events.EvidenceLine](), defs["evidenceLine"].(map[string]any))
	check("wave", reflect.TypeFor[events.WaveInfo](), defs["wave"].(map[string]any))
	check("siteResult", reflect.TypeFor[events.SiteResult](), defs["siteResult"].(map[string]any))

	var enum []string
	for _, v := range doc["properties"].(map[string]any)["type"].(map[string]any)["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	var want []string
	for _, ty := range allTypes {
		want = append(want, string(ty))
	}
	sort.Strings(enum)
	sort.Strings(want)
	if !slices.Equal(enum, want) {
		t.Errorf("schema type enum %v, Type constants %v", enum, want)
	}
	if v := doc["properties"].(map[string]any)["v"].(map[string]any)["const"]; v != float64(events.SchemaVersion) {
		t.Errorf("schema version const %v, SchemaVersion %d", v, events.SchemaVersion)
	}
}
