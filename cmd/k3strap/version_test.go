// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// runCLI runs k3strap in-process with args and returns its exit code, stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func ptr[T any](v T) *T { return &v }

// TestReadBuildInfo: the toolchain's stamp (module version, VCS revision, time, dirty flag, Go
// version) is reported; -X main.version wins over it; nothing known gives "dev" and the running
// toolchain.
func TestReadBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/k3strap/k3strap", Version: "v0.0.0-20261126181819-c1488a4abcde+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "c1488a4abcdef0123456789abcdef0123456789a"},
			{Key: "vcs.time", Value: "2026-11-26T18:18:19Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name      string
		ldVersion string
		bi        *debug.BuildInfo
		want      buildInfo
	}{
		{"go build in a checkout", unsetVersion, stamped, buildInfo{
			Version: "v0.0.0-20261126181819-c1488a4abcde+dirty", Revision: "c1488a4abcdef0123456789abcdef0123456789a",
			Time: "2026-11-26T18:18:19Z", Dirty: ptr(true), GoVersion: "go1.99.1", Platform: platform}},
		{"-X main.version wins", "v0.3.0", stamped, buildInfo{
			Version: "v0.3.0", Revision: "c1488a4abcdef0123456789abcdef0123456789a",
			Time: "2026-11-26T18:18:19Z", Dirty: ptr(true), GoVersion: "go1.99.1", Platform: platform}},
		{"go install module@tag", unsetVersion, &debug.BuildInfo{GoVersion: "go1.99.2", Main: debug.Module{Version: "v0.3.1"}},
			buildInfo{Version: "v0.3.1", GoVersion: "go1.99.2", Platform: platform}},
		{"go run: (devel), clean tree", unsetVersion, &debug.BuildInfo{GoVersion: "go1.99.3", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "false"}}},
			buildInfo{Version: "dev", Dirty: ptr(false), GoVersion: "go1.99.3", Platform: platform}},
		{"no build info", "", nil, buildInfo{Version: "dev", GoVersion: runtime.Version(), Platform: platform}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readBuildInfo(tc.ldVersion, tc.bi); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("readBuildInfo(%q, ...) =\n  %+v\nwant\n  %+v", tc.ldVersion, got, tc.want)
			}
		})
	}
}

// TestVersionCommand: plain output starts with the "k3strap VERSION" line and names the Go
// version and platform; -o json and --output yaml give one object with the same facts as
// currentBuild; a bad -o value is a usage error (exit 2) naming the allowed values.
func TestVersionCommand(t *testing.T) {
	want := currentBuild()

	code, out, errOut := runCLI("version")
	if code != 0 {
		t.Fatalf("version: exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != "k3strap "+want.Version {
		t.Errorf("first line %q, want %q", lines[0], "k3strap "+want.Version)
	}
	for _, w := range []string{"  go        " + want.GoVersion, "  platform  " + want.Platform} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("plain output lacks %q:\n%s", w, out)
		}
	}

	for _, args := range [][]string{{"version", "-o", "json"}, {"version", "--output", "json"}, {"-o", "json", "version"}} {
		code, out, errOut = runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		var got buildInfo
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%v: not one JSON object: %v\n%s", args, err, out)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: %+v, want %+v", args, got, want)
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(out), &fields); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"version", "goVersion", "platform"} {
			if _, ok := fields[k]; !ok {
				t.Errorf("%v: JSON lacks %q: %s", args, k, out)
			}
		}
	}

	code, out, errOut = runCLI("version", "--output", "yaml")
	if code != 0 {
		t.Fatalf("version -o yaml: exit %d, stderr %q", code, errOut)
	}
	var got buildInfo
	if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("version -o yaml: %+v (%v), want %+v\n%s", got, err, want, out)
	}

	code, out, errOut = runCLI("version", "-o", "bogus")
	if code != exitInvalid || out != "" || !strings.Contains(errOut, `"bogus"`) || !strings.Contains(errOut, "json") {
		t.Errorf("version -o bogus: exit %d (want %d), stdout %q, stderr %q", code, exitInvalid, out, errOut)
	}
}
