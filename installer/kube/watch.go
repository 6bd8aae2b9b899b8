// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// Streamer is what WatchNodes needs from a host connection: a command whose standard output
// arrives line by line.
type Streamer interface {
	Stream(ctx context.Context, cmd remote.Cmd, onLine func(string)) error
	Host() string
}

// NodeEvent is one change of a Node seen by WatchNodes. Type is ADDED, MODIFIED or DELETED.
type NodeEvent struct {
	Type string
	Node corev1.Node
}

// watchNodesScript runs kubectl's watch under timeout(1) when the host has it, so that the
// watch never outlives its deadline on the host even when the SSH channel's end is lost.
const watchNodesScript = `secs=$1 bin=$2
shift 2
if command -v timeout >/dev/null 2>&1; then exec timeout "$secs" "$bin" kubectl "$@"; fi
exec "$bin" kubectl "$@"`

// WatchNodes runs `k3s kubectl get nodes --watch -o json --output-watch-events` on a server
// (binary "" = k3s.PathBinary) and calls onEvent for every Node event, the current Nodes
// first (as ADDED), from one goroutine, in order. It returns when ctx ends (nil), when the watch
// ends on the host — the API server closes watches after a while, and the watch is killed after
// maxAge (rounded up to whole seconds) — (nil), or with the transport's or kubectl's error
// (wrapping ErrAPIDown when the API did not answer) or a decoding error.
func WatchNodes(ctx context.Context, s Streamer, binary string, maxAge time.Duration, onEvent func(NodeEvent)) error {
	if binary == "" {
		binary = k3s.PathBinary
	}
	secs := strconv.Itoa(int((maxAge + time.Second - 1) / time.Second))
	cmd := remote.Script("kubectl get nodes --watch", watchNodesScript, secs, binary,
		"get", "nodes", "--watch", "-o", "json", "--output-watch-events").AsRoot().WithTimeout(maxAge + 30*time.Second)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	decoded := make(chan error, 1)
	go func() {
		dec := json.NewDecoder(pr)
		for {
			var ev struct {
				Type   string      `json:"type"`
				Object corev1.Node `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				} else {
					cancel() // what follows cannot be decoded either
				}
				// Unblock the writer whatever happened.
				_ = pr.CloseWithError(io.ErrClosedPipe)
				decoded <- err
				return
			}
			onEvent(NodeEvent{Type: ev.Type, Node: ev.Object})
		}
	}()
	err := s.Stream(sctx, cmd, func(line string) {
		_, _ = io.WriteString(pw, line+"\n")
	})
	_ = pw.Close()
	derr := <-decoded
	if derr != nil {
		return fmt.Errorf("%s: decoding the node watch: %w", s.Host(), derr)
	}
	if ctx.Err() != nil {
		return nil
	}
	var ce *remote.CommandError
	if errors.As(err, &ce) {
		// timeout(1) exits 124 when it ended the watch: a normal end.
		if ce.ExitCode == 124 {
			return nil
		}
		return Classify(s.Host(), "get nodes --watch", []byte(ce.Stderr))
	}
	return err
}
