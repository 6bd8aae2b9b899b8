// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsIndexListsEveryPage keeps docs/README.md honest: every page of docs/ is listed
// exactly once, in the user guide or in the contributor guide, and nothing else is listed.
func TestDocsIndexListsEveryPage(t *testing.T) {
	index, err := os.ReadFile("../../docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(index)
	user, contrib, ok := strings.Cut(text, "\n## Contributor guide\n")
	if !ok || !strings.Contains(user, "\n## User guide\n") {
		t.Fatal("docs/README.md has no '## User guide' followed by '## Contributor guide' section")
	}
	row := regexp.MustCompile(`(?m)^\| \[([^\]]+\.md)\]\(([^)]+)\) \|`)
	listed := map[string]int{}
	for _, part := range []string{user, contrib} {
		for _, m := range row.FindAllStringSubmatch(part, -1) {
			if m[1] != m[2] {
				t.Errorf("docs/README.md row %q links to %q", m[1], m[2])
			}
			listed[m[1]]++
		}
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		name := filepath.Base(p)
		if name == "README.md" {
			continue
		}
		if listed[name] != 1 {
			t.Errorf("docs/README.md lists %s %d times, want once (in the user or the contributor guide)", name, listed[name])
		}
		delete(listed, name)
	}
	for name := range listed {
		if name != "README.md" {
			t.Errorf("docs/README.md lists %s, which is not a page of docs/", name)
		}
	}
}

// TestDocsLinksResolve checks that every relative link from README.md and docs/*.md to a file
// of the repository names a file that exists (anchors are not checked).
func TestDocsLinksResolve(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", strings.TrimPrefix(f, "../../"), m[1])
			}
		}
	}
}

// TestRealLaneTableListsEveryRealTest keeps docs/development.md's "Which scenarios run on the
// real binary" table true: every TestReal* function of e2e/ appears in it, and every TestReal*
// it names exists.
func TestRealLaneTableListsEveryRealTest(t *testing.T) {
	doc, err := os.ReadFile("../../docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n### Which scenarios run on the real binary\n")
	if !ok {
		t.Fatal(`docs/development.md has no "### Which scenarios run on the real binary" section`)
	}
	if i := strings.Index(table, "\n#"); i >= 0 {
		table = table[:i]
	}
	files, err := filepath.Glob("../../e2e/*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no e2e tests found: %v", err)
	}
	fn := regexp.MustCompile(`(?m)^func (TestReal\w*)\(`)
	defined := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fn.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
	}
	if len(defined) == 0 {
		t.Fatal("no TestReal* functions in e2e/")
	}
	for name := range defined {
		if !strings.Contains(table, "`"+name+"`") {
			t.Errorf("%s (e2e/) is missing from docs/development.md's real-lane table", name)
		}
	}
	for _, m := range regexp.MustCompile("`(TestReal\\w*)`").FindAllStringSubmatch(table, -1) {
		if !defined[m[1]] {
			t.Errorf("docs/development.md's real-lane table names %s, which e2e/ does not define", m[1])
		}
	}
}
