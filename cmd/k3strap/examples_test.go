package main

import (
	"bufio"
	"os"
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
		})
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
