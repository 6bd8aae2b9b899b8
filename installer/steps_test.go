package installer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Every step of every command lives in a file named for it (step_<phase>.go, dashes as
// underscores) that declares the step's type; a step that changes something has a Preview.
func TestStepsLiveInFilesNamedForThem(t *testing.T) {
	// Only these run under --dry-run; every other step changes something, or watches what a
	// change does, and is previewed instead.
	readOnly := map[string]bool{"connect": true, "facts": true, "plan": true, "preflight": true, "drift": true,
		"cluster-view": true, "evidence": true, "discover": true, "findings": true}
	readOnly["etcd-check"], readOnly["snapshot-list"] = true, true
	for _, name := range Commands() {
		cmd := commandFor(name)
		if len(cmd.steps) == 0 {
			t.Fatalf("command %s has no steps", name)
		}
		for _, st := range cmd.steps {
			file := "step_" + strings.ReplaceAll(string(st.Phase()), "-", "_") + ".go"
			src, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s: step %s: %v", name, st.Phase(), err)
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			typ := reflect.TypeOf(st).Name()
			found := false
			ast.Inspect(f, func(n ast.Node) bool {
				if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == typ {
					found = true
				}
				return true
			})
			if !found {
				t.Errorf("%s: step %s: type %s is not declared in %s", name, st.Phase(), typ, file)
			}
			_, previews := st.(previewer)
			if !previews && !readOnly[string(st.Phase())] {
				t.Errorf("%s: step %s changes something but has no Preview for --dry-run", name, st.Phase())
			}
			if previews && readOnly[string(st.Phase())] {
				t.Errorf("%s: step %s is listed read-only but has a Preview", name, st.Phase())
			}
		}
	}
}

func TestApplyStepOrder(t *testing.T) {
	var got []string
	for _, s := range Steps("apply") {
		got = append(got, string(s.Phase))
	}
	want := "connect facts plan preflight lock first-server stage supervise replace-nodes join-servers join-agents bring-up kubeconfig nodes cni rancher"
	if strings.Join(got, " ") != want {
		t.Fatalf("apply steps:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if Steps("no-such-command") != nil {
		t.Fatal("an unknown command has no steps")
	}
}
