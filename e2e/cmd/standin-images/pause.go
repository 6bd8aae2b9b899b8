// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// pauseMain plays the pause container, the process holding a pod's namespaces (Kubernetes
// build/pause/linux/pause.c): it sleeps until SIGINT or SIGTERM and then exits 0, and as PID 1
// of a pod sharing its PID namespace it reaps the orphans the containers leave. `-v` prints a
// version line, as the real one does.
func pauseMain(args []string) int {
	if len(args) == 1 && args[0] == "-v" {
		fmt.Println("pause.c k3strap test stand-in (not the Kubernetes pause)")
		return 0
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", s)
			return 0
		}
		reap()
	}
	return 0
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
