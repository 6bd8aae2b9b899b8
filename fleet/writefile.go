// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !windows

package fleet

import (
	"os"

	"github.com/google/renameio/v2"
)

// writeFileAtomic replaces path with data (mode perm) so that a reader sees either the old or
// the new content, never a part: renameio writes a temporary file in path's directory, syncs it
// and renames it over path. renameio has no WriteFile on Windows (its doc: rename is not atomic
// there); writefile_windows.go is that platform's version. Errors are renameio's (they name
// the file).
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	return renameio.WriteFile(path, data, perm)
}
