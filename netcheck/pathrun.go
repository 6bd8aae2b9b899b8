// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The steps of RunPaths, in order: startProbes, awaitReady, roundOne, mtuLadder, stop,
// results. A pathRun holds what they hand forward; only the goroutine running RunPaths
// touches it (the probes' goroutines send events).

// event is one line (or the end) of one host's probe.
type event struct {
	host int
	line probeLine
	done bool
	err  error
}

type hostRun struct {
	h       ProbeHost
	in      chan string
	ready   bool
	exited  bool
	err     string
	probing bool
	closed  bool
}

// close ends the probe's input: it exits (an SSH session's end also waits for that).
func (r *hostRun) close() {
	if !r.closed && r.h.Skip == "" && r.h.Run != nil {
		r.closed = true
		close(r.in)
	}
}

// listenKey is one test listener of a target host.
type listenKey struct {
	proto string
	port  int
}

// pathRun is one run of the path check.
type pathRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	c      *Cluster
	opt    PathOptions
	// rep is the report; its Results hold the planned probes (PlanProbes), in order, and are
	// judged by results at the end. Probe n's ID is "p<n>".
	rep *PathReport
	// idx maps a host name to its index in runs.
	idx    map[string]int
	runs   []*hostRun
	events chan event
	wg     sync.WaitGroup
	// What the probes printed, by probe ID: TCP results, datagram senders' results, the
	// largest datagram received (one, see handle); listener states by "host proto port".
	tcpRes  map[string]probeLine
	sendRes map[string]probeLine
	got     map[string][]probeLine
	lstate  map[string]ListenerState
	// kinds is every probe ID sent (tcp, udp, mtu); mtuOf the MTU result each mtu probe
	// measures; mtus the MTU results of round one, in probe order.
	kinds map[string]string
	mtuOf map[string]*MTUResult
	mtus  []*MTUResult
	// addrs is every node's probe address, worked out once for the run (PlanProbes's too).
	addrs *pathAddrs
	// unanswered counts the probes in kinds without their answer yet, unreceived the datagram
	// probes sent without an arrival yet: kept as the lines arrive (update), so judging
	// whether a round is over costs nothing per line instead of a scan of every probe.
	unanswered, unreceived int
}

// pending says whether probe id still waits for its answer (answered) and whether it is a
// datagram probe sent without an arrival yet (allReceived), as 0 or 1 each.
func (r *pathRun) pending(id string) (unanswered, unreceived int) {
	switch r.kinds[id] {
	case "tcp":
		if _, ok := r.tcpRes[id]; !ok {
			unanswered = 1
		}
	case "udp", "mtu":
		if len(r.got[id]) == 0 {
			unanswered = 1
			if s, ok := r.sendRes[id]; ok && s.state == "sent" {
				unreceived = 1
			}
		}
	}
	return unanswered, unreceived
}

// update applies change, which touches only probe id's state, and keeps the counters true.
func (r *pathRun) update(id string, change func()) {
	a0, b0 := r.pending(id)
	change()
	a1, b1 := r.pending(id)
	r.unanswered += a1 - a0
	r.unreceived += b1 - b0
}

// track records probe id, of kind tcp, udp or mtu, as sent.
func (r *pathRun) track(id, kind string) {
	r.update(id, func() { r.kinds[id] = kind })
}

func newPathRun(ctx context.Context, cancel context.CancelFunc, c *Cluster, hosts []ProbeHost, opt PathOptions) *pathRun {
	addrs := newPathAddrs(c)
	// The plan is kept as the report's results, judged in place at the end (results): one
	// copy of each probe, tens of thousands at 500 nodes.
	plan := planProbes(c, addrs)
	rep := &PathReport{Hosts: map[string]string{}, Results: make([]PathResult, len(plan))}
	for i, p := range plan {
		rep.Results[i].Probe = p
	}
	r := &pathRun{ctx: ctx, cancel: cancel, c: c, opt: opt, rep: rep, addrs: addrs, idx: map[string]int{}, runs: make([]*hostRun, len(hosts)), events: make(chan event, 1024),
		tcpRes: map[string]probeLine{}, sendRes: map[string]probeLine{}, got: map[string][]probeLine{},
		lstate: map[string]ListenerState{}, kinds: map[string]string{}, mtuOf: map[string]*MTUResult{}}
	for i, h := range hosts {
		r.idx[h.Name] = i
		r.runs[i] = &hostRun{h: h, in: make(chan string, 16)}
		if h.Skip != "" {
			r.rep.Hosts[h.Name] = h.Skip
		}
	}
	return r
}

