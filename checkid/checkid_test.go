// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package checkid

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestIDsComeFromTheVocabulary: preflight's checks, doctor's findings and the diagnoses name
// their ID through this package's constants, never as a string literal of their own.
func TestIDsComeFromTheVocabulary(t *testing.T) {
	var files []string
	for _, dir := range []string{"../preflight", "../diagnose", "../installer"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			key, ok := kv.Key.(*ast.Ident)
			if !ok || (key.Name != "ID" && key.Name != "id" && key.Name != "Diagnosis") {
				return true
			}
			if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				t.Errorf("%s: %s: %s is a literal; define it in package checkid", f, key.Name, lit.Value)
			}
			return true
		})
	}
}

func TestSharedPairsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Shared() {
		if p.Preflight == "" || p.Doctor == "" || p.Rule == "" || seen[p.Preflight] || seen[p.Doctor] {
			t.Errorf("pair %+v: empty or repeated", p)
		}
		seen[p.Preflight], seen[p.Doctor] = true, true
	}
}
