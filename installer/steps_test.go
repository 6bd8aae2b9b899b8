// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// phaseConstants maps each phase value declared in package events to its constant's name.
func phaseConstants(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../events/phase*.go")
	if err != nil {
		t.Fatal(err)
	}
	doctor, _ := filepath.Glob("../events/doctor.go")
	out := map[string]string{}
	for _, file := range append(files, doctor...) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Values) != 1 || len(vs.Names) != 1 {
				return true
			}
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.HasPrefix(vs.Names[0].Name, "Phase") {
				v, _ := strconv.Unquote(lit.Value)
				out[v] = vs.Names[0].Name
			}
			return true
		})
	}
	return out
}

// Every step of every command — the SUC upgrade path included — lives in a file named for its
// phase (step_<phase>.go, dashes as underscores) that declares the step's type and nothing
// else's; the type (<phase>Step), the phase constant (Phase<Phase>) and the printed name
// agree; its doc comment says what it reads and writes; a step that changes something has a
// Preview.
func TestStepsLiveInFilesNamedForThem(t *testing.T) {
	// Only these run under --dry-run; every other step changes something, or watches what a
	// change does, and is previewed instead.
	readOnly := map[string]bool{"connect": true, "facts": true, "plan": true, "paths": true, "preflight": true, "drift": true,
		"cluster-view": true, "evidence": true, "discover": true, "findings": true, "etcd-check": true, "snapshot-list": true}
	consts := phaseConstants(t)
	stepFiles := map[string]bool{}
	for _, name := range Commands() {
		cmd := commandFor(name)
		if len(cmd.steps) == 0 {
			t.Fatalf("command %s has no steps", name)
		}
		for _, st := range cmd.steps {
			phase := string(st.Phase())
			flat := strings.ReplaceAll(phase, "-", "")
			typ := reflect.TypeOf(st).Name()
			if !strings.EqualFold(typ, flat+"Step") {
				t.Errorf("%s: step %s has type %s, want %sStep", name, phase, typ, flat)
			}
			if c := consts[phase]; !strings.EqualFold(c, "Phase"+flat) {
				t.Errorf("%s: step %s has phase constant %q, want Phase%s", name, phase, c, flat)
			}
			file := "step_" + strings.ReplaceAll(phase, "-", "_") + ".go"
			stepFiles[file] = true
			src, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s: step %s: %v", name, phase, err)
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					continue
				}
				for _, sp := range gd.Specs {
					if ts := sp.(*ast.TypeSpec); strings.HasSuffix(ts.Name.Name, "Step") {
						types = append(types, ts.Name.Name)
						if doc := gd.Doc.Text(); !strings.Contains(doc, "Reads: ") || !strings.Contains(doc, "Writes: ") {
							t.Errorf("%s: the doc comment of %s does not say what it reads and writes", file, ts.Name.Name)
						}
					}
				}
			}
			if len(types) != 1 || types[0] != typ {
				t.Errorf("%s: step %s: %s declares step types %v, want only %s", name, phase, file, types, typ)
			}
			_, previews := st.(previewer)
			if !previews && !readOnly[phase] {
				t.Errorf("%s: step %s changes something but has no Preview for --dry-run", name, phase)
			}
			if previews && readOnly[phase] {
				t.Errorf("%s: step %s is listed read-only but has a Preview", name, phase)
			}
		}
	}
	// No step file outside the step lists.
	files, _ := filepath.Glob("step_*.go")
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && !stepFiles[f] {
			t.Errorf("%s is the file of no step of any command", f)
		}
	}
}

func TestApplyStepOrder(t *testing.T) {
	var got []string
	for _, s := range Steps("apply") {
		got = append(got, string(s.Phase))
	}
	want := "connect facts plan paths preflight lock first-server stage supervise replace-nodes join-servers join-agents bring-up kubeconfig reconcile-nodes cni rancher"
	if strings.Join(got, " ") != want {
		t.Fatalf("apply steps:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if Steps("no-such-command") != nil {
		t.Fatal("an unknown command has no steps")
	}
}

// `k3strap steps upgrade` lists the SSH path and both SUC paths, which run as "upgrade".
func TestUpgradeVariants(t *testing.T) {
	got := strings.Join(Variants("upgrade"), "|")
	if got != "upgrade|upgrade --via suc|upgrade --watch" {
		t.Fatalf("upgrade variants: %s", got)
	}
	for _, v := range Variants("upgrade") {
		if commandFor(v).name != "upgrade" {
			t.Errorf("%s runs as %q", v, commandFor(v).name)
		}
	}
	var suc []string
	for _, s := range Steps("upgrade --via suc") {
		suc = append(suc, string(s.Phase))
	}
	if strings.Join(suc, " ") != "connect suc-deploy suc-watch" {
		t.Errorf("upgrade --via suc steps: %v", suc)
	}
}
