// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command standin-images is a TEST STAND-IN, not part of k3strap and not the real components:
// the e2e hosts cannot pull container images, so this one static program is every container
// image a real K3s v1.36.3 cluster needs on them, and it writes those images into a K3s airgap
// images archive. Run under an image's entrypoint name it plays that image:
//
//	pause                    the pod sandbox: sleeps, reaps orphaned children, exits on SIGTERM
//	coredns -conf FILE       DNS for the cluster domain of the Corefile (Services through the
//	                         Kubernetes API, the Corefile's hosts file), /health and /ready
//	metrics-server [flags]   metrics.k8s.io/v1beta1 discovery and empty metrics over TLS
//	local-path-provisioner start --config FILE
//	                         validates the config, then waits (provisions nothing)
//	netprobe [-listen ADDR]  a test workload: HTTP identity, /fetch and /resolve on demand
//
// and as the program itself:
//
//	standin-images archive OUT.tar[.zst]   write the airgap images archive (images.go lists it)
//	standin-images list                    print the image references the archive holds
//
// README.md beside this file says how each stand-in behaves and how tests use netprobe.
package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// applets maps an entrypoint name to its stand-in.
var applets = map[string]func(args []string) int{
	"pause":                  pauseMain,
	"coredns":                corednsMain,
	"metrics-server":         metricsServerMain,
	"local-path-provisioner": localPathMain,
	"netprobe":               netprobeMain,
}

func main() {
	if run, ok := applets[filepath.Base(os.Args[0])]; ok {
		os.Exit(run(os.Args[1:]))
	}
	if len(os.Args) < 2 {
		usage()
	}
	if run, ok := applets[os.Args[1]]; ok {
		os.Exit(run(os.Args[2:]))
	}
	switch os.Args[1] {
	case "archive":
		if len(os.Args) != 3 {
			usage()
		}
		if err := writeArchive(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "standin-images:", err)
			os.Exit(1)
		}
	case "list":
		for _, im := range standinImages {
			fmt.Println(im.Ref)
		}
	default:
		usage()
	}
}

func usage() {
	names := slices.Sorted(maps.Keys(applets))
	fmt.Fprintf(os.Stderr, "usage: standin-images archive OUT.tar[.zst] | list | %s ARGS (k3strap test stand-ins, not the real components)\n",
		strings.Join(names, "|"))
	os.Exit(2)
}
