package installer

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/events"
)

// superviseStep starts following the first server's bring-up from the (re)start the
// first-server step made (service active, API ready, node registered, uninitialized taint
// gone, PodCIDR, subnet.env, Ready), diagnosing a stall (F1, crash loop, timeout) with
// evidence. It returns as soon as other nodes may join — the API answers, the node exists and
// its uninitialized taint is gone — and the supervisor keeps watching in the background: the
// bring-up step waits for the rest. A diagnosed failure at any time stops the whole run with
// the diagnosis (joins in flight are cancelled; hosts not started yet stay uploaded only).
// When the first server's K3s version changes (upgrade), it waits for the whole bring-up
// instead: servers are upgraded strictly one at a time.
type superviseStep struct{}

func (superviseStep) Phase() events.Phase { return events.PhaseSupervise }

func (superviseStep) Summary() string {
	return "watch the first server come up; continue once the API answers and its uninitialized taint is gone (F1 gate)"
}

func (superviseStep) Run(ctx context.Context, s *session) error {
	hs := s.first
	bu := &bringUp{gate: make(chan struct{}), done: make(chan struct{})}
	s.bringUp = bu
	sup := &supervisor{s: s, hs: hs, em: s.in.emitter(events.PhaseSupervise), gate: bu.gate}
	res := s.firstResult
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer close(bu.done)
		bu.err = sup.run(ctx, res)
		if bu.err != nil && ctx.Err() == nil {
			hs.setResult(events.StatusFailed, "bring-up: "+firstLine(bu.err))
			s.abort(bu.err)
		}
	}()
	if s.upgrading(hs) {
		// An upgrade is one server at a time: the first is Ready on the new version and
		// uncordoned before any other server or agent is touched.
		return s.firstUp(ctx)
	}
	select {
	case <-bu.gate:
		return nil
	case <-bu.done:
		return s.firstUp(ctx)
	}
}

// Preview says what would be watched.
func (superviseStep) Preview(ctx context.Context, s *session) error {
	s.in.emitter(events.PhaseSupervise).Info(s.first.host.Name, fmt.Sprintf("would watch %s come up (stall grace %s, timeout %s)", s.first.host.Name, s.in.opts.StallGrace, s.in.opts.Timeout))
	return ctx.Err()
}

// bringUp is the first server's supervisor running in the background.
type bringUp struct {
	// gate is closed when other nodes may join; done when the supervisor finished, with err.
	gate, done chan struct{}
	err        error
	// finished says firstUp completed the first server's result (read and written by the
	// steps' goroutine only).
	finished bool
}
