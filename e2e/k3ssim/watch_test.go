// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/app"
)

// syncBuffer is a bytes.Buffer safe to read while kubectl writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKubectlWatchNodes: `kubectl get nodes --watch -o json --output-watch-events` prints the
// current Nodes as ADDED events, then each change as it happens (indented JSON documents, as
// kubectl does), until it is stopped; other output formats are refused by name.
func TestKubectlWatchNodes(t *testing.T) {
	t.Parallel()
	root := newRoot(t, map[string]string{"/etc/rancher/k3s/config.yaml": plainConfig, "/etc/k3ssim/sim.yaml": "timeScale: 0.05\n"})
	s := startSim(t, "server", root, "cp1", nil, nil)
	s.waitReadyz(10 * time.Second)
	eventually(t, 10*time.Second, "node cp1 registered", func() bool {
		out, _, code := s.kubectl("", "get", "node", "cp1", "-o", "name")
		return code == 0 && strings.TrimSpace(out) == "node/cp1"
	})
	if _, e, code := s.kubectl("", "get", "nodes", "--watch", "-o", "wide"); code != 1 || !strings.Contains(e, "-o json") {
		t.Errorf("watch -o wide: %d %q, want a refusal naming -o json", code, e)
	}

	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		env := map[string]string{"KUBECONFIG": s.kubeconfig()}
		done <- app.Main(ctx, app.Options{Args: []string{"k3s", "kubectl", "get", "nodes", "--watch", "-o", "json", "--output-watch-events"},
			Getenv: func(k string) string { return env[k] }, Root: s.root, Stdout: &out, Stderr: &out, Version: "v1.36.3+k3s1"})
	}()
	decode := func() []string {
		var got []string
		dec := json.NewDecoder(strings.NewReader(out.String()))
		for {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct {
						Name   string            `json:"name"`
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if dec.Decode(&ev) != nil {
				return got
			}
			got = append(got, ev.Type+" "+ev.Object.Metadata.Name+" "+ev.Object.Metadata.Labels["watch-test"])
		}
	}
	eventually(t, 10*time.Second, "the current node as ADDED", func() bool {
		g := decode()
		return len(g) > 0 && g[0] == "ADDED cp1 "
	}, out.String)
	if _, e, code := s.kubectl("", "label", "node", "cp1", "watch-test=yes"); code != 0 {
		t.Fatalf("label: %s", e)
	}
	eventually(t, 10*time.Second, "the label change as MODIFIED", func() bool {
		for _, g := range decode() {
			if g == "MODIFIED cp1 yes" {
				return true
			}
		}
		return false
	}, out.String)
	if !strings.Contains(out.String(), "\n    \"object\": {") {
		t.Errorf("not indented as kubectl prints JSON:\n%.300s", out.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("stopped watch exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not stop with its context")
	}
}
