// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import "io"

// copyBufSize is the largest buffer of a stream copy between a session and the caller
// (bytes), copyBufStart its first. The SSH library's own copies (io.Copy) allocate 32 KiB per
// stream for as long as the command runs: with hundreds of hosts streaming at once (the path
// check runs a probe on every host for the whole step, its input open) those buffers were the
// largest part of k3strap's memory (docs/preflight.md "Cost at scale"). A copy starts small and
// doubles its buffer while reads fill it, so a stream that carries a line now and then (a
// probe's input and output, stderr) holds copyBufStart bytes while it waits, and a bulk copy
// (a file read back) reaches copyBufSize after a few reads.
const (
	copyBufSize  = 4 << 10
	copyBufStart = 512
)

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
	return growingCopy(s.w, r)
}

// copyStdin copies in to the session's stdin pipe (growingCopy) and closes the pipe at in's
// end (the remote command then reads EOF), as the library does with Session.Stdin but without
// its two 32 KiB copies.
func copyStdin(pipe io.WriteCloser, in io.Reader) {
	_, _ = growingCopy(pipe, in)
	_ = pipe.Close()
}

// growingCopy copies r to w until r's EOF (not an error) or the first error, and returns the
// bytes written. Its buffer starts at copyBufStart bytes and doubles, up to copyBufSize, each
// time a read fills it.
func growingCopy(w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, copyBufStart)
	var total int64
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
			if m < n {
				return total, io.ErrShortWrite
			}
			if n == len(buf) && len(buf) < copyBufSize {
				buf = make([]byte, 2*len(buf))
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}
