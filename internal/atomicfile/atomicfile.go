// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !windows

// Package atomicfile is the project's one atomic file write: a reader sees the old content or
// the new, never a part (the fleet state journal, the inventory `k3strap init` writes).
package atomicfile

import (
	"os"

	"github.com/google/renameio/v2"
)

// WriteFile replaces path with data (mode perm; an existing file keeps its mode) so that a reader sees either the old or
// the new content, never a part: renameio writes a temporary file in path's directory, syncs it
// and renames it over path. renameio has no WriteFile on Windows (its doc: rename is not atomic
// there); atomicfile_windows.go is that platform's version. Errors are renameio's (they name
// the file).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return renameio.WriteFile(path, data, perm)
}
