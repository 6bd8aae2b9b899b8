// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// The tests of the input rules (README "Inventory reference"): every local input read once and cancellable, secrets
// in mistaken files never echoed, bad values refused at load (exit 2 naming file:line:column
// and the fix), names with control characters never reaching the terminal raw, and the words
// for a fleet file given to a one-cluster command.

// minimalDoc is a valid inventory of one server; hosts replaces its hosts block.
const minimalDoc = "apiVersion: k3strap.io/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec:\n  k3s: {version: v1.36.3+k3s1}\n  hosts:\n    - {name: cp1, address: 192.0.2.1, role: server}\n"

func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// runIn runs k3strap in-process with stdin and returns exit code, stdout and stderr.
func runIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("K3STRAP_FILE", "")
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// k3strapBinary builds ./cmd/k3strap once per test process (signals and FIFOs need the real
// process) and returns its path.
func k3strapBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			if goTool, err = exec.LookPath("go"); err != nil {
				binErr = errors.New("no go tool to build the binary with")
				return
			}
		}
		dir, err := os.MkdirTemp("", "k3strap-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "k3strap")
		out, err := exec.Command(goTool, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// runBinary runs the built binary with stdin and a deadline; it returns the exit code,
// stdout, stderr and how long it took.
func runBinary(t *testing.T, stdin string, args ...string) (int, string, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k3strapBinary(t), args...)
	cmd.Env = append(os.Environ(), "K3STRAP_FILE=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String(), time.Since(start)
}

// TestStdinInput: -f - reads the inventory from stdin (once); so does -f /dev/stdin — the
// fleet detection and the load share the bytes.
func TestStdinInput(t *testing.T) {
	code, out, errs := runIn(t, minimalDoc, "validate", "-f", "-")
	if code != 0 || !strings.Contains(out, "<stdin>: valid — cluster lab, 1 hosts") {
		t.Fatalf("in-process -f -: exit %d\n%s%s", code, out, errs)
	}
	for _, f := range []string{"-", "/dev/stdin"} {
		code, out, errs, _ := runBinary(t, minimalDoc, "validate", "-f", f)
		if code != 0 || !strings.Contains(out, ": valid — cluster lab, 1 hosts") {
			t.Errorf("binary -f %s: exit %d\n%s%s", f, code, out, errs)
		}
	}
	// A broken document on stdin is located as <stdin>:LINE:COL.
	code, _, errs = runIn(t, strings.Replace(minimalDoc, "role: server", "role: server, port: 0", 1), "validate", "-f", "-")
	if code != 2 || !strings.Contains(errs, "<stdin>:") {
		t.Errorf("broken stdin: exit %d\n%s", code, errs)
	}
	// Empty stdin is an empty inventory, not a hang.
	code, _, errs = runIn(t, "", "validate", "-f", "-")
	if code != 2 || !strings.Contains(errs, "the inventory is empty") {
		t.Errorf("empty stdin: exit %d\n%s", code, errs)
	}
}

// TestFIFOInput: a FIFO is read once (a writer's document validates), and while it has no
// writer Ctrl-C ends the run with 130 within 5 s.
func TestFIFOInput(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "cluster.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	bin := k3strapBinary(t)

	// With a writer: read once, valid.
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		_, _ = f.WriteString(minimalDoc)
		_ = f.Close()
	}()
	code, out, errs, took := runBinary(t, "", "validate", "-f", fifo)
	if code != 0 || !strings.Contains(out, "valid — cluster lab") {
		t.Fatalf("FIFO with a writer: exit %d after %s\n%s%s", code, took, out, errs)
	}

	// Without a writer: SIGINT → 130 within 5 s.
	for _, args := range [][]string{{"validate", "-f", fifo}, {"apply", "-f", fifo}, {"render", "-f", fifo}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "K3STRAP_FILE=")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond) // blocked in open(2) of the FIFO by now
		sent := time.Now()
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("%v: after SIGINT: %v, want exit 130\n%s", args, err, errb.String())
			}
			if took := time.Since(sent); took > 5*time.Second {
				t.Errorf("%v: exit took %s after SIGINT, want < 5s", args, took)
			}
			if !strings.Contains(errb.String(), "cancelled while it waited for input") {
				t.Errorf("%v: stderr does not say what was cancelled:\n%s", args, errb.String())
			}
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%v: still running 5 s after SIGINT (a FIFO without a writer ignores Ctrl-C)", args)
		}
	}
}

