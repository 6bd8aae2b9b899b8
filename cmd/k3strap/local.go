// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/k3strap/k3strap/inventory"
)

// localMode applies --local (docs/edge-first-boot.md "Local mode", k3sup's --local, k0sctl's
// localhost): the host --host names (exactly one), else the inventory host named as this
// machine (os.Hostname), gets connection: local, and the run works on it alone. A command that
// needs the first server (the token, the API, the lock) still reaches it over SSH when this
// host is not the first server; one machine can only be one host, so a run never covers
// several hosts in local mode. It returns the hosts the run selects (rf.hosts without --local).
func (a *app) localMode(c *inventory.Cluster, rf *runFlags) ([]string, error) {
	if !rf.local {
		return rf.hosts, nil
	}
	name := ""
	switch len(rf.hosts) {
	case 0:
		hn, err := os.Hostname()
		if err != nil {
			return nil, usageError{fmt.Errorf("--local: this machine's host name: %v — fix: say which host it is with --host NAME", err)}
		}
		hn, _, _ = strings.Cut(hn, ".")
		if c.Host(hn) == nil {
			return nil, usageError{fmt.Errorf("--local: this machine is %q, which is no host of %s — fix: say which host it is with --host NAME", hn, c.Source)}
		}
		name = hn
	case 1:
		name = rf.hosts[0]
		if c.Host(name) == nil {
			return nil, usageError{fmt.Errorf("--local --host %s: no such host in %s", name, c.Source)}
		}
	default:
		return nil, usageError{errors.New("--local runs on one host, the machine k3strap runs on; --host names several — fix: give one --host (run k3strap on each box, or over SSH from one workstation without --local)")}
	}
	if l := c.LocalHost(); l != nil && l.Name != name {
		return nil, usageError{fmt.Errorf("--local --host %s: the inventory already has host %s with connection: local; one run has one local host — fix: drop --local, or the connection: local of %s", name, l.Name, l.Name)}
	}
	c.Host(name).Connection = inventory.ConnectionLocal
	if first := c.FirstServer(); first != nil && first.Name != name && a.command != "doctor" {
		fmt.Fprintf(a.stderr, "local mode: %s runs here; the first server %s is reached over SSH where the command needs it\n", name, first.Name)
	}
	return []string{name}, nil
}
