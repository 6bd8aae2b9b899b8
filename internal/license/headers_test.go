// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package license checks that every Go source file of the module carries the project's license
// header (LICENSE: Apache-2.0; the SPDX short form, as CNCF projects in the K3s ecosystem write
// it). Generated files ("// Code generated ... DO NOT EDIT.") are exempt.
package license

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// header is the first two lines of every hand-written Go file.
const header = "// Copyright The k3strap Authors.\n// SPDX-License-Identifier: Apache-2.0\n"

func TestEveryGoFileHasTheLicenseHeader(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not two levels up: %v", err)
	}
	checked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "dist", "bin", ".artifacts", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := string(b)
		checked++
		if strings.HasPrefix(s, "// Code generated") {
			return nil
		}
		if !strings.HasPrefix(s, header) {
			t.Errorf("%s: no license header; its first lines must be:\n%s", p, header)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files found: the walk did not see the module", checked)
	}
}
