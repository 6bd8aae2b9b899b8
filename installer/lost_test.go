// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/frontend"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/internal/sshtest"
	"github.com/k3strap/k3strap/inventory"
)

// lostKeepalive is the keepalive period of the tests' connections: a stalled link is found
// dead after remote.DefaultKeepaliveMax of them unanswered.
const lostKeepalive = 100 * time.Millisecond

// dialTest connects to srv as root for host hs, keepalives every keepalive, and gives hs that
// connection.
func dialTest(t *testing.T, srv *sshtest.Server, hs *hostState, keepalive time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := remote.Dial(ctx, remote.Config{Host: hs.host.Name, Address: "127.0.0.1", Port: srv.Port, User: "root",
		KeyPath: srv.KeyPath, InsecureIgnoreHostKey: true, ConnectTimeout: 2 * time.Second, KeepaliveInterval: keepalive})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	hs.setClient(c)
}

// hang is an sshtest.Exec whose command never ends on its own (a probe or a watch that has
// nothing to say yet).
func hang(_ string, _ io.Reader, _, _ io.Writer, done <-chan struct{}) int {
	<-done
	return 0
}

// The first server's host loses its link while the supervisor watches it come up (its probe
// streaming, nothing to say yet): the supervisor ends within seconds — keepalives unanswered —
// naming the host unreachable, not at the bring-up timeout (an hour here) or the quiet-probe
// deadline (a minute here).
//
// Both ways a host is lost: its link goes silent (power loss behind a switch: keepalives
// unanswered), or its connection ends (the host's network went away with it: the probe's
// channel and the next ones fail with EOF — this used to be "the probe ended … 3 times in a
// row (is cp1 overloaded?)").
func TestSupervisorEndsWhenTheFirstServerIsLost(t *testing.T) {
	for _, c := range []struct {
		name, want string
		lose       func(*sshtest.Server)
		keepalive  time.Duration
	}{
		{"silent", "keepalives in a row unanswered", (*sshtest.Server).Stall, lostKeepalive},
		// No keepalive is due: the end of the connection alone must say it.
		{"dropped", "the connection was closed by the host or the network", (*sshtest.Server).Drop, time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := sshtest.New(t, hang)
			sup, _ := testSupervisor(time.Now())
			dialTest(t, srv, sup.hs, c.keepalive)
			sup.quietAfter = time.Minute
			sup.s.in.opts.PollInterval = time.Second
			time.AfterFunc(300*time.Millisecond, func() { c.lose(srv) })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err := sup.run(ctx, convergeResult{started: time.Now()})
			took := time.Since(start)
			t.Logf("%s: %v", took.Round(time.Millisecond), err)
			if err == nil || KindOf(err) != KindBringUp || !strings.Contains(err.Error(), "cp1 has been unreachable since") ||
				!strings.Contains(err.Error(), c.want) {
				t.Fatalf("want a bring-up failure naming cp1 unreachable (%s), got %v", c.want, err)
			}
			if took > 5*time.Second {
				t.Errorf("the lost first server was noticed after %s, want within 5 s (keepalive %s × %d)", took, lostKeepalive, remote.DefaultKeepaliveMax)
			}
		})
	}
}

