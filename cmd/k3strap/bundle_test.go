// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/airgapbundle"
)

// bundleDir writes a fake amd64 release (binary holding release rel, images, checksums) and
// an inventory naming it with spec.k3s.version v1.36.3+k3s1; extra is added under spec.
func bundleDir(t *testing.T, rel, extra string) (dir, inv string) {
	t.Helper()
	t.Setenv(airgapbundle.CacheDirEnv, t.TempDir())
	dir = t.TempDir()
	bin := []byte("\x7fELF fake k3s version " + rel + " (abcdef)\n")
	img := []byte("images")
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for name, b := range map[string][]byte{
		"k3s": bin, "k3s-airgap-images-amd64.tar.zst": img,
		"sha256sum-amd64.txt": fmt.Appendf(nil, "%s  k3s\n%s  k3s-airgap-images-amd64.tar.zst\n", sum(bin), sum(img)),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inv = filepath.Join(dir, "site.yaml")
	doc := `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: edge}
spec:
  k3s:
    version: v1.36.3+k3s1
    install: airgap
    airgap:
      amd64: {binary: k3s, images: k3s-airgap-images-amd64.tar.zst, checksums: sha256sum-amd64.txt}
` + extra + `  hosts:
    - {name: cp1, address: 10.0.0.1, role: server}
`
	if err := os.WriteFile(inv, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, inv
}

func runArgs(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestBundleCommand: bundle writes a 0644 tar (its -O is the bundle file; -o the output
// mode), and an inventory naming only that bundle validates.
func TestBundleCommand(t *testing.T) {
	dir, inv := bundleDir(t, "v1.36.3+k3s1", "")
	out := filepath.Join(dir, "out", "site.tar")
	_ = os.Mkdir(filepath.Dir(out), 0o755)
	code, stdout, stderr := runArgs("bundle", "-f", inv, "-O", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if strings.Contains(stderr, "deprecated") {
		t.Errorf("-O warned: %s", stderr)
	}
	if !strings.Contains(stdout, "wrote "+out+": cluster edge, K3s v1.36.3+k3s1, amd64, 3 files") || !strings.Contains(stdout, "sha256 ") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("bundle %v %v", st, err)
	}
	site := filepath.Join(dir, "out", "site.yaml")
	_ = os.WriteFile(site, []byte("apiVersion: k3strap.io/v1alpha1\nkind: Cluster\nmetadata: {name: edge}\nspec:\n  k3s:\n    airgapBundle: site.tar\n  hosts:\n    - {name: cp1, address: 10.0.0.1, role: server}\n"), 0o644)
	if code, stdout, stderr := runArgs("validate", "-f", site); code != 0 {
		t.Fatalf("validate of the bundle inventory: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestBundleCommandRefuses(t *testing.T) {
	t.Run("no -o", func(t *testing.T) {
		_, inv := bundleDir(t, "v1.36.3+k3s1", "")
		if code, _, stderr := runArgs("bundle", "-f", inv); code != exitInvalid || !strings.Contains(stderr, "-O FILE") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})
	t.Run("another release", func(t *testing.T) {
		dir, inv := bundleDir(t, "v1.35.0+k3s1", "")
		out := filepath.Join(dir, "site.tar")
		code, _, stderr := runArgs("bundle", "-f", inv, "-O", out)
		if code != exitInvalid || !strings.Contains(stderr, "is K3s v1.35.0+k3s1 but spec.k3s.version is v1.36.3+k3s1") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("a bundle was written")
		}
	})
	t.Run("checksum mismatch", func(t *testing.T) {
		dir, inv := bundleDir(t, "v1.36.3+k3s1", "")
		_ = os.WriteFile(filepath.Join(dir, "k3s-airgap-images-amd64.tar.zst"), []byte("other"), 0o644)
		out := filepath.Join(dir, "site.tar")
		code, _, stderr := runArgs("bundle", "-f", inv, "-O", out)
		if code != exitInvalid || !strings.Contains(stderr, "checksum mismatch") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("a bundle was written")
		}
	})
	t.Run("secret", func(t *testing.T) {
		dir, inv := bundleDir(t, "v1.36.3+k3s1", "    airgapInstallScript: id_ed25519\n  ssh: {keyPath: id_ed25519}\n")
		_ = os.WriteFile(filepath.Join(dir, "id_ed25519"), []byte("PRIVATE KEY"), 0o600)
		code, _, stderr := runArgs("bundle", "-f", inv, "-O", filepath.Join(dir, "site.tar"))
		if code != exitInvalid || !strings.Contains(stderr, "never holds secrets") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})
}

// The pre-v0.4 `bundle -o FILE` still writes FILE with a deprecation warning; `-o json` (a
// format name) is the output format and bundle prints only plain: refused, exit 2.
func TestBundleOldOutputFlag(t *testing.T) {
	dir, inv := bundleDir(t, "v1.36.3+k3s1", "")
	out := filepath.Join(dir, "old.tar")
	code, stdout, stderr := runArgs("bundle", "-f", inv, "-o", out)
	if code != 0 || !strings.Contains(stderr, "deprecated") || !strings.Contains(stderr, "-O "+out) {
		t.Fatalf("bundle -o FILE: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("bundle -o FILE wrote nothing: %v", err)
	}
	if code, _, stderr := runArgs("bundle", "-f", inv, "-o", "json"); code != exitInvalid || !strings.Contains(stderr, `--output "json"`) {
		t.Errorf("bundle -o json: exit %d, %s", code, stderr)
	}
}
