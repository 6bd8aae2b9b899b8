// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/installer"
)

// The tests of the CLI conventions (docs/output.md, README "Commands"): the default inventory, environment names, -o on
// every command, examples and man pages, dynamic completion.

func testRoot() *cobra.Command {
	a := &app{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &strings.Builder{}, stderr: &strings.Builder{}, v: NewViper()}
	return a.rootCmd()
}

// Without -f: an explicit -f, then $K3STRAP_FILE, then ./cluster.yaml (k0sctl's precedence),
// and the output says which file was used when it was not -f.
func TestDefaultInventory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	// No file anywhere: the usage error says how to get one.
	if code, _, stderr := runIn(t, "", "validate"); code != exitInvalid || !strings.Contains(stderr, "cluster.yaml") {
		t.Fatalf("no inventory: exit %d, %s", code, stderr)
	}
	writeFile(t, dir, "cluster.yaml", minimalDoc, 0o644)
	other := writeFile(t, dir, "other.yaml", strings.Replace(minimalDoc, "name: lab", "name: other", 1), 0o644)
	env := writeFile(t, dir, "env.yaml", strings.Replace(minimalDoc, "name: lab", "name: fromenv", 1), 0o644)

	code, stdout, stderr := runIn(t, "", "validate")
	if code != 0 || !strings.Contains(stdout, "cluster lab") || !strings.Contains(stderr, "using ./cluster.yaml") {
		t.Errorf("default: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Setenv("K3STRAP_FILE", env)
	var out, errb strings.Builder
	code = run(context.Background(), []string{"validate"}, strings.NewReader(""), &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "cluster fromenv") || !strings.Contains(errb.String(), "using "+env+" ($K3STRAP_FILE)") {
		t.Errorf("$K3STRAP_FILE over ./cluster.yaml: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{"validate", "-f", other}, strings.NewReader(""), &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "cluster other") || strings.Contains(errb.String(), "using") {
		t.Errorf("-f over $K3STRAP_FILE: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

func TestEnvWarnings(t *testing.T) {
	var b strings.Builder
	warnEnv(&b, []string{
		"K3STRAP_SSH_KEY_PATH=/k", "K3STRAP_FILE=x", "K3STRAP_K3S_TOKEN=s3cret-value",
		"K3STRAP_SSH_KEYPATH=/old",          // deprecated, the new one set too
		"K3STRAP_SSH_KNOWNHOSTS=/kh",        // deprecated alone
		"K3STRAP_SSH_PROT=22",               // misspelt
		"K3STRAP_E2E=0", "K3STRAP_TEST_X=1", // the repository's own tooling
		"K3STRAP_WHATEVER_ELSE_ENTIRELY=1", "HOME=/root",
	})
	got := b.String()
	for _, want := range []string{
		"$K3STRAP_SSH_KEYPATH is deprecated", "rename it $K3STRAP_SSH_KEY_PATH", "both are set: $K3STRAP_SSH_KEY_PATH is used",
		"$K3STRAP_SSH_KNOWNHOSTS is deprecated", "rename it $K3STRAP_SSH_KNOWN_HOSTS",
		"$K3STRAP_SSH_PROT is not a variable k3strap reads", "did you mean $K3STRAP_SSH_PORT?",
		"$K3STRAP_WHATEVER_ELSE_ENTIRELY is not a variable k3strap reads; it is ignored (k3strap reads: ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"K3STRAP_E2E", "K3STRAP_TEST_X", "warning: $K3STRAP_FILE", "warning: $K3STRAP_SSH_KEY_PATH", "s3cret", "/old"} {
		if strings.Contains(got, not) {
			t.Errorf("warnings mention %q:\n%s", not, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 4 {
		t.Errorf("%d warnings, want 4:\n%s", n, got)
	}
	// Through a real run: the warning is on stderr, the command still runs.
	t.Setenv("K3STRAP_SSH_PROT", "22")
	code, _, stderr := runCLI("version")
	if code != 0 || !strings.Contains(stderr, "did you mean $K3STRAP_SSH_PORT?") {
		t.Errorf("version with a misspelt variable: exit %d, stderr %s", code, stderr)
	}
}

// argsFor returns arguments that get cmd past its argument check (so -o is what is judged).
func argsFor(c *cobra.Command) []string {
	path := strings.Fields(commandPath(c))
	switch commandPath(c) {
	case "remove-node":
		return append(path, "w1")
	case "gen-man":
		return append(path, "/nonexistent/man")
	}
	return path
}

// Every command refuses an output format it does not print with exit 2, naming what it
// prints — before it reads anything or connects anywhere.
func TestOutputRefusedOnEveryCommand(t *testing.T) {
	t.Setenv("K3STRAP_FILE", "")
	t.Chdir(t.TempDir())
	for _, c := range allCommands(testRoot()) {
		if c.Hidden && c.Name() != "gen-man" || c.Name() == "bundle" { // bundle: TestBundleOldOutputFlag
			continue
		}
		args := append(argsFor(c), "-o", "bogus")
		code, stdout, stderr := runCLI(args...)
		if code != exitInvalid || !strings.Contains(stderr, `--output "bogus"`) || !strings.Contains(stderr, "auto") {
			t.Errorf("k3strap %s: exit %d (want %d)\nstdout %s\nstderr %s", strings.Join(args, " "), code, exitInvalid, stdout, stderr)
		}
	}
	// yaml only where a document is printed.
	for _, args := range [][]string{{"apply", "-o", "yaml"}, {"validate", "-o", "yaml"}, {"bundle", "-o", "json"}} {
		if code, _, stderr := runCLI(args...); code != exitInvalid || !strings.Contains(stderr, "--output") {
			t.Errorf("k3strap %v: exit %d, %s", args, code, stderr)
		}
	}
}

// render, validate, steps and version print one machine-readable document with -o json.
func TestOutputJSON(t *testing.T) {
	dir := t.TempDir()
	inv := writeFile(t, dir, "c.yaml", minimalDoc, 0o644)
	decode := func(args ...string) any {
		t.Helper()
		code, stdout, stderr := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		var v any
		if err := json.Unmarshal([]byte(stdout), &v); err != nil {
			t.Fatalf("%v: not one JSON document: %v\n%s", args, err, stdout)
		}
		if args[0] != "version" && strings.Count(strings.TrimSpace(stdout), "\n") != 0 {
			t.Errorf("%v: the document spans lines (a reader of JSON lines would stumble):\n%s", args, stdout)
		}
		return v
	}
	r := decode("render", "-f", inv, "-o", "json").([]any)
	h := r[0].(map[string]any)
	if len(r) != 1 || h["host"] != "cp1" || h["role"] != "server" || h["first"] != true || h["service"] != "k3s" || !strings.Contains(h["config"].(string), "cluster-init") && !strings.Contains(h["config"].(string), "node-name") {
		t.Errorf("render -o json: %v", r)
	}
	for _, f := range h["files"].([]any) {
		f := f.(map[string]any)
		if f["secret"] == true && (f["sha256"] != nil || strings.Contains(f["path"].(string), "token") && f["content"] != nil) {
			t.Errorf("render -o json shows a secret file's content or checksum: %v", f)
		}
	}
	v := decode("validate", "-f", inv, "-o", "json").(map[string]any)
	if v["valid"] != true || v["cluster"] != "lab" || len(v["hosts"].([]any)) != 1 {
		t.Errorf("validate -o json: %v", v)
	}
	s := decode("steps", "apply", "-o", "json").([]any)
	first := s[0].(map[string]any)
	if first["command"] != "apply" || len(first["steps"].([]any)) < 3 {
		t.Errorf("steps -o json: %v", s)
	}
	if decode("version", "-o", "json").(map[string]any)["goVersion"] == nil {
		t.Error("version -o json has no goVersion")
	}
	// YAML where a document is printed: the same document.
	code, stdout, _ := runCLI("steps", "apply", "-o", "yaml")
	_ = stdout
	var y []stepsDoc
	if code != 0 || yaml.Unmarshal([]byte(stdout), &y) != nil || len(y) == 0 || y[0].Command != "apply" {
		t.Errorf("steps -o yaml: exit %d\n%s", code, stdout)
	}
	// A static error still prints the document, valid false, and exits 2.
	bad := writeFile(t, dir, "bad.yaml", strings.Replace(minimalDoc, "k3s: {version: v1.36.3+k3s1}",
		"k3s: {version: v1.36.3+k3s1, config: {disable-cloud-controller: true, kubelet-arg: [cloud-provider=external]}}", 1), 0o644)
	code, stdout, stderr := runCLI("validate", "-f", bad, "-o", "json")
	var vd validateDoc
	if err := json.Unmarshal([]byte(stdout), &vd); code != exitInvalid || err != nil || vd.Valid || len(vd.Findings) == 0 || vd.Findings[0].Check != "CloudController" {
		t.Errorf("validate -o json of a failing inventory: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
}

// Every command has an Example (cobra's Example field: --help and the man pages show it).
func TestEveryCommandHasAnExample(t *testing.T) {
	for _, c := range allCommands(testRoot()) {
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("k3strap %s has no Example (add it to commandExamples)", commandPath(c))
		}
	}
	for path := range commandExamples {
		found := false
		for _, c := range allCommands(testRoot()) {
			found = found || commandPath(c) == path
		}
		if !found {
			t.Errorf("commandExamples has %q, which is no command", path)
		}
	}
}

// `make man` (gen-man DIR) writes one page per visible command, each with its examples.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man")
	if code, _, stderr := runCLI("gen-man", dir); code != 0 {
		t.Fatalf("gen-man: exit %d %s", code, stderr)
	}
	for _, c := range allCommands(testRoot()) {
		if c.Hidden || !c.IsAvailableCommand() && c.HasParent() {
			continue
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no man page for k3strap %s: %v", commandPath(c), err)
			continue
		}
		if !strings.Contains(string(b), ".SH EXAMPLE") || !strings.Contains(string(b), ".TH \"K3STRAP\" \"1\"") {
			t.Errorf("%s lacks its examples or header:\n%.400s", name, b)
		}
	}
}

// complete runs cobra's __complete (what the shell scripts call) and returns the candidates
// (without descriptions) and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	code, stdout, stderr := runCLI(append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d %s", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var out []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		out = append(out, name)
	}
	return out, lines[len(lines)-1]
}

func TestCompletion(t *testing.T) {
	t.Setenv("K3STRAP_FILE", "")
	dir := t.TempDir()
	inv := writeFile(t, dir, "c.yaml", strings.Replace(minimalDoc, "    - {name: cp1, address: 192.0.2.1, role: server}\n",
		"    - {name: cp1, address: 192.0.2.1, role: server}\n    - {name: w1, address: 192.0.2.2, role: agent}\n", 1), 0o644)
	check := func(got []string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("completions %v lack %q", got, w)
			}
		}
	}
	got, _ := complete(t, "reset", "-f", inv, "--host", "")
	check(got, "cp1", "w1")
	if got, _ := complete(t, "render", "-f", inv, "--host", "cp1", "--host", ""); slices.Contains(got, "cp1") || !slices.Contains(got, "w1") {
		t.Errorf("--host offers a host already given: %v", got)
	}
	wd, _ := os.Getwd()
	fleetFile := filepath.Join(wd, "..", "..", "examples", "fleet", "fleet.yaml")
	if got, _ := complete(t, "remove-node", "-f", inv, "w1", ""); slices.Contains(got, "w1") || !slices.Contains(got, "cp1") {
		t.Errorf("remove-node arguments complete %v", got)
	}
	// The default inventory when -f is not given.
	t.Chdir(dir)
	writeFile(t, dir, "cluster.yaml", minimalDoc, 0o644)
	got, _ = complete(t, "apply", "--host", "")
	check(got, "cp1")
	got, _ = complete(t, "preflight", "--ignore-preflight-errors", "Swap,")
	check(got, "Swap,all", "Swap,Port-6443", "Swap,ExistingInstall")
	got, dirc := complete(t, "validate", "-f", "")
	check(got, "yaml", "yml")
	if dirc != ":8" { // ShellCompDirectiveFilterFileExt
		t.Errorf("-f directive %s, want :8 (file extensions)", dirc)
	}
	got, _ = complete(t, "render", "-o", "")
	check(got, "plain", "json", "yaml")
	got, _ = complete(t, "apply", "-o", "")
	if !slices.Equal(got, []string{"auto", "plain", "json"}) {
		t.Errorf("apply -o completes %v", got)
	}
	got, _ = complete(t, "steps", "")
	check(got, "apply", "upgrade", "reset")
	got, _ = complete(t, "apply", "-f", fleetFile, "--site", "")
	check(got, "store-eu-berlin", "store-eu-lyon", "store-us-austin")
}

// --detailed-exitcode: only with --dry-run (exit 2 otherwise); its code is the table's
// "changes pending", free of every other meaning.
func TestDetailedExitCode(t *testing.T) {
	inv := writeFile(t, t.TempDir(), "c.yaml", minimalDoc, 0o644)
	code, _, stderr := runCLI("apply", "-f", inv, "--detailed-exitcode")
	if code != exitInvalid || !strings.Contains(stderr, "add --dry-run") {
		t.Errorf("--detailed-exitcode without --dry-run: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI("upgrade", "-f", inv, "--via", "suc", "--dry-run", "--detailed-exitcode"); code != exitInvalid || !strings.Contains(stderr, "does not go with --via suc") {
		t.Errorf("upgrade --via suc --detailed-exitcode: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI("backup", "-f", inv, "--dry-run", "--detailed-exitcode"); code != exitInvalid || !strings.Contains(stderr, "unknown flag") {
		t.Errorf("backup --detailed-exitcode (its preview records no changes): exit %d, %s", code, stderr)
	}
	// A fleet would count a site with changes pending as failed: refused.
	wd, _ := os.Getwd()
	fleetFile := filepath.Join(wd, "..", "..", "examples", "fleet", "fleet.yaml")
	if code, _, stderr := runCLI("apply", "-f", fleetFile, "--dry-run", "--detailed-exitcode"); code != exitInvalid || !strings.Contains(stderr, "--detailed-exitcode does not go with a fleet file") {
		t.Errorf("fleet --detailed-exitcode: exit %d, %s", code, stderr)
	}
	e := exitOf(&installer.Failure{Kind: installer.KindChangesPending})
	if e.code != exitChanges || e.meaning != "changes pending" {
		t.Errorf("changes pending maps to %+v", e)
	}
	seen := map[int]bool{}
	for _, r := range exitTable {
		if seen[r.code] {
			t.Errorf("exit code %d used twice", r.code)
		}
		seen[r.code] = true
	}
}

// A mistyped command is refused with exit 2 and the commands close to it.
func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"aply"}, `unknown command "aply" for "k3strap" — did you mean apply?`},
		{[]string{"rotate", "tokn"}, `unknown command "tokn" for "k3strap rotate" — did you mean token?`},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %s", tc.args, code, stderr)
		}
	}
}
