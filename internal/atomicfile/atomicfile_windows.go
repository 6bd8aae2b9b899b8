// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data on Windows, where renameio offers no WriteFile: a
// temporary file in path's directory is written, synced, closed and renamed over path
// (os.Rename uses MoveFileEx with MOVEFILE_REPLACE_EXISTING, which replaces path in one step
// on NTFS). perm is ignored beyond what os.CreateTemp sets (Windows has no Unix modes). The
// temporary file is removed on any error; errors name the file.
func WriteFile(path string, data []byte, _ os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
