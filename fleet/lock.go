// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// Lock is the lock of a state file: while a run holds it, no other run on this state file
// starts. It gives the guarantee of a cluster's run lock (installer/lock): of several runs
// trying at once exactly one gets it, and a lock whose run is gone is taken over — here by the
// kernel: the lock is flock(2) on STATE.lock, held by the open file of the running process and
// released when that process ends, however it ends (a crash, kill -9, a closed laptop's
// dropped session). The file stays (removing it would let two runs lock two different files);
// it holds the holder's description for the message of a run that is refused.
type Lock struct {
	fl   *flock.Flock
	path string
}

// LockPath is the lock file of a state file.
func LockPath(statePath string) string { return statePath + ".lock" }

// ErrLocked is returned by TakeLock when another run holds the lock; Holder says who.
type ErrLocked struct {
	Path   string
	Holder string
}

func (e *ErrLocked) Error() string {
	return fmt.Sprintf("another k3strap run holds the fleet lock %s: %s", e.Path, e.Holder)
}

// TakeLock takes the lock of the state file at statePath for command, or returns *ErrLocked
// naming the run that holds it. It does not wait.
func TakeLock(statePath, command string, now time.Time) (*Lock, error) {
	p := LockPath(statePath)
	fl := flock.New(p, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o644))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("taking the fleet lock %s: %w", p, err)
	}
	if !ok {
		holder := "another k3strap run"
		if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder = strings.TrimSpace(string(b))
		}
		return nil, &ErrLocked{Path: p, Holder: holder}
	}
	// The description is for messages only; the flock is the lock.
	_ = os.WriteFile(p, []byte(holderLine(command, now)+"\n"), 0o644)
	return &Lock{fl: fl, path: p}, nil
}

// Held reports whether some process holds the lock of the state file at statePath (for
// `fleet status`: a site recorded as running with no run holding the lock was interrupted).
func Held(statePath string) bool {
	fl := flock.New(LockPath(statePath), flock.SetFlag(os.O_RDONLY))
	ok, err := fl.TryRLock()
	if err != nil {
		return false
	}
	_ = fl.Unlock()
	return !ok
}

// Unlock releases the lock (its description is cleared).
func (l *Lock) Unlock() {
	if l == nil {
		return
	}
	_ = os.Truncate(l.path, 0)
	_ = l.fl.Unlock()
}
