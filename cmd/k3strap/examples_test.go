// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// missingFile matches the inventory's error for a local file that does not exist: the path
// (absolute, as the loader resolves it).
var missingFile = regexp.MustCompile(` (/[^ ]+) does not exist`)

// Every file in examples/ validates as it stands; one that needs local files a fresh clone
// does not have says so in its first comment line ("# Needs: DIR/ ... `COMMAND` ..."), and
// then its only problems must be missing files under the directories that line names — any
// other problem fails the test. Which examples are held back, and why, is logged.
func TestExamplesValidate(t *testing.T) {
	t.Setenv("K3STRAP_FILE", "")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	_ = filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 8 {
		t.Fatalf("found %d examples under %s", len(files), root)
	}
	var held []string // held back for `make artifacts`
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(rel, func(t *testing.T) {
			code, stdout, stderr := runCLI("validate", "-f", f)
			if code == 0 {
				return
			}
			first := firstLine(t, f)
			if !strings.HasPrefix(first, "# Needs: ") || !strings.Contains(first, "`") {
				t.Fatalf("%s does not validate (exit %d) and its first comment does not say what it needs (\"# Needs: DIR/ ... `COMMAND`\"):\n%s%s", rel, code, stdout, stderr)
			}
			dirs := regexp.MustCompile(`([A-Za-z0-9._/-]+)/`).FindAllStringSubmatch(strings.SplitN(first, "—", 2)[0], -1)
			missing := missingFile.FindAllStringSubmatch(stderr, -1)
			problems := strings.Count(stderr, "\n") - 1 // the "is not valid:" header
			if code != exitInvalid || len(missing) == 0 || len(missing) != problems {
				t.Fatalf("%s: exit %d, %d missing files among %d problems — only missing files may fail it:\n%s", rel, code, len(missing), problems, stderr)
			}
			for _, m := range missing {
				in := false
				for _, d := range dirs {
					in = in || strings.HasPrefix(m[1], filepath.Join(root, d[1])+"/")
				}
				if !in {
					t.Errorf("%s: %s is missing, and its first comment names no directory holding it: %s", rel, m[1], first)
				}
			}
			t.Logf("%s: held back by its first comment: %s (%d files missing)", rel, first, len(missing))
			if strings.Contains(first, "`make artifacts`") {
				held = append(held, rel)
			}
		})
	}
	if len(held) == 0 {
		return
	}
	// The examples that name `make artifacts` validate once it ran: in a copy of examples/ with
	// the artifacts made there (the Makefile's ARTIFACTS_DIR) — what is left missing must be
	// named, file by file, in the first comment.
	if testing.Short() {
		t.Logf("-short: not building the artifacts for %v", held)
		return
	}
	tmp := t.TempDir()
	if err := os.CopyFS(filepath.Join(tmp, "examples"), os.DirFS(filepath.Join(root, "examples"))); err != nil {
		t.Fatal(err)
	}
	mk := exec.Command("make", "-C", root, "artifacts", "ARTIFACTS_DIR="+filepath.Join(tmp, ".artifacts"), "K3S_BINARY=", "GO="+goTool(t))
	mk.Env = append(os.Environ(), "K3S_BINARY=")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make artifacts: %v\n%s", err, out)
	}
	for _, rel := range held {
		code, stdout, stderr := runCLI("validate", "-f", filepath.Join(tmp, rel))
		if code == 0 {
			t.Logf("%s: valid after `make artifacts`", rel)
			continue
		}
		first := firstLine(t, filepath.Join(root, rel))
		missing := missingFile.FindAllStringSubmatch(stderr, -1)
		if len(missing) == 0 {
			t.Errorf("%s after `make artifacts`: exit %d and not for missing files:\n%s%s", rel, code, stdout, stderr)
		}
		for _, m := range missing {
			if !strings.Contains(first, filepath.Base(m[1])) {
				t.Errorf("%s after `make artifacts`: %s is missing and its first comment does not name it: %s", rel, filepath.Base(m[1]), first)
			}
		}
		t.Logf("%s after `make artifacts`: still needs %d files its first comment names", rel, len(missing))
	}
}

func firstLine(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	return sc.Text()
}