// startProbes starts the probe on every host that is not skipped and tells it the
// listeners to bind: one per target host, proto and port.
func (r *pathRun) startProbes() {
	nonce := randHex(6)
	type probeProgram struct{ script, program string }
	scripts := map[string]probeProgram{} // by interpreter: each built once, shared by every host
	listens := make([]map[listenKey]netip.Addr, len(r.runs))
	for n := range r.rep.Results {
		p := &r.rep.Results[n].Probe
		if i, ok := r.idx[p.To]; ok {
			if listens[i] == nil {
				listens[i] = map[listenKey]netip.Addr{}
			}
			listens[i][listenKey{p.Port.Proto, p.Port.Port}] = p.Addr
		}
	}
	for i, hr := range r.runs {
		if hr.h.Skip != "" || hr.h.Run == nil {
			hr.exited = true
			continue
		}
		tool := r.opt.Tool
		if tool == "" {
			tool = probeTool(hr.h.Tool)
		}
		pp, ok := scripts[tool]
		if !ok {
			pp.script, pp.program = ProbeScript(int(r.opt.Limit/time.Second), tool)
			scripts[tool] = pp
		}
		r.start(i, hr, pp.script, pp.program)
		var b strings.Builder
		fmt.Fprintf(&b, "id %s h%d\n", nonce, i)
		keys := make([]listenKey, 0, len(listens[i]))
		for k := range listens[i] {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(a, b int) bool {
			if keys[a].proto != keys[b].proto {
				return keys[a].proto < keys[b].proto
			}
			return keys[a].port < keys[b].port
		})
		for _, k := range keys {
			fmt.Fprintf(&b, "listen %s %s %d\n", k.proto, listens[i][k], k.port)
		}
		b.WriteString("bind\n")
		hr.in <- b.String()
	}
}

// start runs host i's probe in a goroutine that sends every line it prints, then its end, as
// events; its input is program (ProbeScript), then what hr.in carries (probeInput).
func (r *pathRun) start(i int, hr *hostRun, script, program string) {
	ctx := r.ctx
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := hr.h.Run(ctx, script, &probeInput{ctx: ctx, in: hr.in, rest: program}, func(s string) {
			l, ok := parseProbeLine(s)
			if !ok {
				return
			}
			select {
			case r.events <- event{host: i, line: l}:
			case <-ctx.Done():
			}
		})
		select {
		case r.events <- event{host: i, done: true, err: err}:
		case <-ctx.Done():
		}
	}()
}

// probeTool is the interpreter as probe.sh names it (perl, python3, or a path it runs as
// given) for one the facts found: they report its path (/usr/bin/perl).
func probeTool(found string) string {
	switch path.Base(found) {
	case "perl", "python3":
		return path.Base(found)
	}
	return found
}

// probeInput is a probe's standard input: rest (at first the probe program, ProbeScript),
// then the strings sent on in, in order, then EOF when in is closed (hostRun.close) or the
// run's context ends. Read straight from the channel, it needs no pipe and no goroutine of its
// own per host. A read returns at most probeInputChunk bytes.
type probeInput struct {
	ctx  context.Context
	in   <-chan string
	rest string
}

// probeInputChunk bounds one read of a probe's input (bytes), and so the SSH packet that
// carries it: the SSH library keeps a buffer the size of the largest packet a connection
// sent, for the connection's life, and the facts script's 12 KB command line already set
// that size; the probe program must not raise it.
const probeInputChunk = 4096

func (p *probeInput) Read(b []byte) (int, error) {
	if len(b) > probeInputChunk {
		b = b[:probeInputChunk]
	}
	for p.rest == "" {
		select {
		case s, ok := <-p.in:
			if !ok {
				return 0, io.EOF
			}
			p.rest = s
		case <-p.ctx.Done():
			return 0, io.EOF
		}
	}
	n := copy(b, p.rest)
	p.rest = p.rest[n:]
	return n, nil
}

// handle applies one event to the state.
func (r *pathRun) handle(e event) {
	hr := r.runs[e.host]
	if e.done {
		hr.exited, hr.probing = true, false
		if !hr.ready {
			msg := "the probe ended before it was ready"
			if e.err != nil {
				msg += ": " + e.err.Error()
			}
			if hr.err != "" {
				msg = hr.err
			}
			r.rep.Hosts[hr.h.Name] = msg
		}
		return
	}
	l := e.line
	switch l.kind {
	case "error":
		hr.err = l.detail
		hr.close()
	case "listen":
		ls := ListenerState{Host: hr.h.Name, Proto: l.proto, Port: l.port, State: l.state, Detail: l.detail}
		r.rep.Listeners = append(r.rep.Listeners, ls)
		r.lstate[fmt.Sprintf("%s %s %d", hr.h.Name, l.proto, l.port)] = ls
	case "ready":
		hr.ready = true
	case "probed":
		hr.probing = false
	case "tcp":
		r.update(l.id, func() { r.tcpRes[l.id] = l })
	case "udp", "mtu":
		if prev, ok := r.sendRes[l.id]; !ok || prev.state == "sent" {
			r.update(l.id, func() { r.sendRes[l.id] = l })
		}
	case "got":
		// One arrival per probe is kept, the largest: a datagram probe is judged on whether
		// any arrived, an MTU probe on the largest (largestGot).
		if prev := r.got[l.id]; len(prev) == 0 || l.bytes > prev[0].bytes {
			r.update(l.id, func() { r.got[l.id] = []probeLine{l} })
		}
	}
}

