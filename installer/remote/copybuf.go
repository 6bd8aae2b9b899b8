// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import "io"

// copyBufSize is the buffer of each stream copy between a session and the caller. The SSH
// library's own copies (io.Copy) allocate 32 KiB per stream for as long as the command runs:
// with hundreds of hosts streaming at once (the path check runs a probe on every host for the
// whole step, its input open) those buffers were the largest part of k3strap's memory
// (docs/preflight.md "Measured at scale").
const copyBufSize = 4 << 10

// smallCopy is w for a session's stdout or stderr (io.Discard for nil, as the library does).
func smallCopy(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return smallCopyWriter{w}
}

// smallCopyWriter is a session's stdout or stderr: the library's io.Copy into it calls
// ReadFrom, which copies with a copyBufSize buffer (or the writer's own ReadFrom).
type smallCopyWriter struct{ w io.Writer }

func (s smallCopyWriter) Write(p []byte) (int, error) { return s.w.Write(p) }

// ReadFrom copies r to the writer until EOF.
func (s smallCopyWriter) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := s.w.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.CopyBuffer(struct{ io.Writer }{s.w}, struct{ io.Reader }{r}, make([]byte, copyBufSize))
}

// copyStdin copies in to the session's stdin pipe with a copyBufSize buffer and closes the
// pipe at in's end (the remote command then reads EOF), as the library does with
// Session.Stdin but without its two 32 KiB copies.
func copyStdin(pipe io.WriteCloser, in io.Reader) {
	_, _ = io.CopyBuffer(struct{ io.Writer }{pipe}, struct{ io.Reader }{in}, make([]byte, copyBufSize))
	_ = pipe.Close()
}
