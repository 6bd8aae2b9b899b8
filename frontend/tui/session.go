// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"context"
	"errors"
	"io"
	"sync"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/k3strap/k3strap/events"
)

// Terminal is where a program runs: the keyboard and the screen.
type Terminal struct {
	In  io.Reader
	Out io.Writer
	// Width and Height are the initial size in cells; 0 lets bubbletea ask the terminal.
	Width, Height int
	// Profile is the colour profile (see Profile); nil lets bubbletea detect it.
	Profile *colorprofile.Profile
	// Environ is the environment bubbletea consults (TERM, ...); nil means os.Environ().
	Environ []string
}

func (t Terminal) options() []tea.ProgramOption {
	opts := []tea.ProgramOption{tea.WithInput(t.In), tea.WithOutput(t.Out), tea.WithoutSignalHandler()}
	if t.Width > 0 && t.Height > 0 {
		opts = append(opts, tea.WithWindowSize(t.Width, t.Height))
	}
	if t.Profile != nil {
		opts = append(opts, tea.WithColorProfile(*t.Profile))
	}
	if t.Environ != nil {
		opts = append(opts, tea.WithEnvironment(t.Environ))
	}
	return opts
}

// eventBuffer is how many events may wait for the dashboard before Emit blocks (back-pressure
// on the installer rather than unbounded memory).
const eventBuffer = 1024

// Session is a dashboard running on a terminal while a run emits into it. It is an
// events.Sink, safe for concurrent use. Start it, give it to the run as its sink, and call
// Finish when the run has returned.
type Session struct {
	ch   chan events.Event
	prog *tea.Program
	// dash is the dashboard of a cluster's run (Start), nil for a fleet's (StartFleet).
	dash *Dashboard
	// fallback receives the events the program could not show (DashboardOptions.Fallback).
	fallback events.Sink

	mu     sync.Mutex
	closed bool
	err    error

	exited  chan struct{}
	progErr error
}

// Start runs a dashboard on term in a goroutine. opts.Cancel is what q/ctrl+c call.
func Start(term Terminal, opts DashboardOptions) *Session {
	s := newSession(opts.Fallback)
	s.dash = NewDashboard(opts, s.ch, s.result)
	s.run(term, s.dash)
	return s
}

func newSession(fallback events.Sink) *Session {
	return &Session{ch: make(chan events.Event, eventBuffer), exited: make(chan struct{}), fallback: fallback}
}

// run runs model on term in a goroutine.
func (s *Session) run(term Terminal, model tea.Model) {
	s.prog = tea.NewProgram(model, term.options()...)
	go func() {
		defer close(s.exited)
		_, s.progErr = s.prog.Run()
	}()
}

// Emit queues e for the dashboard. Events emitted after Finish are dropped; events the
// dashboard cannot show because its program ended early go to DashboardOptions.Fallback.
func (s *Session) Emit(e events.Event) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	// Sending under the lock keeps Finish from closing the channel mid-send; the dashboard
	// drains it without taking the lock.
	defer s.mu.Unlock()
	select {
	case s.ch <- e:
	case <-s.exited:
		if s.fallback != nil {
			s.fallback.Emit(e)
		}
	}
}

func (s *Session) result() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Finish tells the dashboard that the run returned with err (nil for success), waits until it
// has drawn its final frame and given the terminal back, and returns the program's own error
// (nil normally). Safe to call more than once.
func (s *Session) Finish(err error) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.err = err
		close(s.ch)
	}
	s.mu.Unlock()
	<-s.exited
	if errors.Is(s.progErr, tea.ErrProgramKilled) {
		return nil
	}
	return s.progErr
}

// Dashboard returns the session's cluster dashboard (for inspection after Finish); nil for a
// fleet's.
func (s *Session) Dashboard() *Dashboard { return s.dash }

// Run shows a dashboard on term while run runs in a goroutine: run gets a context that q or
// ctrl+c cancel (derived from ctx) and a sink feeding the dashboard. Run returns run's error
// once the dashboard has drawn the final frame and released the terminal. If the dashboard
// cannot run, the run is cancelled and its error returned together with the dashboard's.
func Run(ctx context.Context, term Terminal, opts DashboardOptions, run func(ctx context.Context, sink events.Sink) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	user := opts.Cancel
	opts.Cancel = func() {
		cancel()
		if user != nil {
			user()
		}
	}
	s := Start(term, opts)
	done := make(chan error, 1)
	go func() { done <- run(ctx, s) }()
	var err error
	select {
	case err = <-done:
	case <-s.exited:
		// The program died (terminal gone): stop the run and wait for it.
		cancel()
		err = <-done
	}
	if perr := s.Finish(err); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}