// mistakenFiles are files a user may give -f by mistake; each secret line must never appear in
// any output.
var mistakenFiles = []struct {
	name, body, guess string
}{
	{"id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDdV4zCqRMBtbjQmDQHDhYbXm3sUJtnE3vJ1x0uH9uxJwAAAJg2yyzhNssz\n-----END OPENSSH PRIVATE KEY-----\n", "a private key"},
	{"token", "K10f3a8c9d2e1b4a7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1::server:9f8e7d6c5b4a39281706f5e4d3c2b1a0\n", "a K3s token"},
	{".env", "K3S_TOKEN=supersecretvalue123\nDB_PASSWORD=hunter2hunter2\n", "an environment (.env) file"},
	{"export.env", "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY\n", "an environment (.env) file"},
	{"password.txt", "Tr0ub4dor&3-correct-horse-battery\n", "a token or password"},
	{"tls.key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1c7+9zbxkZ0qTqKxXdR3M2nP4sYvLm8Jq0W\n-----END RSA PRIVATE KEY-----\n", "a private key"},
}

// secretLines returns the parts of body that must never be printed: every line of 8 or more
// characters and every value after '='.
func secretLines(body string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "-----") {
			continue // the PEM armour is no secret, and the message may name the kind
		}
		if len(l) >= 8 {
			out = append(out, l)
		}
		if _, v, ok := strings.Cut(l, "="); ok && len(v) >= 6 {
			out = append(out, v)
		}
	}
	return out
}

// TestMistakenFilesNeverEchoed: validate given a private key, a K3s token, a .env or a
// password file — directly, from stdin, or as a fleet's site — exits 2 naming the file, line and
// column and what the file looks like, and prints none of its content.
func TestMistakenFilesNeverEchoed(t *testing.T) {
	dir := t.TempDir()
	for _, m := range mistakenFiles {
		p := writeFile(t, dir, m.name, m.body, 0o600)
		fleetFile := writeFile(t, dir, "fleet-"+strings.TrimPrefix(m.name, ".")+".yaml",
			"apiVersion: k3strap.io/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  sites: [{path: "+m.name+"}]\n", 0o600)
		for _, c := range []struct {
			how   string
			stdin string
			args  []string
			where string
		}{
			{"-f FILE", "", []string{"validate", "-f", p}, p + ":1:1: "},
			{"-f -", m.body, []string{"validate", "-f", "-"}, "<stdin>:1:1: "},
			{"a fleet's site", "", []string{"validate", "-f", fleetFile}, p + ":1:1: "},
			{"render", "", []string{"render", "-f", p}, p + ":1:1: "},
		} {
			code, out, errs := runIn(t, c.stdin, c.args...)
			all := out + errs
			if code != 2 {
				t.Errorf("%s via %s: exit %d, want 2\n%s", m.name, c.how, code, all)
			}
			if !strings.Contains(errs, c.where+"the document must be a mapping, not") || !strings.Contains(errs, "it looks like "+m.guess) {
				t.Errorf("%s via %s: want %q and %q in\n%s", m.name, c.how, c.where, m.guess, errs)
			}
			for _, s := range secretLines(m.body) {
				if strings.Contains(all, s) {
					t.Errorf("%s via %s: output echoes the secret %q:\n%s", m.name, c.how, s, all)
				}
			}
		}
	}
	// The built binary, once: the same with the real process's streams.
	p := writeFile(t, dir, "key2", mistakenFiles[0].body, 0o600)
	code, out, errs, _ := runBinary(t, "", "validate", "-f", p)
	if code != 2 || strings.Contains(out+errs, "b3BlbnNzaC1rZXkt") {
		t.Errorf("binary: exit %d\n%s%s", code, out, errs)
	}
}

