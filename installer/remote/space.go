// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// WriteError is a write to a host that failed because of the host's filesystem: no space, no
// inodes, mounted read-only, or not writable by the login user. It says so with the numbers —
// "no space left on /usr/local/bin (24 MiB free, 68 MiB needed)" — instead of SFTP's bare
// "Failure". It is not transient.
type WriteError struct {
	Host string
	// Dir is the directory written to; Mount the mount point of its filesystem.
	Dir, Mount string
	// Reason is what the host's filesystem says ("no space left on /usr/local/bin (...)").
	Reason string
	// FreeBytes is the space available to the writer; NeededBytes what the write needed.
	FreeBytes, NeededBytes int64
	// Err is the failure the write reported.
	Err error
}

func (e *WriteError) Error() string { return fmt.Sprintf("%s: %s", e.Host, e.Reason) }

func (e *WriteError) Unwrap() error { return e.Err }

// writeCheckTimeout bounds the command that asks a host why a write failed.
const writeCheckTimeout = 20 * time.Second

// writeCheckScript reports, for directory $1 (or its nearest existing parent), the space and
// inodes free on its filesystem (df -P, in KiB), its mount point and options
// (/proc/self/mounts) and whether the login user may write to it.
const writeCheckScript = `d=$1
while [ ! -d "$d" ]; do d=$(dirname "$d"); done
echo "dir $d"
df -Pk "$d" 2>/dev/null | awk 'NR > 1 { print "avail", $(NF-2); print "mount", $NF }'
df -Pi "$d" 2>/dev/null | awk 'NR > 1 && $(NF-2) ~ /^[0-9]+$/ { print "ifree", $(NF-2) }'
m=$(df -Pk "$d" 2>/dev/null | awk 'NR > 1 { print $NF }')
[ -n "$m" ] && awk -v m="$m" '$2 == m { o = $4 } END { if (o != "") print "opts", o }' /proc/self/mounts
if [ -w "$d" ]; then echo "writable yes"; else echo "writable no"; fi`

// writeNeed is what a failed write needed of a directory on the host.
type writeNeed struct {
	// dir is the directory written to; asRoot says the write was done as root (the check
	// then runs as root too).
	dir    string
	asRoot bool
	// need is the space the whole write needs there (bytes); what says what need is made
	// of, for the message ("" when it is just the file).
	need int64
	what string
}

// explainWrite asks the host why a write described by w failed with cause (one command,
// bounded by writeCheckTimeout) and returns a *WriteError saying what the filesystem says, or
// cause itself when the host shows nothing wrong, the question fails, the connection is gone
// or ctx is done.
func (c *Client) explainWrite(ctx context.Context, w writeNeed, cause error) error {
	if cause == nil || ctx.Err() != nil || c.closed() {
		return cause
	}
	var te *TransportError
	var we *WriteError
	var de *DeadlineError
	if errors.As(cause, &te) || errors.As(cause, &we) || errors.As(cause, &de) {
		return cause
	}
	cmd := Script("check "+w.dir, writeCheckScript, w.dir).WithTimeout(writeCheckTimeout)
	cmd.Sudo = w.asRoot
	res, err := c.Run(ctx, cmd)
	if err != nil || res.ExitCode != 0 {
		return cause
	}
	return c.writeVerdict(w, res.Stdout, cause)
}

// writeVerdict judges writeCheckScript's output (see explainWrite).
func (c *Client) writeVerdict(w writeNeed, out []byte, cause error) error {
	kv := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
			kv[k] = v
		}
	}
	e := &WriteError{Host: c.cfg.Host, Dir: w.dir, Mount: kv["mount"], NeededBytes: w.need, Err: cause}
	free, haveFree := int64(-1), false
	if n, err := strconv.ParseInt(kv["avail"], 10, 64); err == nil {
		free, haveFree = n*1024, true
		e.FreeBytes = free
	}
	on := ""
	if e.Mount != "" && e.Mount != w.dir {
		on = " (on the filesystem mounted at " + e.Mount + ")"
	}
	readOnly := false
	for _, o := range strings.Split(kv["opts"], ",") {
		readOnly = readOnly || o == "ro"
	}
	switch {
	case readOnly:
		e.Reason = fmt.Sprintf("read-only filesystem: %s%s is mounted read-only; remount it read-write", w.dir, on)
	case haveFree && free < w.need:
		needed := FormatBytes(w.need) + " needed"
		if w.what != "" {
			needed += ": " + w.what
		}
		e.Reason = fmt.Sprintf("no space left on %s%s (%s free, %s); free space there or mount a larger disk", w.dir, on, FormatBytes(free), needed)
	case kv["ifree"] == "0":
		e.Reason = fmt.Sprintf("no free inodes on %s%s; remove files there", w.dir, on)
	case kv["writable"] == "no":
		user := c.cfg.User
		if w.asRoot {
			user = "root"
		}
		e.Reason = fmt.Sprintf("permission denied: %s cannot write to %s", user, kv["dir"])
	default:
		return cause
	}
	return e
}

// FormatBytes renders n bytes for a message: "512 B", "24 KiB", "68 MiB", "1.5 GiB".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatInt((n+(1<<19))>>20, 10) + " MiB"
	case n >= 1<<10:
		return strconv.FormatInt((n+(1<<9))>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}
