// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command k3strap bootstraps K3s clusters — and Rancher on them — over SSH from one inventory
// file: `k3strap apply -f cluster.yaml`.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	// A soft heap limit keeps runs against hundreds of hosts within a workstation's means (the
	// GC works harder near it; docs/development.md "Benchmarks"); GOMEMLIMIT overrides it.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(64 << 20)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
