// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"
)

// renderer is a model that renders its frame as text.
type renderer interface {
	tea.Model
	Render() string
}

// probe wraps a model under test so that the test can read its current frame from inside the
// program's event loop (no data race, and independent of how the renderer diffs its output).
type probe struct {
	renderer
	frames chan string
}

type snapMsg struct{}

func (p *probe) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if _, ok := msg.(snapMsg); ok {
		p.frames <- ansi.Strip(p.Render())
		return p, nil
	}
	_, cmd := p.renderer.Update(msg)
	return p, cmd
}

// newProbe starts m under teatest at w×h.
func newProbe(t *testing.T, m renderer, w, h int, opts ...teatest.TestOption) (*teatest.TestModel, *probe) {
	p := &probe{renderer: m, frames: make(chan string)}
	opts = append([]teatest.TestOption{teatest.WithInitialTermSize(w, h)}, opts...)
	return teatest.NewTestModel(t, p, opts...), p
}

// waitScreen waits until the model's frame contains s, and returns the frame.
func waitScreen(t *testing.T, tm *teatest.TestModel, p *probe, s string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var f string
	for time.Now().Before(deadline) {
		tm.Send(snapMsg{})
		select {
		case f = <-p.frames:
		case <-time.After(time.Second):
			continue
		}
		if strings.Contains(f, s) {
			return f
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the screen never showed %q; last frame:\n%s", s, f)
	return ""
}