// TestBadValuesRefused: every numeric field at and beyond its bounds, IPv6 forms and durations:
// exit 2 with file:line:column and a fix, or valid at the bound.
func TestBadValuesRefused(t *testing.T) {
	dir := t.TempDir()
	hostWith := func(extra string) string {
		return strings.Replace(minimalDoc, "role: server}", "role: server"+extra+"}", 1)
	}
	for _, c := range []struct {
		name, doc string
		ok        bool
		want      string // in stderr when !ok
	}{
		{"port 22.5", hostWith(", ssh: {port: 22.5}"), false, ":7:65: host cp1: spec.hosts[0].ssh.port must be a whole number, not a decimal number — fix: "},
		{"port 0", hostWith(", ssh: {port: 0}"), false, ":7:65: host cp1: SSH port 0 is out of range — fix: use a TCP port between 1 and 65535"},
		{"port 022", hostWith(", ssh: {port: 022}"), false, "spec.hosts[0].ssh.port has a leading zero (YAML 1.1 reads 022 as octal 18) — fix: write the number without leading zeros"},
		{"port 0x16", hostWith(", ssh: {port: 0x16}"), false, "spec.hosts[0].ssh.port is not written in decimal"},
		{"port -1", hostWith(", ssh: {port: -1}"), false, "SSH port -1 is out of range"},
		{"port 65536", hostWith(", ssh: {port: 65536}"), false, "SSH port 65536 is out of range"},
		{"port 2^64+", hostWith(", ssh: {port: 99999999999999999999}"), false, "spec.hosts[0].ssh.port 99999999999999999999 is too large for a whole number — fix: write a smaller whole number"},
		{"port '22'", hostWith(", ssh: {port: '22'}"), false, "spec.hosts[0].ssh.port must be a whole number, not a string"},
		{"port 1", hostWith(", ssh: {port: 1}"), true, ""},
		{"port 65535", hostWith(", ssh: {port: 65535}"), true, ""},
		{"bastion port 0", hostWith(", ssh: {bastion: {address: 192.0.2.9, port: 0}}"), false, "SSH port 0 is out of range"},
		{"connectTimeout 0s", hostWith(", ssh: {connectTimeout: 0s}"), false, "spec.hosts[0].ssh.connectTimeout must be a positive duration"},
		{"connectTimeout -5s", hostWith(", ssh: {connectTimeout: -5s}"), false, "must be a positive duration"},
		{"connectTimeout 1ns", hostWith(", ssh: {connectTimeout: 1ns}"), true, ""},
		{"connectTimeout 24h", hostWith(", ssh: {connectTimeout: 24h}"), true, ""},
		{"connectTimeout 2562047h", hostWith(", ssh: {connectTimeout: 2562047h}"), false, "spec.hosts[0].ssh.connectTimeout is longer than 24h0m0s — fix: write a shorter duration"},
		{"IPv6 bracketed", strings.Replace(minimalDoc, "192.0.2.1", "'[fd00::1]'", 1), true, ""},
		{"IPv6 bare", strings.Replace(minimalDoc, "192.0.2.1", "'fd00::1'", 1), true, ""},
		{"IPv6 with port", strings.Replace(minimalDoc, "192.0.2.1", "'[fd00::1]:22'", 1), false, "is neither an IP address nor a DNS name"},
		{"host name with control characters", strings.Replace(minimalDoc, "name: cp1", `name: "cp1\e[2J\u009b31m\r"`, 1), false, "is not a valid node name (DNS-1123 subdomain)"},
	} {
		p := writeFile(t, dir, strings.NewReplacer(" ", "_", "'", "").Replace(c.name)+".yaml", c.doc, 0o600)
		code, out, errs := runIn(t, "", "validate", "-f", p)
		switch {
		case c.ok && code != 0:
			t.Errorf("%s: exit %d, want 0\n%s%s", c.name, code, out, errs)
		case !c.ok && (code != 2 || !strings.Contains(errs, c.want)):
			t.Errorf("%s: exit %d, want 2 with %q\n%s%s", c.name, code, c.want, out, errs)
		}
		assertNoControl(t, c.name, out+errs)
	}
}

