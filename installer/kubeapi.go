// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"

	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/remote"
)

// api returns the Kubernetes API of server hs: client-go over SSH direct-tcpip channels to
// the server's loopback, authenticated with its admin kubeconfig, read over SSH the first time
// it is asked for and kept in memory for the run (kube.Connect). Its connections follow the
// host's current SSH connection (a reconnect replaces it). An error (no connection, no
// kubeconfig yet: K3s not installed or not started) is not remembered: the next call tries
// again.
func (hs *hostState) api(ctx context.Context) (*kube.API, error) {
	hs.kubeMu.Lock()
	defer hs.kubeMu.Unlock()
	if hs.kube != nil {
		return hs.kube, nil
	}
	a, err := kube.Connect(ctx, func() kube.Conn {
		if c := hs.c(); c != nil {
			return c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	hs.kube = a
	return a, nil
}

// withAPI runs fn with server hs's API (api). An error of a call whose SSH connection ended
// under it becomes a *remote.TransportError, so that session.retry reconnects and tries again.
func (hs *hostState) withAPI(ctx context.Context, fn func(a *kube.API) error) error {
	a, err := hs.api(ctx)
	if err == nil {
		err = fn(a)
	}
	if err == nil || ctx.Err() != nil {
		return err
	}
	if c := hs.c(); c != nil {
		select {
		case <-c.Done():
			return &remote.TransportError{Host: hs.host.Name, Op: "Kubernetes API", Err: err}
		default:
		}
	}
	return err
}
