// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import tea "charm.land/bubbletea/v2"

// The wizard's SSH test of a host: started from the hosts screen, run in the background
// through WizardOptions.Test, its result shown next to the host.

// testState is a host's SSH test: running, or its result.
type testState struct {
	running bool
	res     SSHResult
}

type sshTestMsg struct {
	host string
	res  SSHResult
}

func (w *Wizard) testing() bool {
	for _, t := range w.tests {
		if t.running {
			return true
		}
	}
	return false
}

// test starts the SSH test of host i.
func (w *Wizard) test(i int) tea.Cmd {
	c := w.build()
	h := c.Spec.Hosts[i]
	w.tests[h.Name] = testState{running: true}
	test, ctx := w.opts.Test, w.opts.Context
	run := func() tea.Msg { return sshTestMsg{host: h.Name, res: test(ctx, c, &h)} }
	return tea.Batch(run, w.spin.Tick)
}