// assertNoControl fails when s holds a control character other than newline and tab.
func assertNoControl(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Errorf("%s: output holds control character %U:\n%q", what, r, s)
			return
		}
	}
}

// TestFlagRanges: every whole-number and duration flag of every command is refused outside its
// range with exit 2 naming the flag and the range, before anything connects; the bounds pass.
func TestFlagRanges(t *testing.T) {
	p := writeFile(t, t.TempDir(), "c.yaml", minimalDoc, 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "--concurrency", "0"}, "--concurrency 0 is out of range — fix: give a whole number from 1 to 1000"},
		{[]string{"apply", "--concurrency", "1001"}, "--concurrency 1001 is out of range"},
		{[]string{"preflight", "--concurrency", "-3"}, "--concurrency -3 is out of range"},
		{[]string{"apply", "--concurrent-uploads", "0"}, "--concurrent-uploads 0 is out of range — fix: give a whole number from 1 to 100"},
		{[]string{"upgrade", "--upgrade-batch", "500"}, "--upgrade-batch 500 is out of range — fix: give a whole number from 1 to 100"},
		{[]string{"upgrade", "--upgrade-batch", "0"}, "--upgrade-batch 0 is out of range"},
		{[]string{"apply", "--ssh-keepalive", "0s"}, "--ssh-keepalive 0s is not a positive duration"},
		{[]string{"preflight", "--ssh-keepalive", "-10s"}, "--ssh-keepalive -10s is not a positive duration"},
		{[]string{"apply", "--timeout", "-1m"}, "--timeout -1m0s is not a positive duration"},
		{[]string{"apply", "--stall-grace", "0"}, "--stall-grace 0s is not a positive duration"},
		{[]string{"doctor", "--stall-grace", "-1s"}, "--stall-grace -1s is not a positive duration"},
		{[]string{"apply", "--poll-interval", "0s"}, "--poll-interval 0s is not a positive duration"},
		{[]string{"apply", "--timeout", "2562047h"}, "--timeout 2562047h0m0s is longer than 24h0m0s — fix: give a shorter duration, e.g. --timeout 10m0s"},
		{[]string{"doctor", "--stall-grace", "25h"}, "--stall-grace 25h0m0s is longer than 24h0m0s"},
		{[]string{"preflight", "--ssh-keepalive", "1000h"}, "--ssh-keepalive 1000h0m0s is longer than 24h0m0s"},
		{[]string{"apply", "--ssh-connect-timeout", "0s"}, "must be a positive duration, not \"0s\""},
		{[]string{"apply", "--ssh-connect-timeout", "-2s"}, "must be a positive duration, not \"-2s\""},
		{[]string{"apply", "--ssh-connect-timeout", "25h"}, "must be at most 24h0m0s, not \"25h\""},
		{[]string{"apply", "--ssh-port", "0"}, "must be a TCP port from 1 to 65535 without leading zeros, not \"0\""},
		{[]string{"apply", "--ssh-port", "022"}, "without leading zeros, not \"022\""},
	} {
		port, dials := sshTrap(t)
		_ = port
		code, out, errs := runIn(t, "", append(c.args, "-f", p)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s%s", c.args, code, c.want, out, errs)
		}
		if dials.Load() != 0 {
			t.Errorf("%v: connected", c.args)
		}
	}
	// Environment overrides: the same ranges.
	for env, want := range map[string]string{
		"K3STRAP_SSH_PORT=0":             "not \"0\"",
		"K3STRAP_SSH_PORT=70000":         "SSH port 70000 is out of range",
		"K3STRAP_SSH_CONNECTTIMEOUT=0s":  "must be a positive duration, not \"0s\"",
		"K3STRAP_SSH_CONNECTTIMEOUT=-1s": "must be a positive duration, not \"-1s\"",
	} {
		k, v, _ := strings.Cut(env, "=")
		t.Setenv(k, v)
		code, out, errs := runIn(t, "", "validate", "-f", p)
		if code != 2 || !strings.Contains(errs, want) {
			t.Errorf("%s: exit %d, want 2 with %q\n%s%s", env, code, want, out, errs)
		}
		t.Setenv(k, "")
		_ = os.Unsetenv(k)
	}
}

