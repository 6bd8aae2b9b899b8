// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
)

// debianFiles returns Debian's dynamically linked programs bins (absolute paths, as installed
// here) for an image, each at its path with every shared library ldd(1) resolves for it and the
// loader, at the paths ldd names (the loader's search path of Debian's glibc covers them, with no
// ld.so.cache in the image); and a digest of those files with the versions of the Debian
// packages pkgs that ship them. A program or package not installed is a *missingError naming
// the packages to install.
func debianFiles(ctx context.Context, pkgs []string, bins ...string) ([]imagearchive.Entry, string, error) {
	missing := &missingError{fmt.Sprintf("Debian's %s: apt-get install %s (make test-setup does)", strings.Join(pkgs, ", "), strings.Join(pkgs, " "))}
	ver, err := exec.CommandContext(ctx, "dpkg-query", append([]string{"-W", "-f=${Package} ${Version}\n"}, pkgs...)...).Output()
	if err != nil {
		return nil, "", missing
	}
	var paths []string
	for _, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			return nil, "", missing
		}
		libs, err := sharedLibs(ctx, bin)
		if err != nil {
			return nil, "", err
		}
		paths = append(append(paths, bin), libs...)
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	h := sha256.New()
	var files []imagearchive.Entry
	for _, p := range paths {
		body, err := os.ReadFile(p) // a library's symbolic link followed
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s %x\n", p, sha256.Sum256(body))
		files = append(files, imagearchive.Entry{Name: p, Mode: 0o755, Body: body})
	}
	return files, fmt.Sprintf("Debian %s; files sha256:%x", strings.ReplaceAll(strings.TrimSpace(string(ver)), "\n", ", "), h.Sum(nil)), nil
}

// sharedLibs are the shared libraries ldd(1) resolves for the program at path, and the loader,
// at the paths ldd names; an error when one is not found.
func sharedLibs(ctx context.Context, path string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", path).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %v", path, err)
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)", "/lib64/ld-linux-x86-64.so.2 (0x…)"
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		case len(f) >= 2 && f[1] == "=>":
			return nil, fmt.Errorf("ldd %s: %s not found", path, f[0])
		}
	}
	return libs, sc.Err()
}

// debBusybox is Debian's package busybox (the dynamically linked build, not busybox-static),
// downloaded with `apt-get download` into dir/debs when not there yet (the package conflicts
// with busybox-static, so it is not installed): unlike busybox-static, whose shell runs its
// own applets before anything on PATH, its ash searches PATH first, as Alpine's BusyBox does.
type debBusybox struct {
	// Bin is the program (bin/busybox of the package), Version the package's version and
	// Digest its version and sha256.
	Bin             []byte
	Version, Digest string
}

// loadDebBusybox returns Debian's busybox package from dir/debs, downloading it there first
// when it is missing (dir "" is a temporary directory); a *missingError when apt cannot get it.
func loadDebBusybox(ctx context.Context, dir string) (debBusybox, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	debs := filepath.Join(dir, "debs")
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(debs, "busybox_*.deb"))
		slices.Sort(m)
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1]
	}
	deb := find()
	if deb == "" {
		if err := os.MkdirAll(debs, 0o755); err != nil {
			return debBusybox{}, err
		}
		if _, err := run(ctx, debs, nil, "apt-get", "download", "-q", "busybox"); err != nil {
			return debBusybox{}, &missingError{"Debian's package busybox (for the k3s-upgrade image's shell): apt-get download busybox failed (make test-setup downloads it): " + err.Error()}
		}
		if deb = find(); deb == "" {
			return debBusybox{}, &missingError{"apt-get download busybox wrote no busybox_*.deb into " + debs}
		}
	}
	raw, err := os.ReadFile(deb)
	if err != nil {
		return debBusybox{}, err
	}
	ver, err := run(ctx, "/", nil, "dpkg-deb", "-f", deb, "Version")
	if err != nil {
		return debBusybox{}, err
	}
	bin, err := run(ctx, "/", nil, "sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -xO ./bin/busybox`, "sh", deb)
	if err != nil || len(bin) == 0 {
		return debBusybox{}, fmt.Errorf("%s: no bin/busybox: %v", deb, err)
	}
	v := strings.TrimSpace(string(ver))
	return debBusybox{Bin: bin, Version: v, Digest: fmt.Sprintf("Debian busybox %s sha256:%x", v, sha256.Sum256(raw))}, nil
}

// files are the package's program at /bin/busybox with its shared libraries and a link per
// applet whose path is not in have.
func (d debBusybox) files(ctx context.Context, have map[string]bool) ([]imagearchive.Entry, error) {
	tmp, err := os.MkdirTemp("", "mkimages-busybox-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "busybox")
	if err := os.WriteFile(bin, d.Bin, 0o755); err != nil {
		return nil, err
	}
	libs, err := sharedLibs(ctx, bin)
	if err != nil {
		return nil, err
	}
	links, err := appletLinks(bin)
	if err != nil {
		return nil, err
	}
	files := []imagearchive.Entry{{Name: busyboxPath, Mode: 0o755, Body: d.Bin}}
	for _, l := range libs {
		if have[l] {
			continue
		}
		body, err := os.ReadFile(l)
		if err != nil {
			return nil, err
		}
		files = append(files, imagearchive.Entry{Name: l, Mode: 0o755, Body: body})
		have[l] = true
	}
	return append(files, appletEntries(links, have)...), nil
}

// busyboxFiles are Debian's busybox-static at /bin/busybox and a link to it for each applet
// whose path is not in have (paths the image holds another program at).
func busyboxFiles(b *builder, have map[string]bool) ([]imagearchive.Entry, error) {
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, &missingError{busyboxPath + ": " + err.Error() + " (apt-get install busybox-static)"}
	}
	links, err := busyboxLinks(b)
	if err != nil {
		return nil, err
	}
	return append([]imagearchive.Entry{{Name: busyboxPath, Mode: 0o755, Body: bb}}, appletEntries(links, have)...), nil
}
