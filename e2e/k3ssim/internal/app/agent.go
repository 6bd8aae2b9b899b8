// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/flags"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/join"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/nodeagent"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
)

// joinCluster fetches and checks the cluster CA and joins with the token. Connection errors
// are retried every 2 s (scaled) as K3s does; a wrong token (CA hash or password) or a
// critical configuration mismatch is fatal (logged; ok false).
func (e *runtimeEnv) joinCluster(ctx context.Context, role string) (*join.Response, []byte, bool) {
	server := strings.TrimRight(e.s.Server, "/")
	if e.s.Token == "" && e.s.TokenFile != "" {
		if b, err := os.ReadFile(e.opts.Root.Path(e.s.TokenFile)); err == nil {
			e.s.Token = strings.TrimSpace(string(b))
		}
	}
	if e.s.Token == "" {
		e.log.Fatalf("Error: --token is required")
		return nil, nil, false
	}
	tok, err := pki.ParseToken(e.s.Token)
	if err != nil {
		e.log.Fatalf("Error: failed to parse token: %v", err)
		return nil, nil, false
	}
	req := join.Request{Role: role, NodeName: e.nodeName}
	if role == "server" {
		req.Critical = e.s.Critical()
	}
	for {
		ca, err := join.FetchCA(ctx, server, tok)
		var resp *join.Response
		if err == nil {
			resp, err = join.Join(ctx, server, ca, tok, req)
		}
		var hm *join.HashMismatchError
		var mm *join.MismatchError
		switch {
		case err == nil:
			return resp, ca, true
		case ctx.Err() != nil:
			return nil, nil, false
		case errors.As(err, &hm):
			e.log.Fatalf("Failed to validate connection to cluster at %s: %v (wrong token: it belongs to another cluster)", server, err)
			return nil, nil, false
		case errors.Is(err, join.ErrUnauthorized):
			e.log.Fatalf("Failed to validate connection to cluster at %s: %v (wrong token)", server, err)
			return nil, nil, false
		case errors.As(err, &mm):
			e.log.Fatalf("Error: failed to validate server configuration: %v", err)
			return nil, nil, false
		}
		e.log.Errorf("Failed to validate connection to cluster at %s: %v", server, err)
		if e.clock.Sleep(ctx, 2) != nil {
			return nil, nil, false
		}
	}
}

func runAgent(parent context.Context, opts Options, args []string) int {
	e, ok := prepare(opts, flags.Agent, args)
	if !ok {
		return exitFatal
	}
	if e.s.Server == "" {
		e.log.Fatalf("Error: --server is required")
		return exitFatal
	}
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	resp, ca, ok := e.joinCluster(ctx, "agent")
	if !ok {
		if parent.Err() != nil {
			return exitOK
		}
		return exitFatal
	}
	_ = pki.WriteFileAtomic(filepath.Join(e.dataDir, "agent", "server-ca.crt"), ca, 0o644)
	_ = pki.WriteFileAtomic(filepath.Join(e.dataDir, "agent", "client-kubelet.crt"), resp.ClientCert, 0o644)
	_ = pki.WriteFileAtomic(filepath.Join(e.dataDir, "agent", "client-kubelet.key"), resp.ClientKey, 0o600)
	api, err := nodeagent.NewRemote(e.s.Server, ca, resp.ClientCert, resp.ClientKey)
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	c := resp.Cluster
	cloudExternal := kubeletCloudExternal(e.s, c.DisableCloudController)
	taints, err := e.registrationTaints(cloudExternal)
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	wg.Add(2)
	go func() { defer wg.Done(); e.logImages(ctx) }()
	go func() {
		defer wg.Done()
		e.logAt(ctx, tAgentKubelet, func() { e.log.Infof("%s", kubeletLine(e.s, e.nodeName, e.nodeIP, cloudExternal)) })
	}()
	err = nodeagent.Run(ctx, e.nodeConfig(api, tAgentRegister, taints, cloudExternal, false, false,
		c, "127.0.0.1:6444", func() { e.opts.Notify("READY=1") }))
	if err == nil {
		return exitOK
	}
	return e.finish(err)
}
