// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// The -f input: named by -f, $K3STRAP_FILE or the default ./cluster.yaml, "-" for stdin. It is read once per run — a FIFO,
// /dev/stdin or a pipe cannot be read twice — and the bytes are handed to whichever loader the
// content needs (a fleet file or an inventory). The read yields to Ctrl-C: opening a FIFO that
// has no writer blocks in the kernel, so the open and the read run apart from the command,
// which returns as soon as the run's context is cancelled (exit 130; the process ends, the
// blocked read with it).

// stdinPath is the -f value that reads the inventory from stdin (kubectl's, helm's habit).
const stdinPath = "-"

// stdinSource names stdin in messages (file:line:column) and as the inventory's Source (the
// base of its relative paths is then the current directory).
const stdinSource = "<stdin>"

// maxInputBytes bounds an inventory or fleet file: a mistaken -f (a disk image, /dev/zero)
// must end in an error, not fill the memory.
const maxInputBytes = 16 << 20

// input is the -f input as read: the name messages use, the content, or why it could not be
// read.
type input struct {
	// path is what -f (or $K3STRAP_FILE) said; source is the name for messages and the
	// loaders (path, or stdinSource for "-").
	path, source string
	data         []byte
	err          error
}

// defaultInventory is the inventory read when neither -f nor $K3STRAP_FILE names one: the
// file `k3strap init` writes (k0sctl's k0sctl.yaml habit).
const defaultInventory = "cluster.yaml"

// envFile is the environment variable naming the inventory when -f is not given.
const envFile = EnvPrefix + "_FILE"

// inputPath returns the inventory to read and where its name came from. Precedence (k0sctl's):
// an explicit -f, then $K3STRAP_FILE, then ./cluster.yaml when it exists; "" when none.
// from is "" for -f, else the words a notice uses ("$K3STRAP_FILE", "the default").
func (a *app) inputPath() (path, from string) {
	if a.file != "" {
		return a.file, ""
	}
	if p := os.Getenv(envFile); p != "" {
		return p, "$" + envFile
	}
	if st, err := os.Stat(defaultInventory); err == nil && !st.IsDir() {
		return "./" + defaultInventory, "the default; no -f given"
	}
	return "", ""
}

// readInput reads the -f input once and returns it (later calls return the same bytes).
// Errors: no -f (usage error), a file that cannot be read (readError: usage error naming the
// file and a fix), the run cancelled while the read waits (wraps context.Canceled: exit 130).
func (a *app) readInput() (*input, error) {
	if a.in != nil {
		return a.in, a.in.err
	}
	path, from := a.inputPath()
	in := &input{path: path, source: path}
	if from != "" {
		// On stderr: stdout may be a JSON document or a rendered file.
		fmt.Fprintf(a.stderr, "using %s (%s)\n", path, from)
	}
	switch {
	case path == "":
		in.err = usageError{errors.New("no inventory: give -f FILE (or set K3STRAP_FILE, or write ./cluster.yaml with `k3strap init`), or -f - to read it from stdin")}
	case path == stdinPath:
		in.source = stdinSource
		in.data, in.err = readAll(a.ctx, "stdin", func() (io.ReadCloser, error) { return io.NopCloser(a.stdin), nil })
	default:
		in.data, in.err = readAll(a.ctx, path, func() (io.ReadCloser, error) { return os.Open(path) })
		if in.err != nil && !errors.Is(in.err, context.Canceled) && !errors.As(in.err, new(usageError)) {
			in.err = readError(path, in.err) // validate.go
		}
	}
	a.in = in
	return in, in.err
}

// readAll opens (open) and reads the input named name to its end, at most maxInputBytes, in a
// goroutine of its own, and returns when it is done or ctx is cancelled — whichever is first.
// A cancelled wait leaves the blocked open or read behind (the process is about to exit).
func readAll(ctx context.Context, name string, open func() (io.ReadCloser, error)) ([]byte, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := open()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer r.Close()
		data, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
		if err == nil && len(data) > maxInputBytes {
			err = usageError{fmt.Errorf("%s is larger than %d MiB: it is not an inventory — fix: give the inventory file with -f", name, maxInputBytes>>20)}
		}
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("reading %s: cancelled while it waited for input (a FIFO without a writer, or stdin without an end): %w", name, ctx.Err())
	}
}
