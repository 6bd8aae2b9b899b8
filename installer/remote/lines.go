// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"errors"
	"sync"
)

// maxLine bounds one line of a streamed command's output (bytes); beyond it the line is
// dropped and so is the rest of the output, as bufio.Scanner does at its limit.
const maxLine = 16 << 20

// errStreamEnded is what a write after lineWriter.end returns: the command's remaining output
// is discarded once Stream has returned.
var errStreamEnded = errors.New("the stream's reader has ended")

// lineWriter is a streamed command's stdout: each complete line written to it goes to onLine
// (without its "\n" or "\r\n") from the writing goroutine — the session's own copy — so that
// a stream costs no goroutine and no pipe of its own (hundreds stream at once in the path
// check: docs/preflight.md "Cost at scale"). onLine is never called after end returns.
type lineWriter struct {
	mu      sync.Mutex
	onLine  func(string)
	partial []byte
	ended   bool
	tooLong bool
}

// Write calls onLine for every line p completes and keeps the rest for the next write.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return 0, errStreamEnded
	}
	n := len(p)
	if w.tooLong {
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.partial)+len(p) > maxLine {
				w.tooLong, w.partial = true, nil
				return n, nil
			}
			w.partial = append(w.partial, p...)
			break
		}
		line := p[:i]
		if len(w.partial) > 0 {
			line = append(w.partial, line...)
		}
		w.onLine(string(bytes.TrimSuffix(line, []byte{'\r'})))
		w.partial = w.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// end delivers a last line that had no "\n" and stops the writer: later writes fail and
// onLine is not called again. It waits for a call of onLine in progress.
func (w *lineWriter) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	w.ended = true
	if len(w.partial) > 0 && !w.tooLong {
		w.onLine(string(bytes.TrimSuffix(w.partial, []byte{'\r'})))
	}
	w.partial = nil
}
