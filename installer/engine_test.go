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
}

func (f fakeStep) Phase() events.Phase { return f.phase }
func (f fakeStep) Summary() string     { return "test step " + string(f.phase) }
func (f fakeStep) Run(context.Context, *session) error {
	*f.ran = append(*f.ran, f.phase)
	if f.cancel != nil {
		f.cancel()
	}
	return nil
}

// TestCancelledAtEveryStep: a Ctrl-C handled while any step runs — the first, one in the
// middle, the last — ends the run as cancelled (KindCancelled: exit 130) naming that step, and
// no later step starts; even when the step itself ignored the cancellation and returned nil
// (kubeconfig, cni and rancher take milliseconds and may have nothing to stop). Without a
// Ctrl-C every step runs and the run succeeds.
func TestCancelledAtEveryStep(t *testing.T) {
	c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{{Name: "cp1", Address: "192.0.2.1", Role: inventory.RoleServer}}}}
	phases := []events.Phase{events.PhaseBringUp, events.PhaseKubeconfig, events.PhaseReconcileNodes, events.PhaseCNI, events.PhaseRancher}
	for at := -1; at < len(phases); at++ {
		name := "no Ctrl-C"
		if at >= 0 {
			name = "Ctrl-C during " + string(phases[at])
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var ran []events.Phase
			steps := make([]step, len(phases))
			for i, p := range phases {
				f := fakeStep{phase: p, ran: &ran}
				if i == at {
					f.cancel = func() { cancel(errors.New("interrupt signal received")) }
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
			var f *Failure
			if !errors.As(err, &f) || f.Kind != KindCancelled || f.Phase != phases[at] {
				t.Fatalf("err %v (%+v), want a cancellation during %s", err, f, phases[at])
			}
			if len(ran) != at+1 {
				t.Errorf("ran %v: a step started after the Ctrl-C", ran)
			}
			if want := fmt.Sprintf("during step %s", phases[at]); !strings.Contains(f.Info.Message, want) || !strings.Contains(f.Info.Message, "interrupt signal received") {
				t.Errorf("message %q, want %q and the cause", f.Info.Message, want)
			}
		})
	}
}
