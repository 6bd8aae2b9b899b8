// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// applySteps returns apply's step names in order, as `k3strap steps apply` lists them.
func applySteps(t *testing.T, c *testCluster) []string {
	t.Helper()
	out, err := exec.Command(c.bin.k3strap, "steps", "apply").Output()
	if err != nil {
		t.Fatalf("k3strap steps apply: %v", err)
	}
	var steps []string
	for _, m := range regexp.MustCompile(`(?m)^\s+\d+\.\s+\*?\s*(\S+)`).FindAllStringSubmatch(string(out), -1) {
		steps = append(steps, m[1])
	}
	if len(steps) < 10 {
		t.Fatalf("k3strap steps apply listed %d steps:\n%s", len(steps), out)
	}
	return steps
}

// TestInterruptEveryApplyStep (simulator): Ctrl-C as each step of `apply` starts (`k3strap
// steps apply` lists them; --verbose shows each start), on 1 server + 1 agent reset to the base
// image each time: the run exits 130 within 5 s — or 0 when the steps left after the signal's
// step were all done before it was handled (kubeconfig and after: each takes milliseconds
// here; the run's summary emitted no later than 100 ms after the signal was sent) —,
// and a plain re-run with --timeout 10m converges (exit 0, every node Ready: the joins wait for
// it) without waiting out any timeout (within 2 min). docs/failure-modes.md "Faults during a run": a re-run after an interruption
// during supervise waited out --timeout for a server that was up.
func TestInterruptEveryApplyStep(t *testing.T) {
	c := newCluster(t, 2)
	c.writeInventory(serverAndAgent, nil)
	steps := applySteps(t, c)
	quick := false // kubeconfig and the steps after it
	for _, step := range steps {
		quick = quick || step == "kubeconfig"
		t.Run(step, func(t *testing.T) {
			c.resetSimHosts(t)
			a := c.start(4*time.Minute, "apply", "--timeout", "10m", "--verbose")
			a.waitFor(t, 3*time.Minute, "step "+step+" starting", func(e events.Event) bool {
				return e.Type == events.Debug && e.Message == "step "+step+" starts"
			})
			if err := a.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			r := a.wait(t)
			defer r.dump(t)
			took := time.Since(sent)
			// Exit 0 only when the run had finished before the signal could be handled: the
			// last step done, the summary emitted (docs/failure-modes.md "Faults during a run").
			finishedFirst := false
			if sums := r.ofType(events.Summary); r.code == 0 && quick && len(sums) > 0 {
				finishedFirst = !sums[len(sums)-1].Time.After(sent.Add(100 * time.Millisecond))
			}
			if (r.code != 130 && !finishedFirst) || took > 5*time.Second {
				t.Fatalf("Ctrl-C at %s: exit %d after %s, want 130 within 5 s", step, r.code, took)
			}
			if finishedFirst {
				t.Logf("Ctrl-C at %s: exit 0 accepted: the run's summary came %s after the signal was sent (the run had finished)",
					step, r.ofType(events.Summary)[0].Time.Sub(sent).Round(time.Millisecond))
			}
			re := c.k3strap(4*time.Minute, "apply", "--timeout", "10m")
			defer re.dump(t)
			t.Logf("Ctrl-C at %s: exit %d in %s; re-run exit %d in %s", step, r.code, took.Round(time.Millisecond), re.code, re.duration.Round(time.Millisecond))
			if re.code != 0 || re.duration > 2*time.Minute {
				t.Fatalf("re-run after Ctrl-C at %s: exit %d after %s, want 0 within 2 min", step, re.code, re.duration)
			}
		})
	}
}

// resetSimHosts wipes every host back to the base image with the simulator's time scale, as a
// new simulator cluster gets.
func (c *testCluster) resetSimHosts(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(c.hosts))
	for i, h := range c.hosts {
		wg.Go(func() {
			if errs[i] = c.h.Reset(ctx, h.Index); errs[i] == nil {
				errs[i] = c.h.WriteFile(ctx, h.Index, "/etc/k3ssim/sim.yaml", fmt.Appendf(nil, "timeScale: %v\n", SimTimeScale), 0o644)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("resetting %s: %v", c.hosts[i].Name, err)
		}
	}
}
