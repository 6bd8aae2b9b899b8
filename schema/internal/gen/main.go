// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gen writes the inventory's JSON Schema (schema/cluster.schema.json) from the Go types
// of package inventory; `go generate ./schema/` runs it. Usage: gen -src DIR -o FILE.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/k3strap/k3strap/schema/internal/generator"
)

func main() {
	src := flag.String("src", "../inventory", "source directory of package inventory")
	out := flag.String("o", "cluster.schema.json", "file to write")
	flag.Parse()
	b, err := generator.Generate(*src)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
