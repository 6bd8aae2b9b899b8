// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// BinaryRelease returns the K3s release of the binary in r (size bytes): first from its Go
// build information (debug/buildinfo: the -ldflags build setting holds
// `-X github.com/k3s-io/k3s/pkg/version.Version=v1.36.3+k3s1` for a real K3s, `-X
// main.version=…` for the e2e simulator), else by scanning the file for the first K3s release
// string (ReleasePattern, as printed by `k3s --version`). The error says why nothing was
// found, or wraps the read error.
func BinaryRelease(r io.ReaderAt, size int64) (string, error) {
	if bi, err := buildinfo.Read(r); err == nil {
		for _, s := range bi.Settings {
			if s.Key != "-ldflags" {
				continue
			}
			if v := ldflagsRelease(s.Value); v != "" {
				return v, nil
			}
		}
	}
	return scanRelease(io.NewSectionReader(r, 0, size))
}

// BinaryReleaseFile is BinaryRelease of the file at path.
func BinaryReleaseFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory, not a K3s binary", path)
	}
	v, err := BinaryRelease(f, st.Size())
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ldflagsRelease finds a K3s release set with -X NAME=VALUE where NAME ends in version.Version
// or main.version (quoted or not).
func ldflagsRelease(ldflags string) string {
	for _, f := range strings.Fields(ldflags) {
		f = strings.Trim(f, `"'`)
		name, val, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		l := strings.ToLower(name)
		if strings.HasSuffix(l, "version.version") || strings.HasSuffix(l, "main.version") {
			if v := FindRelease(val); v != "" {
				return v
			}
		}
	}
	return ""
}

// errNoRelease is returned when a file holds no K3s release string.
var errNoRelease = errors.New("no K3s release (vX.Y.Z+k3sN) found in the file: not a K3s binary?")

// scanRelease reads r in chunks with an overlap and returns the first release string.
func scanRelease(r io.Reader) (string, error) {
	const chunk, overlap = 1 << 20, 64
	buf := make([]byte, chunk+overlap)
	keep := 0
	for {
		n, err := io.ReadFull(r, buf[keep:])
		data := buf[:keep+n]
		if v := releaseRE.Find(data); v != nil {
			return string(v), nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return "", errNoRelease
		}
		if err != nil {
			return "", err
		}
		keep = copy(buf, data[len(data)-overlap:])
	}
}
