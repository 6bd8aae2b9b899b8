// Package testfixtures finds the real K3s v1.36.3 captures in ../shared/fixtures (beside the
// repository, as CI places it) for tests that check parsers and the simulator against them.
package testfixtures

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the directory of the real K3s v1.36.3 captures, or skips the test with the reason
// when ../shared is not beside the repository.
func Dir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("K3STRAP_FIXTURES"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	d := filepath.Join(filepath.Dir(repo), "shared", "fixtures", "real-k3s-v1.36.3")
	if _, err := os.Stat(d); err != nil {
		t.Skipf("real K3s captures not found at %s (CI places ../shared beside the repository; or set K3STRAP_FIXTURES)", d)
	}
	return d
}

// Read returns the content of a fixture file, failing the test when it cannot be read.
func Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(t), name))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return b
}