// TestEveryNumericFlagHasARange: a command that gains a whole-number flag without a range in
// intFlagRanges fails here; the bounds themselves pass the check.
func TestEveryNumericFlagHasARange(t *testing.T) {
	a := &app{v: NewViper()}
	root := a.rootCmd()
	for _, c := range allCommands(root) {
		if err := checkFlagRanges(c); err != nil {
			t.Errorf("%s: defaults refused: %v", c.CommandPath(), err)
		}
		for name, r := range intFlagRanges {
			f := c.Flags().Lookup(name)
			if f == nil {
				continue
			}
			for _, v := range []int{r.min, r.max} {
				if err := f.Value.Set(itoa(v)); err != nil {
					t.Fatal(err)
				}
				if err := checkFlagRanges(c); err != nil {
					t.Errorf("%s --%s %d (a bound) refused: %v", c.CommandPath(), name, v, err)
				}
			}
			_ = f.Value.Set(f.DefValue)
		}
	}
}

// TestFleetFileToOneClusterCommand: a fleet file given to a command that works on one cluster
// says so and what to pass instead — not "write kind: Cluster".
func TestFleetFileToOneClusterCommand(t *testing.T) {
	port, _ := sshTrap(t)
	path := fleetDir(t, port, "")
	for _, cmd := range []string{"render", "reset", "kubeconfig", "backup", "remove-node"} {
		args := []string{cmd, "-f", path}
		if cmd == "remove-node" {
			args = append(args, "cp1")
		}
		code, out, errs := runIn(t, "", args...)
		want := path + " is a fleet file (kind: Fleet); `" + cmd + "` works on one cluster — fix: pass a site's inventory (kind: Cluster), e.g. -f sites/SITE.yaml"
		if code != 2 || !strings.Contains(errs, want) || strings.Contains(errs, "write kind: Cluster") {
			t.Errorf("%s: exit %d, want 2 with %q\n%s%s", cmd, code, want, out, errs)
		}
	}
}

// allCommands returns root and every command under it.
func allCommands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		out = append(out, allCommands(c)...)
	}
	return out
}

// TestFleetSiteFIFO: a fleet's site that is a FIFO is refused at once (exit 2), not read —
// reading it would block the load.
func TestFleetSiteFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "site.yaml"), 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	fleetFile := writeFile(t, dir, "fleet.yaml", "apiVersion: k3strap.io/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  sites: [{path: site.yaml}]\n", 0o600)
	done := make(chan struct{})
	var code int
	var errs string
	go func() {
		defer close(done)
		code, _, errs = runIn(t, "", "validate", "-f", fleetFile)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("validate of a fleet whose site is a FIFO still runs after 5 s")
	}
	if code != 2 || !strings.Contains(errs, "is not a regular file") {
		t.Fatalf("exit %d\n%s", code, errs)
	}
}

// TestDoctorSSHPort: doctor --ssh host:port takes the port rule of the inventory, before it
// connects.
func TestDoctorSSHPort(t *testing.T) {
	for target, want := range map[string]string{
		"root@192.0.2.1:0":     "port 0 is out of range",
		"192.0.2.1:022":        "has a leading zero",
		"[fd00::1]:65536":      "port 65536 is out of range",
		"root@192.0.2.1:ssh22": "is not a whole number",
	} {
		code, out, errs := runIn(t, "", "doctor", "--ssh", target)
		if code != 2 || !strings.Contains(errs, "--ssh "+target+": ") || !strings.Contains(errs, want) {
			t.Errorf("--ssh %s: exit %d, want 2 with %q\n%s%s", target, code, want, out, errs)
		}
	}
}
