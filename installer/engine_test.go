// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

// fakeStep is a step that records that it ran and may cancel the run's context while it runs
// (a Ctrl-C handled during the step) and still return nil, as a step with nothing left to stop
// does.
type fakeStep struct {
	phase  events.Phase
	ran    *[]events.Phase
	cancel context.CancelFunc
	// background, when set, starts background work (as supervise does) that sees the
	// Ctrl-C only as it is stopped after the last step.
	background bool
}

func (f fakeStep) Phase() events.Phase { return f.phase }
func (f fakeStep) Summary() string     { return "test step " + string(f.phase) }
func (f fakeStep) Run(ctx context.Context, s *session) error {
	*f.ran = append(*f.ran, f.phase)
	if f.background {
		s.background.Add(1)
		go func() {
			defer s.background.Done()
			<-ctx.Done()
			f.cancel()
		}()
		return nil
	}
	if f.cancel != nil {
		f.cancel()
	}
	return nil
}

// TestCancelledAtEveryStep: a Ctrl-C handled while any step runs — the first, one in the
// middle, the last — or while the background work is stopped after the last step ends the run
// as cancelled (KindCancelled: exit 130) naming that step, and no later step starts; even when the step itself ignored the cancellation and returned nil
// (kubeconfig, cni and rancher take milliseconds and may have nothing to stop). Without a
// Ctrl-C every step runs and the run succeeds.
func TestCancelledAtEveryStep(t *testing.T) {
	c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{{Name: "cp1", Address: "192.0.2.1", Role: inventory.RoleServer}}}}
	phases := []events.Phase{events.PhaseBringUp, events.PhaseKubeconfig, events.PhaseReconcileNodes, events.PhaseCNI, events.PhaseRancher}
	// at == len(phases): the Ctrl-C comes while the background work the first step started
	// is being stopped after the last step.
	for at := -1; at <= len(phases); at++ {
		name := "no Ctrl-C"
		switch {
		case at == len(phases):
			name = "Ctrl-C while background work stops"
		case at >= 0:
			name = "Ctrl-C during " + string(phases[at])
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var ran []events.Phase
			steps := make([]step, len(phases))
			for i, p := range phases {
				f := fakeStep{phase: p, ran: &ran}
				if i == at || (i == 0 && at == len(phases)) {
					f.cancel = func() { cancel(errors.New("interrupt signal received")) }
					f.background = at == len(phases)
				}
				steps[i] = f
			}
			s := New(c, Options{}, &events.Recorder{}).newSession(commandFor("apply"))
			defer s.close()
			err := s.finish(ctx, s.runSteps(ctx, steps))
			if at < 0 {
				if err != nil || len(ran) != len(phases) {
					t.Fatalf("ran %v, err %v; want every step and no error", ran, err)
				}
				return
			}
			last := min(at, len(phases)-1)
			var f *Failure
			if !errors.As(err, &f) || f.Kind != KindCancelled || f.Phase != phases[last] {
				t.Fatalf("err %v (%+v), want a cancellation during %s", err, f, phases[last])
			}
			if len(ran) != last+1 {
				t.Errorf("ran %v: a step started after the Ctrl-C", ran)
			}
			if want := fmt.Sprintf("during step %s", phases[last]); !strings.Contains(f.Info.Message, want) || !strings.Contains(f.Info.Message, "interrupt signal received") {
				t.Errorf("message %q, want %q and the cause", f.Info.Message, want)
			}
		})
	}
}
