// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPathRunCounters: the counters that end a round (answered, allReceived) agree, after
// every line, with a scan of every probe — for lines in any order, repeated, and for ids
// tracked after their first line arrived.
func TestPathRunCounters(t *testing.T) {
	// The scan the counters replace (the round's end was judged by it on every line).
	scan := func(r *pathRun) (unanswered, unreceived int) {
		for id, k := range r.kinds {
			switch k {
			case "tcp":
				if _, ok := r.tcpRes[id]; !ok {
					unanswered++
				}
			case "udp", "mtu":
				if len(r.got[id]) == 0 {
					unanswered++
				}
				if s, ok := r.sendRes[id]; ok && s.state == "sent" && len(r.got[id]) == 0 {
					unreceived++
				}
			}
		}
		return
	}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		r := &pathRun{runs: []*hostRun{{h: ProbeHost{Name: "h"}}}, rep: &PathReport{Hosts: map[string]string{}},
			tcpRes: map[string]probeLine{}, sendRes: map[string]probeLine{}, got: map[string][]probeLine{},
			lstate: map[string]ListenerState{}, kinds: map[string]string{}}
		kinds := []string{"tcp", "udp", "mtu"}
		states := []string{"sent", "ok", "emsgsize", "fail"}
		for step := 0; step < 400; step++ {
			id := fmt.Sprintf("p%d", rng.IntN(40))
			switch rng.IntN(4) {
			case 0:
				if _, ok := r.kinds[id]; !ok {
					r.track(id, kinds[rng.IntN(3)])
				}
			case 1:
				r.handle(event{line: probeLine{kind: "tcp", id: id, state: "ok"}})
			case 2:
				r.handle(event{line: probeLine{kind: kinds[1+rng.IntN(2)], id: id, state: states[rng.IntN(len(states))]}})
			case 3:
				r.handle(event{line: probeLine{kind: "got", id: id}})
			}
			a, b := scan(r)
			if a != r.unanswered || b != r.unreceived {
				t.Fatalf("seed %d step %d: counters unanswered %d unreceived %d, a scan says %d and %d", seed, step, r.unanswered, r.unreceived, a, b)
			}
			if r.answered() != (a == 0) || r.allReceived() != (b == 0) {
				t.Fatalf("seed %d step %d: answered/allReceived disagree with the scan", seed, step)
			}
		}
	}
}
