// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gen writes the inventory's JSON Schema (schema/cluster.schema.json) from the Go types
// of package inventory, or with -kind Fleet the fleet file's (schema/fleet.schema.json) from
// package fleet's; `go generate ./schema/` runs it. Usage: gen [-kind Cluster|Fleet] -src DIR
// [-fleet-src DIR] -o FILE.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/k3strap/k3strap/schema/internal/generator"
)

func main() {
	kind := flag.String("kind", "Cluster", "the document kind: Cluster (an inventory) or Fleet")
	src := flag.String("src", "../inventory", "source directory of package inventory")
	fleetSrc := flag.String("fleet-src", "../fleet", "source directory of package fleet (-kind Fleet)")
	out := flag.String("o", "cluster.schema.json", "file to write")
	flag.Parse()
	var b []byte
	var err error
	switch *kind {
	case "Cluster":
		b, err = generator.Generate(*src)
	case "Fleet":
		b, err = generator.GenerateFleet(*src, *fleetSrc)
	default:
		err = fmt.Errorf("-kind %q: Cluster or Fleet", *kind)
	}
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
