// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firstboot

import (
	"fmt"
	"strings"
	"sync"

	"github.com/k3strap/k3strap/events"
)

// Collector passes every event on to Next and keeps what the status file needs: the first
// error event (its step, message and fix), preflight's error findings, whether anything
// changed, and the summary.
type Collector struct {
	Next events.Sink

	mu       sync.Mutex
	failure  *events.Event
	findings []events.PreflightResult
	changed  bool
	summary  *events.SummaryInfo
}

// Emit implements events.Sink.
func (c *Collector) Emit(e events.Event) {
	c.mu.Lock()
	switch {
	case e.Type == events.Error && e.Error != nil && c.failure == nil:
		ev := e
		c.failure = &ev
	case e.Finding != nil && e.Finding.Severity == "error":
		c.findings = append(c.findings, *e.Finding)
	case e.Summary != nil:
		s := *e.Summary
		c.summary = &s
		for _, h := range s.Hosts {
			if h.Status == events.StatusChanged {
				c.changed = true
			}
		}
	}
	c.mu.Unlock()
	if c.Next != nil {
		c.Next.Emit(e)
	}
}

// Fill completes st from what was collected: Changed, and for a failed run Step, Message and
// Fix — preflight's error findings first (each check's message and fix: what a technician
// acts on), else the run's first error.
func (c *Collector) Fill(st *Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.Changed = c.changed
	if st.State != StateFailed {
		return
	}
	if len(c.findings) > 0 {
		var msgs, fixes []string
		for _, f := range c.findings {
			msgs = append(msgs, fmt.Sprintf("%s: %s", f.Check, f.Message))
			if f.Fix != "" {
				fixes = append(fixes, fmt.Sprintf("%s: %s", f.Check, f.Fix))
			}
		}
		st.Step = string(events.PhasePreflight)
		st.Message = strings.Join(msgs, "; ")
		st.Fix = strings.Join(fixes, "; ")
		return
	}
	if f := c.failure; f != nil {
		st.Step = string(f.Phase)
		if f.Step != "" {
			st.Step += "/" + f.Step
		}
		st.Message = f.Error.Message
		st.Fix = f.Error.Fix
		if st.Fix == "" {
			st.Fix = f.Error.Resume
		}
	}
}
