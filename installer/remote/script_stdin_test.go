// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// longScript is a script over scriptStdinMin that prints its $0 and arguments, then its
// standard input, and touches the file $1 at its end (so a script run in part is seen).
func longScript() string {
	var b strings.Builder
	b.WriteString("# a comment line that pads the script past the inline limit, with 'quotes' and \\backslashes\\\n")
	for b.Len() < 3*scriptStdinMin {
		b.WriteString("x=\"a  b\\\\c\"; : \"$x\" # padding with  two spaces and a tab\t.\n")
	}
	b.WriteString("printf '%s|%s|%s|%s\\n' \"$0\" \"$2\" \"$3\" \"$x\"\ncat\ntouch \"$1\"\n")
	return b.String()
}

// runSent runs what cmd.sent gives under shell (sh, or busybox's ash) on this machine, as a
// transport does (sh -c LINE, the input on standard input), and returns stdout, stderr and the
// exit code.
func runSent(t *testing.T, shell []string, line string, in io.Reader) (string, string, int) {
	t.Helper()
	c := exec.Command(shell[0], append(shell[1:], "-c", line)...)
	c.Stdin = in
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestScriptOnStdin(t *testing.T) {
	shells := [][]string{{"/bin/sh"}}
	if p, err := exec.LookPath("busybox"); err == nil {
		shells = append(shells, []string{p, "sh"}) // BusyBox hosts: ash, whose head -c reads ahead
	}
	if p, err := exec.LookPath("bash"); err == nil {
		shells = append(shells, []string{p})
	}
	for _, sh := range shells {
		for _, input := range []string{"the command's own input\nline two\n", ""} {
			name := filepath.Base(strings.Join(sh, " ")) + "/with input"
			if input == "" {
				name = filepath.Base(strings.Join(sh, " ")) + "/script alone"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				done := filepath.Join(dir, "done")
				cmd := Script("long", longScript(), done, "two words", "it's")
				launcher := scriptLauncherWhole
				if input != "" {
					cmd = cmd.WithStdin(strings.NewReader(input))
					launcher = scriptLauncher
				}
				line, in := cmd.sent(becomeNone, nil)
				if strings.Contains(line, "padding") || !strings.Contains(line, launcher[:20]) || len(line) > len(launcher)+len(done)+100 {
					t.Fatalf("the command line is not the launcher (%d bytes): %.80q", len(line), line)
				}
				out, errs, code := runSent(t, sh, line, in)
				want := "k3strap|two words|it's|a  b\\c\n" + input
				if code != 0 || out != want {
					t.Fatalf("exit %d, stdout %q (stderr %q), want %q", code, out, errs, want)
				}
				if _, err := os.Stat(done); err != nil {
					t.Fatalf("the script did not run to its end: %v", err)
				}

				// Cut short (the connection dropped while the script was sent): nothing runs.
				os.Remove(done)
				_, in = cmd.sent(becomeNone, nil)
				whole, _ := io.ReadAll(in)
				cut := whole[:len(whole)/2]
				out, errs, code = runSent(t, sh, line, bytes.NewReader(cut))
				if code != 3 || !strings.Contains(errs, "did not arrive whole") || out != "" {
					t.Fatalf("cut script: exit %d, stdout %q, stderr %q; want exit 3 and the message", code, out, errs)
				}
				if _, err := os.Stat(done); err == nil {
					t.Fatal("a script cut short ran")
				}
			})
		}
	}
}

// TestScriptOnStdinOrder: the sudo password line goes ahead of the script for a command that
// runs as root (sudo -S reads it before the launcher starts), after it for a command that
// reads the password itself; a short script stays on the command line.
func TestScriptOnStdinOrder(t *testing.T) {
	pw := func() string { return "hunter2" }
	read := func(r io.Reader) string {
		b, _ := io.ReadAll(r)
		return string(b)
	}
	long := longScript()
	end := "\n" + ScriptEnd + "\n"

	line, in := Script("long", long).AsRoot().WithStdin(strings.NewReader("data")).sent(becomeSudoPass, pw)
	if got := read(in); got != "hunter2\n"+strings.TrimSuffix(long, "\n")+end+"data" {
		t.Errorf("as root: input starts %.40q", got)
	}
	if !strings.Contains(line, "k3strap_line") {
		t.Errorf("as root with input: not the line-reading launcher: %.80q", line)
	}
	if !strings.HasPrefix(line, "sudo -S") || strings.Contains(line, "hunter2") {
		t.Errorf("as root: line %.60q", line)
	}

	c := Script("long", long)
	c.PasswordStdin = true
	line, in = c.sent(becomeSudoPass, pw)
	if !strings.Contains(line, "k3strap_line") {
		t.Errorf("password behind the script: not the line-reading launcher: %.80q", line)
	}
	if got := read(in); got != strings.TrimSuffix(long, "\n")+end+"hunter2\n" {
		t.Errorf("password read by the script: input %.40q…%q", got, got[max(0, len(got)-30):])
	}

	line, in = Script("long", long).AsRoot().sent(becomeSudoPass, pw)
	if got := read(in); got != "hunter2\n"+strings.TrimSuffix(long, "\n")+end || !strings.Contains(line, "$(cat)") {
		t.Errorf("as root, the script last: line %.80q, input %.40q", line, got)
	}

	_, in = Script("long", long).AsRoot().sent(becomeSudoN, pw)
	if got := read(in); strings.Contains(got, "hunter2") {
		t.Error("the password sent under sudo -n")
	}

	line, in = Script("short", "echo hi").sent(becomeNone, pw)
	if in != nil || !strings.Contains(line, "echo hi") {
		t.Errorf("short script: line %q, input %v", line, in)
	}
}