// An agent's host loses its link while the run waits for its node (the first server answers:
// not registered yet): the wait ends within seconds naming the host unreachable and what its
// node lacked, not at the join timeout.
func TestWaitNodeEndsWhenTheHostIsLost(t *testing.T) {
	first := sshtest.New(t, func(cmd string, _ io.Reader, stdout, _ io.Writer, done <-chan struct{}) int {
		if strings.Contains(cmd, "--watch") {
			<-done
			return 0
		}
		_, _ = io.WriteString(stdout, `{"apiVersion":"v1","kind":"List","items":[]}`)
		return 0
	})
	agent := sshtest.New(t, hang)
	c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{
		{Name: "cp1", Address: "192.0.2.1", Role: inventory.RoleServer},
		{Name: "a1", Address: "192.0.2.2", Role: inventory.RoleAgent},
	}}}
	rec := &events.Recorder{}
	in := New(c, Options{Timeout: time.Hour, StallGrace: time.Hour}, rec)
	s := in.newSession(commandFor("apply"))
	s.current = events.PhaseJoinAgents
	a1 := s.state("a1")
	a1.facts = &facts.Host{}
	a1.plan = &plan.HostPlan{Host: a1.host, Service: "k3s-agent"}
	dialTest(t, first, s.first, lostKeepalive)
	dialTest(t, agent, a1, lostKeepalive)
	time.AfterFunc(300*time.Millisecond, agent.Stall)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err := s.waitNode(ctx, a1, s.nodeView(), "", convergeResult{})
	took := time.Since(start)
	s.close()
	t.Logf("%s: %v", took.Round(time.Millisecond), err)
	var lost *hostLost
	if !errors.As(err, &lost) || !strings.Contains(err.Error(), "node a1 not ready: a1 has been unreachable since") ||
		!strings.Contains(err.Error(), "(its node: not registered yet)") {
		t.Fatalf("want the wait ended naming a1 unreachable and its node not registered, got %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("the lost agent was noticed after %s, want within 5 s", took)
	}
}

// While joins wait, the plain output says at most every heartbeatEvery, in one line, which
// nodes the run waits for, why, for how long, and when the timeout comes (five named at most).
func TestJoinHeartbeatPlain(t *testing.T) {
	rec := &events.Recorder{}
	c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{{Name: "cp1", Address: "192.0.2.1", Role: inventory.RoleServer}}}}
	in := New(c, Options{Timeout: time.Hour}, rec)
	em := in.emitter(events.PhaseJoinAgents)
	v := &nodeView{}
	now := time.Now()
	deadline := now.Add(9 * time.Minute)
	v.beat(em, "a2", "NotReady: KubeletNotReady", now.Add(-20*time.Second), deadline)
	v.beat(em, "a1", "not registered yet", now.Add(-time.Minute), deadline)
	if n := len(rec.Events()); n != 0 {
		t.Fatalf("a heartbeat within %s of the wait's start: %d events", heartbeatEvery, n)
	}
	v.mu.Lock()
	v.lastBeat = time.Now().Add(-heartbeatEvery)
	v.mu.Unlock()
	v.beat(em, "a1", "not registered yet", now.Add(-time.Minute), deadline)
	v.beat(em, "a2", "NotReady: KubeletNotReady", now.Add(-20*time.Second), deadline) // said just now
	for i := 3; i <= 7; i++ {
		v.beat(em, "a"+string(rune('0'+i)), "not registered yet", now, deadline)
	}
	v.done("a1")
	v.mu.Lock()
	v.lastBeat = time.Now().Add(-heartbeatEvery)
	v.mu.Unlock()
	v.beat(em, "a2", "NotReady: KubeletNotReady", now.Add(-20*time.Second), deadline)

	var out strings.Builder
	p := &frontend.Plain{W: &out}
	for _, e := range rec.Events() {
		p.Emit(e)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^\d\d:\d\d:\d\d - +join-agents +waiting for 2 nodes: a1 \(not registered yet, 1m0s\), a2 \(NotReady: KubeletNotReady, 20s\); timeout in 9m0s$`),
		regexp.MustCompile(`^\d\d:\d\d:\d\d - +join-agents +waiting for 6 nodes: a2 \(NotReady: KubeletNotReady, 20s\), a3 \(not registered yet, 0s\), a4 \(not registered yet, 0s\), a5 \(not registered yet, 0s\), a6 \(not registered yet, 0s\), and 1 more; timeout in 9m0s$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("want %d heartbeat lines, got:\n%s", len(want), out.String())
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("heartbeat line %d:\n got %q\nwant %s", i+1, lines[i], re)
		}
	}
}
