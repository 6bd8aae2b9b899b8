// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"fmt"
	"time"

	"github.com/k3strap/k3strap/events"
)

// Upload progress in plain output (docs/output.md "Progress in CI logs"): the installer emits an
// upload_progress event about every 200 ms; a CI log gets a line per upload at every further
// tenth of the file or after ProgressEvery without one, and never more than one progress line
// per host within ProgressMinGap. The last event of a file (Done) always prints. With
// --verbose every event prints.
const (
	// ProgressEvery is the longest a running upload goes without a progress line.
	ProgressEvery = 10 * time.Second
	// ProgressMinGap is the shortest time between two progress lines of one host.
	ProgressMinGap = time.Second
)

// uploadTrack is what Plain remembers of one running upload: where it started (time and
// bytes, for the rate) and its last printed line (time and tenth of the file).
type uploadTrack struct {
	start      time.Time
	startBytes int64
	lastAt     time.Time
	lastTenth  int64
}

// uploadLine decides whether e, an upload_progress event, gets a line without --verbose and
// returns the tail to append to it: percent, rate and ETA (or the rate and duration when the
// upload is done), empty while no rate is known (the file's first event). Times are the
// events' own, so a replayed stream prints the same lines. The caller holds p.mu.
func (p *Plain) uploadLine(e events.Event) (bool, string) {
	u := e.Upload
	if p.uploads == nil {
		p.uploads = map[string]*uploadTrack{}
		p.hostLine = map[string]time.Time{}
	}
	host := e.Site + "/" + e.Host
	key := host + "\x00" + u.File
	tenth := int64(0)
	if u.Total > 0 {
		tenth = u.Bytes * 10 / u.Total
	}
	tr, ok := p.uploads[key]
	if !ok {
		tr = &uploadTrack{start: e.Time, startBytes: u.Bytes, lastAt: e.Time, lastTenth: tenth}
		p.uploads[key] = tr
	}
	elapsed := e.Time.Sub(tr.start)
	rate := 0.0 // bytes per second
	if elapsed > 0 && u.Bytes > tr.startBytes {
		rate = float64(u.Bytes-tr.startBytes) / elapsed.Seconds()
	}
	tail := ""
	switch {
	case u.Done:
		delete(p.uploads, key)
		if rate > 0 {
			tail = fmt.Sprintf(" (done in %s, %s/s)", elapsed.Round(100*time.Millisecond), HumanBytes(int64(rate)))
		}
		p.hostLine[host] = e.Time
		return true, tail
	case rate > 0:
		eta := time.Duration(float64(u.Total-u.Bytes) / rate * float64(time.Second))
		tail = fmt.Sprintf(" (%d%%, %s/s, ETA %s)", percent(u.Bytes, u.Total), HumanBytes(int64(rate)), eta.Round(time.Second))
	}
	if !ok || u.Bytes >= u.Total {
		// The file's first event: its size shows with the next line. All sent: the Done event
		// follows at once.
		return false, tail
	}
	if tenth <= tr.lastTenth && e.Time.Sub(tr.lastAt) < ProgressEvery {
		return false, tail
	}
	if last, seen := p.hostLine[host]; seen && e.Time.Sub(last) < ProgressMinGap {
		return false, tail
	}
	tr.lastAt, tr.lastTenth = e.Time, tenth
	p.hostLine[host] = e.Time
	return true, tail
}

func percent(n, total int64) int64 {
	if total <= 0 {
		return 100
	}
	return n * 100 / total
}