// wait handles events until done() holds, the deadline passes or the run's context ends.
func (r *pathRun) wait(deadline time.Time, done func() bool) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for !done() {
		select {
		case e := <-r.events:
			r.handle(e)
		case <-t.C:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// awaitReady waits up to readyWait for every probe to bind its listeners (or end); a host
// whose probe is not ready by then is left out with the reason.
func (r *pathRun) awaitReady() {
	r.wait(time.Now().Add(readyWait), func() bool {
		for _, hr := range r.runs {
			if !hr.ready && !hr.exited {
				return false
			}
		}
		return true
	})
	for _, hr := range r.runs {
		if !hr.ready && r.rep.Hosts[hr.h.Name] == "" {
			r.rep.Hosts[hr.h.Name] = fmt.Sprintf("the probe did not start within %s", readyWait)
		}
	}
}

// roundOne sends every probe at once — TCP connects, UDP datagrams to listeners that bound,
// full-size don't-fragment datagrams on the overlay port — and waits for the answers.
func (r *pathRun) roundOne() {
	overlayPort, _ := r.c.Overlay()
	bySource := map[int]*strings.Builder{}
	for n := range r.rep.Results {
		p := &r.rep.Results[n].Probe
		si, ok := r.idx[p.From]
		ti, ok2 := r.idx[p.To]
		if !ok || !ok2 || !r.runs[si].ready || !r.runs[ti].ready {
			continue
		}
		id := "p" + strconv.Itoa(n)
		b := sourceLines(bySource, si)
		switch p.Port.Proto {
		case "tcp":
			r.track(id, "tcp")
			fmt.Fprintf(b, "tcp %s %s %d %d\n", id, p.Addr, p.Port.Port, r.opt.ConnectTimeout.Milliseconds())
		case "udp":
			if ls, ok := r.lstate[fmt.Sprintf("%s udp %d", p.To, p.Port.Port)]; !ok || (ls.State != "ok" && ls.State != "any") {
				continue
			}
			r.track(id, "udp")
			src := "-"
			if p.Port.Overlay {
				// The overlay's source: the address the sender's flannel uses (ProbeAddr).
				if a := r.addrs.ofName(p.From, p.Port); a.IsValid() {
					src = a.String()
				}
			}
			fmt.Fprintf(b, "udp %s %s %s %d %d %d\n", id, src, p.Addr, p.Port.Port, udpCount, 64)
			if !r.opt.SkipMTU && p.Port.Port == overlayPort && p.MTU {
				m := &MTUResult{From: p.From, To: p.To, Addr: p.Addr, Port: p.Port.Port, IfaceMTU: ifaceMTU(r.c.Node(p.From), p.Addr)}
				mid := id + "m"
				r.track(mid, "mtu")
				r.mtuOf[mid] = m
				r.mtus = append(r.mtus, m)
				m.Tried = m.IfaceMTU
				m.src = src
				fmt.Fprintf(b, "mtu %s %s %s %d %d %d\n", mid, src, p.Addr, p.Port.Port, m.IfaceMTU-udpHeader(p.Addr), mtuCopies)
			}
		}
	}
	r.send(bySource)
	r.rep.Rounds = 1
	r.roundWait()
}

// sourceLines is the builder of source host si's probe lines in lines, created on first use:
// each host's lines are written straight into one text, not kept as a string per path first
// (tens of thousands at 500 nodes: docs/preflight.md "Cost at scale").
func sourceLines(lines map[int]*strings.Builder, si int) *strings.Builder {
	b := lines[si]
	if b == nil {
		b = &strings.Builder{}
		lines[si] = b
	}
	return b
}

// send gives each source host its probe lines and tells it to go.
func (r *pathRun) send(lines map[int]*strings.Builder) {
	for si, b := range lines {
		if b.Len() == 0 {
			continue
		}
		b.WriteString("go\n")
		r.runs[si].probing = true
		r.runs[si].in <- b.String()
		delete(lines, si)
	}
}

// answered: every probe has its answer — each connect its result, each datagram probe a
// first arrival — so the copies still being sent change nothing (the usual case: every path
// open ends the round at once, not after the last copy's 200 ms).
func (r *pathRun) answered() bool { return r.unanswered == 0 }

// allReceived: every datagram probe whose sender sent has had an arrival.
func (r *pathRun) allReceived() bool { return r.unreceived == 0 }

// roundWait waits until every probe is answered or every sender is done (at most
// ConnectTimeout + 2 s), then up to receiptGrace for datagrams still under way.
func (r *pathRun) roundWait() {
	deadline := time.Now().Add(r.opt.ConnectTimeout + 2*time.Second)
	r.wait(deadline, func() bool {
		if r.answered() {
			return true
		}
		for _, hr := range r.runs {
			if hr.probing && !hr.exited {
				return false
			}
		}
		return true
	})
	r.wait(minTime(deadline, time.Now().Add(receiptGrace)), r.allReceived)
}

// mtuLadder is round two: an MTU ladder on the paths where full-size datagrams did not
// arrive but small ones did, for at most two paths per host (a link's MTU shows on any of
// them).
func (r *pathRun) mtuLadder() {
	ladder := map[int]*strings.Builder{}
	perHost := map[string]int{}
	for mid, m := range r.mtuOf {
		uid := strings.TrimSuffix(mid, "m")
		largest := largestGot(r.got[mid], m.Addr)
		if s := r.sendRes[mid]; s.state == "emsgsize" {
			m.LocalPMTU = s.pmtu
		}
		m.Largest = largest
		if largest >= m.IfaceMTU || len(r.got[uid]) == 0 || perHost[m.From] >= 2 || perHost[m.To] >= 2 {
			continue
		}
		perHost[m.From]++
		perHost[m.To]++
		si := r.idx[m.From]
		m.Step = ladderStep
		top := m.IfaceMTU - ladderStep
		if m.LocalPMTU > 0 && m.LocalPMTU < top {
			top = m.LocalPMTU
		}
		for size, k := top, 0; size >= ladderFloor; size, k = size-ladderStep, k+1 {
			lid := fmt.Sprintf("%sl%d", mid, k)
			r.track(lid, "mtu")
			r.mtuOf[lid] = m
			fmt.Fprintf(sourceLines(ladder, si), "mtu %s %s %s %d %d %d\n", lid, m.src, m.Addr, m.Port, size-udpHeader(m.Addr), mtuCopies)
		}
	}
	if len(ladder) == 0 {
		return
	}
	r.rep.Rounds = 2
	r.send(ladder)
	r.roundWait()
	for id, m := range r.mtuOf {
		if l := largestGot(r.got[id], m.Addr); l > m.Largest {
			m.Largest = l
		}
	}
}

// stop ends every probe's input (each exits at once, or at its own limit), handles what they
// still print, and waits at most 3 s for them before cancelling the run's context.
func (r *pathRun) stop() {
	for _, hr := range r.runs {
		hr.close()
	}
	stopped, drained := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(drained)
		for {
			select {
			case e := <-r.events:
				r.handle(e)
			case <-stopped:
				return
			}
		}
	}()
	waitDone := make(chan struct{})
	go func() { r.wg.Wait(); close(waitDone) }()
	select {
	case <-waitDone:
	case <-time.After(3 * time.Second):
		r.cancel()
		<-waitDone
	}
	close(stopped)
	<-drained
	for len(r.events) > 0 {
		r.handle(<-r.events)
	}
}

// results judges every planned probe (judge) and keeps the MTU results that say something.
func (r *pathRun) results() {
	for n := range r.rep.Results {
		res := &r.rep.Results[n]
		p := res.Probe
		id := "p" + strconv.Itoa(n)
		switch {
		case r.rep.Hosts[p.From] != "":
			res.Status, res.Detail = PathUntested, p.From+": "+r.rep.Hosts[p.From]
		case r.rep.Hosts[p.To] != "":
			res.Status, res.Detail = PathUntested, p.To+": "+r.rep.Hosts[p.To]
		default:
			var ls *ListenerState
			if l, ok := r.lstate[fmt.Sprintf("%s %s %d", p.To, p.Port.Proto, p.Port.Port)]; ok {
				ls = &l
			}
			res.Status, res.Detail, res.Millis = judge(p, r.kinds[id], r.tcpRes[id], r.sendRes[id], r.got[id], ls, r.runs[r.idx[p.To]], r.idx)
		}
	}
	// An MTU result says something only where small datagrams got through: else the path
	// itself is broken (NodePaths), whatever the size.
	for mid, m := range r.mtuOf {
		if strings.Contains(mid, "l") {
			continue
		}
		if len(r.got[strings.TrimSuffix(mid, "m")]) == 0 {
			m.From = ""
		}
	}
	for _, m := range r.mtus {
		if m.From != "" {
			r.rep.MTU = append(r.rep.MTU, *m)
		}
	}
}
