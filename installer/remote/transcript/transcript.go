// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package transcript records what k3strap exchanged with a host through the host seam
// (remote.Host) and replays it, so that steps can be tested without root or hosts against what
// real hosts answered (docs/architecture.md, "The host seam"; docs/development.md, "Host
// transcripts"). A transcript is JSON lines, one Entry per call, in the order the calls
// finished. Secrets never enter a transcript: standard input is recorded as its length only,
// every text goes through k3s.Mask, and files that hold credentials are recorded as masked.
package transcript

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/k3strap/k3strap/k3s"
)

// Op names the remote.Host method an Entry records.
type Op string

// The recorded operations.
const (
	OpRun       Op = "run"    // Run and Check
	OpStream    Op = "stream" // Stream: Lines are what onLine got
	OpReadFile  Op = "read"   // ReadFile
	OpDownload  Op = "download"
	OpWriteFile Op = "write" // WriteFile and WriteFileResumable: Size and Mode
	OpDial      Op = "dial"  // DialContext: only recorded, a replay refuses to dial
	OpMethod    Op = "filemethod"
	// OpHTTP is one request to the Kubernetes API through the host (remote.APITransportWrapper):
	// Verb, Path, ReqBytes, Status, ContentType, and the body as Data, or for a watch as Lines
	// with LineMS.
	OpHTTP Op = "http"
	// OpHello is the first entry of a transcript: the connection's identity (Addr, User,
	// Root, SudoPassword).
	OpHello Op = "hello"
)

// Entry is one call through the seam.
type Entry struct {
	Op Op `json:"op"`
	// Cmd is remote.Cmd.String() (scripts shortened to their label) for run and stream;
	// Label the command's label (a replay matches on it when Cmd differs, e.g. by a random
	// lock ID); Path the file for read, download and write; Addr the dialled address.
	Cmd   string `json:"cmd,omitempty"`
	Label string `json:"label,omitempty"`
	Path  string `json:"path,omitempty"`
	Addr  string `json:"addr,omitempty"`
	// StdinBytes is the length of the command's standard input (its content is never kept).
	StdinBytes int `json:"stdinBytes,omitempty"`
	// Stdout, Stderr and Exit are the command's result; Lines the streamed standard output.
	Stdout string   `json:"stdout,omitempty"`
	Stderr string   `json:"stderr,omitempty"`
	Exit   int      `json:"exit,omitempty"`
	Lines  []string `json:"lines,omitempty"`
	// LineMS are the times the lines arrived, in milliseconds since the stream started (a
	// replay keeps the pace: a supervisor judges a quiet stream).
	LineMS []int64 `json:"lineMS,omitempty"`
	// Data is a file's content read from the host; Secret says it held credentials and was
	// replaced by k3s.Masked.
	Data   string `json:"data,omitempty"`
	Secret bool   `json:"secret,omitempty"`
	// Size and Mode are a written file's length and permission bits.
	Size int64       `json:"size,omitempty"`
	Mode os.FileMode `json:"mode,omitempty"`
	// AtMS is when the hello entry was recorded, Unix milliseconds: a replay moves the host's
	// timestamps by how much later it runs (Replay).
	AtMS int64 `json:"atMS,omitempty"`
	// User, Root and SudoPassword are the hello entry's login user, whether it is root, and
	// whether sudo had a password (never the password).
	User         string `json:"user,omitempty"`
	Root         bool   `json:"root,omitempty"`
	SudoPassword bool   `json:"sudoPassword,omitempty"`
	// Method is what FileMethod answered.
	Method string `json:"method,omitempty"`
	// Verb is an API request's method; Path (above) its path and query; ReqBytes the length of
	// its body (never the content); Status and ContentType the answer's (Status 0: no answer,
	// Err says why); Watch says the body was streamed (Lines, LineMS: one event a line).
	Verb        string `json:"verb,omitempty"`
	ReqBytes    int64  `json:"reqBytes,omitempty"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	Watch       bool   `json:"watch,omitempty"`
	// Err is the call's error text (masked), "" for success. A replay returns it as an error
	// of the same text; NotExist says it wrapped os.ErrNotExist.
	Err      string `json:"err,omitempty"`
	NotExist bool   `json:"notExist,omitempty"`
}

// Canceled reports whether the recorded call ended because its caller stopped it (a stream
// watched until the run moved on).
func (e Entry) Canceled() bool {
	return strings.HasSuffix(e.Err, context.Canceled.Error()) || strings.HasSuffix(e.Err, context.DeadlineExceeded.Error())
}

// secretPaths are host files whose content is a credential (docs/k3s.md): recorded masked.
var secretPaths = []string{k3s.PathKubeconfig, k3s.PathTokenFile, "/var/lib/rancher/k3s/server/token",
	"/var/lib/rancher/k3s/server/agent-token", "/etc/rancher/node/password"}

// isSecretPath reports whether p holds a credential.
func isSecretPath(p string) bool {
	for _, s := range secretPaths {
		if p == s {
			return true
		}
	}
	return strings.Contains(p, "password") || strings.HasSuffix(p, ".key") || strings.Contains(p, "token")
}

// Read parses a transcript of JSON lines. Errors name the line.
func Read(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("transcript line %d: %w", n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// ReadFile reads the transcript at path.
func ReadFile(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	es, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return es, nil
}
