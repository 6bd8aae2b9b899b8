// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// readSizes records the size of every buffer a copy reads into.
type readSizes struct {
	r     io.Reader
	sizes []int
}

func (s *readSizes) Read(p []byte) (int, error) {
	s.sizes = append(s.sizes, len(p))
	return s.r.Read(p)
}

func TestGrowingCopy(t *testing.T) {
	t.Run("bulk grows to the largest buffer", func(t *testing.T) {
		src := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
		rs := &readSizes{r: strings.NewReader(src)}
		var dst bytes.Buffer
		n, err := growingCopy(&dst, rs)
		if err != nil || n != int64(len(src)) || dst.String() != src {
			t.Fatalf("copied %d bytes (%v), want %d and the same bytes", n, err, len(src))
		}
		if rs.sizes[0] != copyBufStart {
			t.Errorf("first read into %d bytes, want %d", rs.sizes[0], copyBufStart)
		}
		if last := rs.sizes[len(rs.sizes)-1]; last != copyBufSize {
			t.Errorf("last read into %d bytes, want the largest buffer %d", last, copyBufSize)
		}
	})
	t.Run("a line now and then keeps the small buffer", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			for range 20 {
				_, _ = pw.Write([]byte("ready\n"))
			}
			_ = pw.Close()
		}()
		rs := &readSizes{r: pr}
		var dst bytes.Buffer
		if _, err := growingCopy(&dst, rs); err != nil {
			t.Fatal(err)
		}
		for _, s := range rs.sizes {
			if s != copyBufStart {
				t.Fatalf("read into %d bytes, want %d for short writes: %v", s, copyBufStart, rs.sizes)
			}
		}
		if dst.String() != strings.Repeat("ready\n", 20) {
			t.Errorf("copied %q", dst.String())
		}
	})
	t.Run("errors", func(t *testing.T) {
		boom := errors.New("boom")
		if _, err := growingCopy(io.Discard, io.MultiReader(strings.NewReader("abc"), errReader{boom})); !errors.Is(err, boom) {
			t.Errorf("read error: got %v, want %v", err, boom)
		}
		if _, err := growingCopy(errWriter{boom}, strings.NewReader("abc")); !errors.Is(err, boom) {
			t.Errorf("write error: got %v, want %v", err, boom)
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }
