// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// goTool is the go command of the toolchain running the tests (not whatever is on PATH).
func goTool(t *testing.T) string {
	t.Helper()
	exe := "go"
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	p := filepath.Join(runtime.GOROOT(), "bin", exe) //nolint:staticcheck // the toolchain running the test is the one wanted
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the Go toolchain running this test has no go command: %v", err)
	}
	return p
}

// goBuild builds ./cmd/k3strap as the release does (CGO_ENABLED=0, -trimpath) for goos/goarch
// into a temporary file and returns its path; extra are further build flags.
func goBuild(t *testing.T, goos, goarch string, extra ...string) string {
	return goBuildIn(t, ".", goos, goarch, extra...)
}

// goBuildIn is goBuild of the package in dir.
func goBuildIn(t *testing.T, dir, goos, goarch string, extra ...string) string {
	t.Helper()
	return goBuildEnv(t, dir, goos, goarch, nil, extra...)
}

// goBuildEnv is goBuildIn with further environment (e.g. GOARM=7).
func goBuildEnv(t *testing.T, dir, goos, goarch string, env []string, extra ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "k3strap")
	if goos == "windows" {
		out += ".exe"
	}
	args := append([]string{"build", "-trimpath"}, extra...)
	args = append(args, "-o", out, ".")
	cmd := exec.CommandContext(t.Context(), goTool(t), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=%s GOARCH=%s go %s: %v\n%s", goos, goarch, strings.Join(args, " "), err, b)
	}
	return out
}

// TestCrossCompile: ./cmd/k3strap builds for every platform the release promises besides the
// one running the test (docs/release.md "What a release holds"; .goreleaser.yaml) — Windows and
// macOS workstations (fleet's state file once used a Unix-only call) and the arm Linux hosts —
// and what is built is a static executable of that platform and CPU. Each is a full build (the
// compiler and linker of that target), 20 to 60 s cold on a 2-core machine, seconds with a warm
// build cache.
func TestCrossCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: cross-compiling k3strap for five platforms takes minutes with a cold build cache")
	}
	machO := func(cpu macho.Cpu) func(*testing.T, string) {
		return func(t *testing.T, bin string) {
			f, err := macho.Open(bin)
			if err != nil {
				t.Fatalf("not a Mach-O executable: %v", err)
			}
			defer f.Close()
			if f.Cpu != cpu || f.Type != macho.TypeExec {
				t.Errorf("Mach-O cpu %v type %v, want %v executable", f.Cpu, f.Type, cpu)
			}
		}
	}
	elfStatic := func(m elf.Machine) func(*testing.T, string) {
		return func(t *testing.T, bin string) {
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatalf("not an ELF executable: %v", err)
			}
			defer f.Close()
			if f.Machine != m || f.Type != elf.ET_EXEC {
				t.Errorf("ELF machine %v type %v, want %v executable", f.Machine, f.Type, m)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("ELF has a %v program header: not static (CGO_ENABLED=0)", p.Type)
				}
			}
		}
	}
	for _, tc := range []struct {
		goos, goarch string
		env          []string
		check        func(*testing.T, string)
	}{
		{"windows", "amd64", nil, func(t *testing.T, bin string) {
			f, err := pe.Open(bin)
			if err != nil {
				t.Fatalf("not a Windows executable: %v", err)
			}
			defer f.Close()
			if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
				t.Errorf("PE machine %#x, want AMD64 (%#x)", f.Machine, pe.IMAGE_FILE_MACHINE_AMD64)
			}
		}},
		{"darwin", "arm64", nil, machO(macho.CpuArm64)},
		{"darwin", "amd64", nil, machO(macho.CpuAmd64)},
		{"linux", "arm64", nil, elfStatic(elf.EM_AARCH64)},
		// GOARM=7 as the release builds it (.goreleaser.yaml goarm).
		{"linux", "arm", []string{"GOARM=7"}, elfStatic(elf.EM_ARM)},
	} {
		t.Run(tc.goos+"/"+tc.goarch, func(t *testing.T) {
			start := time.Now()
			bin := goBuildEnv(t, ".", tc.goos, tc.goarch, tc.env)
			t.Logf("built in %s", time.Since(start).Round(time.Second))
			tc.check(t, bin)
		})
	}
}

// TestGoBuildSaysWhatItIs: a plain `go build` of a checkout (no -X main.version, as `go
// install` builds) reports the checkout's commit, that it was dirty and a version other than
// "dev" — the stamp the Go toolchain embeds, read back by `version -o json`. It builds a local
// clone of HEAD with an untracked file in it: the Go toolchain does not stamp in a linked git
// worktree (it looks for a .git directory; golang/go#58218), where this test may run.
func TestGoBuildSaysWhatItIs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building k3strap with its VCS stamp takes a minute or more")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: the Go toolchain stamps VCS information with it")
	}
	gitOut := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), git, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(bytes.TrimSpace(out))
	}
	if err := exec.CommandContext(t.Context(), git, "rev-parse", "HEAD").Run(); err != nil {
		t.Skipf("not in a git checkout (git rev-parse HEAD: %v): nothing to stamp", err)
	}
	top, head := gitOut(".", "rev-parse", "--show-toplevel"), gitOut(".", "rev-parse", "HEAD")
	clone := filepath.Join(t.TempDir(), "k3strap")
	gitOut(".", "clone", "-q", "--shared", "--no-checkout", top, clone)
	gitOut(clone, "-c", "advice.detachedHead=false", "checkout", "-q", head)
	if err := os.WriteFile(filepath.Join(clone, "untracked.txt"), []byte("makes the tree dirty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// -buildvcs=true overrides a GOFLAGS=-buildvcs=false of the environment.
	bin := goBuildIn(t, filepath.Join(clone, "cmd", "k3strap"), runtime.GOOS, runtime.GOARCH, "-buildvcs=true")
	out, err := exec.CommandContext(t.Context(), bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version -o json: %v", bin, err)
	}
	var got buildInfo
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	if got.Revision != head {
		t.Errorf("revision %q, want HEAD %q", got.Revision, head)
	}
	if got.Dirty == nil || !*got.Dirty {
		t.Errorf("dirty %v, want true (an untracked file)", got.Dirty)
	}
	// The toolchain's pseudo-version: v0.0.0-TIME-REV12+dirty (or a tag's).
	if !strings.Contains(got.Version, head[:12]) || !strings.HasSuffix(got.Version, "+dirty") || got.Time == "" {
		t.Errorf("version %q time %q: want the toolchain's pseudo-version of %s, +dirty", got.Version, got.Time, head[:12])
	}
	if got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("go %q platform %q, want %q %q", got.GoVersion, got.Platform, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	}
	// `k3strap --version` (cobra's flag) says the same version.
	flagOut, err := exec.CommandContext(t.Context(), bin, "--version").Output()
	if err != nil || !strings.Contains(string(flagOut), " "+got.Version+"\n") {
		t.Errorf("k3strap --version: %q (%v), want it to name %q", flagOut, err, got.Version)
	}
}
