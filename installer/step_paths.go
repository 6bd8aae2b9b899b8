// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/netcheck"
	"github.com/k3strap/k3strap/preflight"
)

// pathsStep is the path check (docs/preflight.md "The path check"): between the hosts, before
// anything is installed, every node's paths to every other on the ports K3s will need
// (netcheck.PlanProbes over preflight.NetCluster) are tested with short-lived listeners and
// connects or datagrams, all hosts at once, one SSH command each; the overlay port is also
// probed with full-size don't-fragment datagrams. It never fails: what it finds are findings.
//
// Reads: hostState.facts (addresses, routes, probe interpreters, held ports), plan, client;
// the inventory. Writes: s.pre.paths (preflight's NodePaths and PathMTU judge it).
type pathsStep struct{}

func (pathsStep) Phase() events.Phase { return events.PhasePaths }

func (pathsStep) Summary() string {
	return "test the paths between the hosts on K3s's ports and the path MTU: short-lived listeners, connects and datagrams, all hosts at once"
}

// pathConnectTimeout bounds each TCP connect of the path check: a filtered port costs this
// once, whatever the number of hosts (all probes run at once). 3.2 s lets the kernel send the
// SYN twice more (Linux's initial retransmission timeout is 1 s, doubling: RFC 6298), so a
// lossy link that K3s itself would get through is not reported as blocked (docs/preflight.md
// "The path check").
const pathConnectTimeout = 3200 * time.Millisecond

func (pathsStep) Run(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhasePaths)
	input := s.preflightInput()
	nc := preflight.NetCluster(input)
	if len(nc.Nodes) < 2 {
		em.Started("path check")
		if len(s.hosts) > 1 {
			em.Finished(events.StatusSkipped, fmt.Sprintf("%d of %d hosts reachable: no paths between hosts to test", len(nc.Nodes), len(s.hosts)))
		} else {
			em.Finished(events.StatusOK, "one host: no paths between hosts to test")
		}
		return ctx.Err()
	}
	probes := netcheck.PlanProbes(nc)
	em.Started(fmt.Sprintf("testing %d paths between %d hosts", len(probes), len(nc.Nodes)))
	var hosts []netcheck.ProbeHost
	for _, n := range nc.Nodes {
		hs := s.state(n.Name)
		ph := netcheck.ProbeHost{Name: n.Name}
		switch {
		case hs == nil || hs.c() == nil || hs.connErr != nil:
			ph.Skip = "not reachable over SSH"
		case n.Net != nil && len(n.Net.ProbeTools) == 0:
			ph.Skip = "neither perl nor python3 is installed (the path check runs with either)"
		default:
			if n.Net != nil {
				ph.Tool = n.Net.ProbeTools[0]
			}
			ph.Exec = probeExec(hs.c())
		}
		hosts = append(hosts, ph)
	}
	rep := netcheck.RunPaths(ctx, nc, hosts, netcheck.PathOptions{ConnectTimeout: pathConnectTimeout})
	s.pre.paths = rep
	failed := rep.Failed()
	for _, line := range pathMatrix(nc, rep) {
		em.Step(line.host, "paths", line.status, line.text)
	}
	status, msg := events.StatusOK, fmt.Sprintf("%d paths ok in %.1f s", len(rep.Results), rep.Elapsed.Seconds())
	if len(failed) > 0 || len(rep.Hosts) > 0 {
		status = events.StatusFailed
		msg = fmt.Sprintf("%d of %d paths failed, %d hosts not tested, in %.1f s (preflight's NodePaths and PathMTU say more)", len(failed), len(rep.Results), len(rep.Hosts), rep.Elapsed.Seconds())
	}
	em.Finished(status, msg)
	return ctx.Err()
}

// probeExec runs the path check's commands on c as root (netcheck.ProbeHost.Exec), labelled
// "path check (STEP)": the output of one that exits non-zero is still returned, with an error
// naming the exit and the first line of its standard error.
func probeExec(c remote.Host) func(ctx context.Context, step, script string, stdin io.Reader, args ...string) (string, error) {
	return func(ctx context.Context, step, script string, stdin io.Reader, args ...string) (string, error) {
		cmd := remote.Script("path check ("+step+")", script, args...).AsRoot()
		if stdin != nil {
			cmd = cmd.WithStdin(stdin)
		}
		res, err := c.Run(ctx, cmd)
		if err != nil {
			return "", err
		}
		if !res.OK() {
			msg, _, _ := strings.Cut(strings.TrimSpace(string(res.Stderr)), "\n")
			return string(res.Stdout), fmt.Errorf("exit %d %s", res.ExitCode, msg)
		}
		return string(res.Stdout), nil
	}
}

type matrixLine struct {
	host   string
	status events.Status
	text   string
}

// pathMatrix is the path check's outcome per source host: one line each, listing the targets
// and ports that failed (the matrix of what fails, row by row), or that all paths are open.
func pathMatrix(nc *netcheck.Cluster, rep *netcheck.PathReport) []matrixLine {
	rows := map[string][]string{}
	ok := map[string]int{}
	for _, r := range rep.Results {
		switch r.Status {
		case netcheck.PathFailed:
			rows[r.From] = append(rows[r.From], fmt.Sprintf("%s %s/%d (%s)", r.To, r.Port.Proto, r.Port.Port, r.Port.Purpose))
		case netcheck.PathOK, netcheck.PathOpen:
			ok[r.From]++
		}
	}
	var out []matrixLine
	for _, n := range nc.Nodes {
		if why := rep.Hosts[n.Name]; why != "" {
			out = append(out, matrixLine{n.Name, events.StatusFailed, "not tested: " + why})
			continue
		}
		fails := rows[n.Name]
		sort.Strings(fails)
		if len(fails) == 0 {
			out = append(out, matrixLine{n.Name, events.StatusOK, fmt.Sprintf("%d paths to the other hosts ok", ok[n.Name])})
			continue
		}
		out = append(out, matrixLine{n.Name, events.StatusFailed, "cannot reach " + strings.Join(fails, ", ")})
	}
	for _, m := range rep.MTU {
		if !m.Fits() {
			t := fmt.Sprintf("%d-byte packets to %s (UDP %d) lost", m.IfaceMTU, m.To, m.Port)
			if m.Largest > 0 {
				t += fmt.Sprintf("; %d bytes get through", m.Largest)
			}
			out = append(out, matrixLine{m.From, events.StatusFailed, "path MTU: " + t})
		}
	}
	return out
}
