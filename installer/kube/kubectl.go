// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kube reads and writes the cluster through a server's own `k3s kubectl` over SSH
// (by design: no port but SSH has to be reachable from the workstation) and decodes what it
// prints into k8s.io/api types.
package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// Errors kubectl reports that callers act on.
var (
	// ErrNotFound wraps kubectl's "Error from server (NotFound)".
	ErrNotFound = errors.New("not found")
	// ErrConflict wraps kubectl's "Error from server (Conflict)": the object changed since it
	// was read (stale metadata.resourceVersion).
	ErrConflict = errors.New("conflict")
	// ErrAPIDown wraps "The connection to the server ... was refused".
	ErrAPIDown = errors.New("API server not reachable")
)

// Runner is what kubectl needs from a host connection.
type Runner interface {
	Run(ctx context.Context, cmd remote.Cmd) (*remote.Result, error)
	Host() string
}

// Kubectl runs `k3s kubectl` as root on one server (its kubeconfig is
// /etc/rancher/k3s/k3s.yaml, mode 0600).
type Kubectl struct {
	R Runner
	// Binary is the k3s binary, default k3s.PathBinary.
	Binary string
}

func (k Kubectl) cmd(args ...string) remote.Cmd {
	bin := k.Binary
	if bin == "" {
		bin = k3s.PathBinary
	}
	return remote.Command(append([]string{bin, "kubectl"}, args...)...).AsRoot()
}

// Run runs kubectl with args (and stdin) and returns stdout. A non-zero exit becomes an error
// wrapping ErrNotFound, ErrConflict or ErrAPIDown when kubectl said so.
func (k Kubectl) Run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	c := k.cmd(args...)
	c.Label = "kubectl " + strings.Join(args, " ")
	// A kubectl that waits (drain, delete --timeout=D) gets its own wait and a minute more;
	// every other call the transport's default deadline.
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--timeout="); ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				c.Timeout = max(d+time.Minute, remote.DefaultCommandTimeout)
			}
		}
	}
	if stdin != nil {
		c = c.WithStdin(bytes.NewReader(stdin))
	}
	res, err := k.R.Run(ctx, c)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return res.Stdout, Classify(k.R.Host(), strings.Join(args, " "), res.Stderr)
	}
	return res.Stdout, nil
}

// Classify turns kubectl's stderr into an error wrapping ErrNotFound, ErrConflict or
// ErrAPIDown when it recognises the message.
func Classify(host, what string, stderr []byte) error {
	msg := strings.TrimSpace(string(stderr))
	var kind error
	switch {
	case strings.Contains(msg, "(NotFound)"):
		kind = ErrNotFound
	case strings.Contains(msg, "(Conflict)"):
		kind = ErrConflict
	case strings.Contains(msg, "connection to the server") || strings.Contains(msg, "connection refused"):
		kind = ErrAPIDown
	default:
		return fmt.Errorf("%s: kubectl %s: %s", host, what, msg)
	}
	return fmt.Errorf("%s: kubectl %s: %w: %s", host, what, kind, msg)
}

// DeleteNode deletes the Node named name (one already gone is no error) and waits at most
// timeout for it to go. A server's Node of an embedded-etcd cluster carries K3s's finalizer
// wrangler.cattle.io/managed-etcd-controller: it goes once K3s has removed the server's etcd
// member (docs/day2.md), so the wait is bounded rather than kubectl's default of forever.
func (k Kubectl) DeleteNode(ctx context.Context, name string, timeout time.Duration) error {
	_, err := k.Run(ctx, nil, "delete", "node", name, "--ignore-not-found", "--timeout="+timeout.String())
	return err
}

// GetNode returns the Node named name.
func (k Kubectl) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	out, err := k.Run(ctx, nil, "get", "node", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var n corev1.Node
	if err := json.Unmarshal(out, &n); err != nil {
		return nil, fmt.Errorf("%s: decoding node %s: %w", k.R.Host(), name, err)
	}
	return &n, nil
}

// ListNodes returns every Node.
func (k Kubectl) ListNodes(ctx context.Context) ([]corev1.Node, error) {
	out, err := k.Run(ctx, nil, "get", "nodes", "-o", "json")
	if err != nil {
		return nil, err
	}
	var l corev1.NodeList
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("%s: decoding nodes: %w", k.R.Host(), err)
	}
	return l.Items, nil
}

// ListPods returns the pods of namespace ns ("" = all namespaces).
func (k Kubectl) ListPods(ctx context.Context, ns string) ([]corev1.Pod, error) {
	args := []string{"get", "pods", "-o", "json"}
	if ns == "" {
		args = append(args, "-A")
	} else {
		args = append(args, "-n", ns)
	}
	out, err := k.Run(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	var l corev1.PodList
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("%s: decoding pods: %w", k.R.Host(), err)
	}
	return l.Items, nil
}

// ReplaceNode writes n back with `kubectl replace -f -`. n must carry the
// metadata.resourceVersion it was read with: a concurrent change makes the API answer 409 and
// the error wraps ErrConflict (docs/failure-modes.md F5: read-modify-write, never a bare list patch).
func (k Kubectl) ReplaceNode(ctx context.Context, n *corev1.Node) error {
	if n.ResourceVersion == "" {
		return fmt.Errorf("refusing to replace node %s without metadata.resourceVersion", n.Name)
	}
	c := *n
	c.APIVersion, c.Kind = "v1", "Node"
	body, err := json.Marshal(&c)
	if err != nil {
		return err
	}
	_, err = k.Run(ctx, body, "replace", "-f", "-")
	return err
}

// Apply runs `kubectl apply -f -` with manifest (YAML or JSON, several documents allowed) and
// returns kubectl's output lines.
func (k Kubectl) Apply(ctx context.Context, manifest []byte) (string, error) {
	out, err := k.Run(ctx, manifest, "apply", "-f", "-")
	return strings.TrimSpace(string(out)), err
}
