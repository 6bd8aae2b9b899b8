// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command k3s is the k3strap K3s SIMULATOR — not K3s. It is built into a static binary that
// the end-to-end tests install on throw-away hosts exactly like an airgap K3s binary
// (/usr/local/bin/k3s, started by k3s.service / k3s-agent.service) and that behaves like
// K3s v1.36.3 where k3strap looks: config merge, log lines, token/CA/kubeconfig files, the
// Kubernetes API with simulated nodes and pods, and the bring-up timeline including failure
// mode F1 (see e2e/k3ssim/README.md).
//
// Build: CGO_ENABLED=0 go build -ldflags "-X main.version=v1.36.3+k3s1" -o k3s ./e2e/k3ssim
//
// K3SSIM_ROOT (tests only) prefixes every absolute path the simulator reads or writes
// (/etc/rancher, /var/lib/rancher, /run/flannel, /etc/k3ssim, /etc/os-release).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/app"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// version is the simulated K3s version, set with -ldflags "-X main.version=...".
var version = "v1.36.3+k3s1"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, app.Options{
		Args:    os.Args,
		Getenv:  os.Getenv,
		Environ: os.Environ(),
		Root:    paths.Root(os.Getenv("K3SSIM_ROOT")),
		Stdin:   os.Stdin,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Version: version,
	})
	stop()
	os.Exit(code)
}
