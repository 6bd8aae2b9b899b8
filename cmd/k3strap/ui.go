// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"

	"golang.org/x/term"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/frontend"
	"github.com/k3strap/k3strap/frontend/tui"
	"github.com/k3strap/k3strap/inventory"
)

// Front-end selection for `--output auto`: the terminal dashboard when k3strap talks
// to a person at a terminal big enough for it, plain lines otherwise.

// terminalSize returns the size of the terminal k3strap runs on, and false when stdin or
// stdout is not a terminal or TERM is dumb (keys could not be read or the screen not drawn).
func (a *app) terminalSize() (width, height int, ok bool) {
	in, okIn := a.stdin.(*os.File)
	out, okOut := a.stdout.(*os.File)
	if !okIn || !okOut || !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) || os.Getenv("TERM") == "dumb" {
		return 0, 0, false
	}
	w, h, err := term.GetSize(int(out.Fd()))
	if err != nil {
		return 0, 0, false
	}
	return w, h, true
}

// useTUI reports whether --output auto shows the dashboard: on a terminal of at least
// tui.MinWidth × tui.MinHeight, unless --quiet asks for less output.
func (a *app) useTUI() bool {
	w, h, ok := a.terminalSize()
	return ok && !a.quiet && w >= tui.MinWidth && h >= tui.MinHeight
}

// autoSink is the front-end of --output auto: the dashboard (useTUI) or plain lines. The
// dashboard's q/ctrl+c cancel the run's context (a.cancel); a closer waits for its final frame
// after the run returned.
func (a *app) autoSink() events.Sink {
	plain := &frontend.Plain{W: a.stdout, Verbose: a.verbose, Quiet: a.quiet, Terminal: isTerminal(a.stdout)}
	if !a.useTUI() {
		return plain
	}
	if a.fleetView != nil {
		return a.fleetView(plain)
	}
	// The dashboard runs only on a terminal: like plain lines there, its summary shows a
	// Rancher bootstrap password this run generated, once.
	opts := tui.DashboardOptions{Verbose: a.verbose, Cancel: a.cancel, Fallback: plain, RevealRancherPassword: true}
	// The command loaded the inventory already (load returns it): it names the rows before the
	// first events arrive.
	// Only what it loaded: `doctor --ssh` reads no file, and must not read the default one.
	if c := a.loaded; c != nil {
		opts.Cluster, opts.Hosts = c.Metadata.Name, dashboardHosts(c)
	}
	profile := tui.DefaultProfile()
	s := tui.Start(tui.Terminal{In: a.stdin, Out: a.stdout, Profile: &profile}, opts)
	a.closers = append(a.closers, func() {
		if err := s.Finish(nil); err != nil {
			fmt.Fprintln(a.stderr, "terminal UI:", err, "(use --output plain)")
		}
	})
	return s
}

// dashboardHosts lists c's hosts for the dashboard's rows, the first server marked.
func dashboardHosts(c *inventory.Cluster) []tui.HostInfo {
	first := c.FirstServer()
	out := make([]tui.HostInfo, 0, len(c.Spec.Hosts))
	for _, h := range c.Spec.Hosts {
		out = append(out, tui.HostInfo{Name: h.Name, Address: h.Address, Role: string(h.Role), First: first != nil && first.Name == h.Name})
	}
	return out
}

// terminal returns the tui.Terminal of this invocation (colours per NO_COLOR and TERM).
func (a *app) terminal() tui.Terminal {
	profile := tui.DefaultProfile()
	return tui.Terminal{In: a.stdin, Out: a.stdout, Profile: &profile}
}
