// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The steps of RunPaths, in order: startProbes, roundOne, mtuLadder, stop, results. Every step
// that touches the hosts is a sweep: one short command per host, opt.Concurrency hosts at a
// time, so that no SSH session is held per host while the probes run (docs/preflight.md "The
// path check"). A pathRun holds what the steps hand forward; only the goroutine running
// RunPaths touches it (a sweep's workers hand their output back to it).

type hostRun struct {
	h ProbeHost
	// dir is the probe's run directory on the host (probe.sh's "dir" line; "" before);
	// detached says the probe runs on without a session (its "detached" line).
	dir      string
	detached bool
	ready    bool
	// exited says the probe no longer runs (it ended, failed to start or was stopped).
	exited bool
	err    string
	// off is how many bytes of the probe's output were read (probe-collect.sh); goAt when it
	// was last given probes, seq how many command files it was given.
	off  int
	goAt time.Time
	seq  int
}

// listenKey is one test listener of a target host.
type listenKey struct {
	proto string
	port  int
}

// pathRun is one run of the path check.
type pathRun struct {
	ctx context.Context
	c   *Cluster
	opt PathOptions
	// rep is the report; its Results hold the planned probes (PlanProbes), in order, and are
	// judged by results at the end. Probe n's ID is "p<n>".
	rep *PathReport
	// idx maps a host name to its index in runs.
	idx  map[string]int
	runs []*hostRun
	// What the probes printed, by probe ID: TCP results, datagram senders' results, the size
	// of the largest datagram received (see handle); listener states by "host proto port".
	// Each kept as small as judging allows: tens of thousands at 500 nodes.
	tcpRes  map[string]answer
	sendRes map[string]answer
	got     map[string]int32
	lstate  map[string]ListenerState
	// kinds is every probe ID sent (tcp, udp, mtu); mtuOf the MTU result each mtu probe
	// measures; mtus the MTU results of round one, in probe order.
	kinds map[string]string
	mtuOf map[string]*MTUResult
	mtus  []*MTUResult
	// addrs is every node's probe address, worked out once for the run (PlanProbes's too).
	addrs *pathAddrs
	// lastGo is when the last host of a round was given its probes.
	lastGo time.Time
}

func newPathRun(ctx context.Context, c *Cluster, hosts []ProbeHost, opt PathOptions) *pathRun {
	addrs := newPathAddrs(c)
	// The plan is kept as the report's results, judged in place at the end (results): one
	// copy of each probe, tens of thousands at 500 nodes.
	plan := planProbes(c, addrs)
	rep := &PathReport{Hosts: map[string]string{}, Results: make([]PathResult, len(plan))}
	for i, p := range plan {
		rep.Results[i].Probe = p
	}
	r := &pathRun{ctx: ctx, c: c, opt: opt, rep: rep, addrs: addrs, idx: map[string]int{}, runs: make([]*hostRun, len(hosts)),
		tcpRes: map[string]answer{}, sendRes: map[string]answer{}, got: map[string]int32{},
		lstate: map[string]ListenerState{}, kinds: map[string]string{}, mtuOf: map[string]*MTUResult{}}
	for i, h := range hosts {
		r.idx[h.Name] = i
		r.runs[i] = &hostRun{h: h}
		if h.Skip != "" {
			r.rep.Hosts[h.Name] = h.Skip
		}
	}
	return r
}

// sweep runs op on the hosts hs (indices into runs), opt.Concurrency at a time, each within
// timeout, and hands every output to done in the calling goroutine, as they finish. It
// returns when all are done; op runs no longer than ctx.
func (r *pathRun) sweep(ctx context.Context, hs []int, timeout time.Duration, op func(ctx context.Context, hr *hostRun) (string, error), done func(i int, out string, err error)) {
	type res struct {
		i   int
		out string
		err error
	}
	jobs := make(chan int)
	results := make(chan res)
	var wg sync.WaitGroup
	for w := 0; w < min(r.opt.Concurrency, len(hs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				octx, cancel := context.WithTimeout(ctx, timeout)
				out, err := op(octx, r.runs[i])
				if err != nil && octx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
					err = &sweepDeadline{timeout}
				}
				cancel()
				results <- res{i, out, err}
			}
		}()
	}
	go func() {
		defer close(results)
		for _, i := range hs {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
	}()
	for x := range results {
		done(x.i, x.out, x.err)
	}
}

// sweepDeadline is a host's step of a sweep that did not finish within its time.
type sweepDeadline struct{ timeout time.Duration }

func (e *sweepDeadline) Error() string { return fmt.Sprintf("no answer within %s", e.timeout) }

func isDeadline(err error) bool {
	var d *sweepDeadline
	return errors.As(err, &d)
}

// started is every host whose probe runs detached.
func (r *pathRun) started() []int {
	var hs []int
	for i, hr := range r.runs {
		if hr.detached && !hr.exited {
			hs = append(hs, i)
		}
	}
	return hs
}

// runDir is the shape of the run directory probe.sh makes (mktemp -d): anything else a host
// prints in its place is not used, least of all removed.
var runDir = regexp.MustCompile(`^/[A-Za-z0-9._/-]*/k3strap-probe\.[A-Za-z0-9]+$`)

// startProbes starts the probe on every host that is not skipped: it binds the listeners the
// others will reach the host on — one per target host, proto and port — reports them and
// detaches. A host whose probe did not get that far within readyWait is left out, with the
// reason.
func (r *pathRun) startProbes() {
	nonce := randHex(6)
	scripts := r.buildScripts()
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
	var hs []int
	for i, hr := range r.runs {
		if hr.h.Skip != "" || hr.h.Exec == nil {
			hr.exited = true
			continue
		}
		hs = append(hs, i)
	}
	r.sweep(r.ctx, hs, readyWait, func(ctx context.Context, hr *hostRun) (string, error) {
		i := r.idx[hr.h.Name]
		tool := r.opt.Tool
		if tool == "" {
			tool = probeTool(hr.h.Tool)
		}
		pp := scripts[tool]
		var b strings.Builder
		b.WriteString(pp[1])
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
		b.WriteString("bind\ndetach\n")
		return hr.h.Exec(ctx, "start", pp[0], strings.NewReader(b.String()))
	}, func(i int, out string, err error) {
		hr := r.runs[i]
		r.consume(i, out) // the start's own output: the probe's output file begins after it
		switch {
		case hr.detached:
		case hr.err != "":
			r.rep.Hosts[hr.h.Name] = hr.err
		case !hr.ready && isDeadline(err):
			r.rep.Hosts[hr.h.Name] = fmt.Sprintf("the probe did not start within %s", readyWait)
		case err != nil:
			r.rep.Hosts[hr.h.Name] = "the probe ended before it was ready: " + err.Error()
		default:
			r.rep.Hosts[hr.h.Name] = "the probe ended before it was ready"
		}
		if !hr.detached {
			hr.exited = true
		}
	})
}

// buildScripts makes the launcher and the program (ProbeScript) for every interpreter the
// hosts need, once: one copy shared by every host.
func (r *pathRun) buildScripts() map[string][2]string {
	out := map[string][2]string{}
	for _, hr := range r.runs {
		tool := r.opt.Tool
		if tool == "" {
			tool = probeTool(hr.h.Tool)
		}
		if _, ok := out[tool]; !ok {
			s, p := ProbeScript(int(r.opt.Limit/time.Second), tool)
			out[tool] = [2]string{s, p}
		}
	}
	return out
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

// consume handles what host i's probe printed: out up to its last newline (a line still being
// written is read by the next collect), and returns how many bytes that is.
func (r *pathRun) consume(i int, out string) int {
	hr := r.runs[i]
	end := strings.LastIndexByte(out, '\n') + 1
	n := end
	for len(out[:end]) > 0 {
		line, rest, _ := strings.Cut(out[:end], "\n")
		out, end = rest, end-len(line)-1
		if d, ok := strings.CutPrefix(line, "dir "); ok {
			if runDir.MatchString(d) && !strings.Contains(d, "/../") {
				hr.dir = d
			}
			continue
		}
		if l, ok := parseProbeLine(line); ok {
			r.handle(hr, l)
		}
	}
	return n
}

// handle applies one line of host hr's probe to the state.
func (r *pathRun) handle(hr *hostRun, l probeLine) {
	switch l.kind {
	case "error":
		hr.err = l.detail
	case "detached":
		hr.detached = true
	case "listen":
		ls := ListenerState{Host: hr.h.Name, Proto: l.proto, Port: l.port, State: l.state, Detail: l.detail}
		r.rep.Listeners = append(r.rep.Listeners, ls)
		r.lstate[fmt.Sprintf("%s %s %d", hr.h.Name, l.proto, l.port)] = ls
	case "ready":
		hr.ready = true
	case "tcp":
		r.tcpRes[l.id] = l.answer()
	case "udp", "mtu":
		if prev, ok := r.sendRes[l.id]; !ok || prev.state == "sent" {
			r.sendRes[l.id] = l.answer()
		}
	case "got":
		// One arrival per probe is kept, the largest: a datagram probe is judged on whether
		// any arrived, an MTU probe on the largest (largestGot).
		if prev, ok := r.got[l.id]; !ok || int32(l.bytes) > prev {
			r.got[l.id] = int32(l.bytes)
		}
	}
}

// roundOne sends every probe — TCP connects, UDP datagrams to listeners that bound,
// full-size don't-fragment datagrams on the overlay port — and collects the answers.
func (r *pathRun) roundOne() {
	overlayPort, _ := r.c.Overlay()
	bySource := map[int]*strings.Builder{}
	for n := range r.rep.Results {
		p := &r.rep.Results[n].Probe
		si, ok := r.idx[p.From]
		ti, ok2 := r.idx[p.To]
		if !ok || !ok2 || !r.runs[si].detached || !r.runs[ti].detached {
			continue
		}
		id := "p" + strconv.Itoa(n)
		b := sourceLines(bySource, si)
		switch p.Port.Proto {
		case "tcp":
			r.kinds[id] = "tcp"
			fmt.Fprintf(b, "tcp %s %s %d %d\n", id, p.Addr, p.Port.Port, r.opt.ConnectTimeout.Milliseconds())
		case "udp":
			if ls, ok := r.lstate[fmt.Sprintf("%s udp %d", p.To, p.Port.Port)]; !ok || (ls.State != "ok" && ls.State != "any") {
				continue
			}
			r.kinds[id] = "udp"
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
				r.kinds[mid] = "mtu"
				r.mtuOf[mid] = m
				r.mtus = append(r.mtus, m)
				m.Tried = m.IfaceMTU
				m.src = src
				fmt.Fprintf(b, "mtu %s %s %s %d %d %d\n", mid, src, p.Addr, p.Port.Port, m.IfaceMTU-udpHeader(p.Addr), mtuCopies)
			}
		}
	}
	r.rep.Rounds = 1
	r.round(bySource)
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

// round gives each source host its probe lines and tells it to go (probe-send.sh), then
// collects what every probe printed (probe-collect.sh), from settle after the last go: each
// host once its connects ended and its datagram probes sent their first copy (the "sent"
// mark), which is all when every path is open; then the hosts of the probes still without an
// answer once more, receiptGrace after the last go, once their round is over ("idle").
func (r *pathRun) round(lines map[int]*strings.Builder) {
	var sources []int
	input := make([]string, len(r.runs))
	for si, b := range lines {
		if b.Len() > 0 && !r.runs[si].exited {
			sources = append(sources, si)
			b.WriteString("go\n")
			input[si] = b.String()
		}
		delete(lines, si)
	}
	sort.Ints(sources)
	sendScript := probeSendScript()
	r.sweep(r.ctx, sources, sweepTimeout, func(ctx context.Context, hr *hostRun) (string, error) {
		hr.seq++
		return hr.h.Exec(ctx, "hand over", sendScript, strings.NewReader(input[r.idx[hr.h.Name]]), hr.dir, fmt.Sprintf("%04d", hr.seq))
	}, func(i int, out string, err error) {
		hr := r.runs[i]
		input[i] = ""
		hr.goAt = time.Now()
		r.lastGo = hr.goAt
		r.consume(i, out) // only an error line, if any (not the probe's output file)
		if err != nil {
			r.lost(hr, "its probes could not be handed to it", err)
		}
	})
	r.sleepUntil(r.lastGo.Add(settle))
	r.collect(r.started(), "sent", false)
	if pending := r.unanswered(); len(pending) > 0 {
		r.sleepUntil(r.lastGo.Add(receiptGrace))
		r.collect(pending, "idle", false)
	}
}

// unanswered is every host a probe without its answer yet involves: the source of a connect
// without its result; the source and the target of a datagram probe without an arrival (the
// source's last line says whether it could send at all).
func (r *pathRun) unanswered() []int {
	seen := map[int]bool{}
	for id, k := range r.kinds {
		n, ok := r.probeOf(id)
		if !ok {
			continue
		}
		p := &r.rep.Results[n].Probe
		if k == "tcp" {
			if _, ok := r.tcpRes[id]; !ok {
				seen[r.idx[p.From]] = true
			}
		} else if _, ok := r.got[id]; !ok {
			seen[r.idx[p.From]], seen[r.idx[p.To]] = true, true
		}
	}
	hs := make([]int, 0, len(seen))
	for i := range seen {
		if !r.runs[i].exited {
			hs = append(hs, i)
		}
	}
	sort.Ints(hs)
	return hs
}

// collect reads what the probes of hosts hs printed since the last collect: with mark "sent",
// once each ended its connects and sent the first copy of every datagram, with "idle" once
// its round is over (either at most ConnectTimeout + 2 s after its go), with "" at once; with
// stop, it then ends them and removes their run directories.
func (r *pathRun) collect(hs []int, mark string, stop bool) {
	script := probeCollectScript()
	limit := r.opt.ConnectTimeout + 2*time.Second
	r.sweep(r.ctx, hs, limit+sweepTimeout, func(ctx context.Context, hr *hostRun) (string, error) {
		ticks := 0
		if mark != "" && !hr.goAt.IsZero() {
			ticks = max(0, int(time.Until(hr.goAt.Add(limit))/(50*time.Millisecond))+1)
		}
		s := "0"
		if stop {
			s = "1"
		}
		step := "read"
		if stop {
			step = "read and stop"
		}
		return hr.h.Exec(ctx, step, script, nil, hr.dir, strconv.Itoa(hr.off), strconv.Itoa(ticks), s, cmp.Or(mark, "idle"))
	}, func(i int, out string, err error) {
		hr := r.runs[i]
		hr.off += r.consume(i, out)
		if err != nil {
			r.lost(hr, "its results could not be read", err)
		}
		if stop {
			hr.exited, hr.dir = true, ""
		}
	})
}

// lost records that host hr's probe could not be reached for a step (why, with the probe's
// own error line when it printed one, else err), when it was not already left out: its paths
// are untested. A probe that says it is gone (probe-send.sh, probe-collect.sh) is not asked
// again.
func (r *pathRun) lost(hr *hostRun, why string, err error) {
	if hr.err != "" {
		why += ": " + hr.err
	} else if err != nil {
		why += ": " + err.Error()
	}
	if strings.HasPrefix(hr.err, "gone") {
		hr.exited = true
	}
	if r.rep.Hosts[hr.h.Name] == "" {
		r.rep.Hosts[hr.h.Name] = why
	}
}

// probeOf is the index in the plan (rep.Results) of the probe id (p<n>, p<n>m, p<n>ml<k>)
// belongs to.
func (r *pathRun) probeOf(id string) (int, bool) {
	digits := strings.TrimLeft(id[min(1, len(id)):], "0123456789")
	n, err := strconv.Atoi(id[1 : len(id)-len(digits)])
	if err != nil || n < 0 || n >= len(r.rep.Results) {
		return 0, false
	}
	return n, true
}

func (r *pathRun) sleepUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-r.ctx.Done():
	}
}

// mtuLadder is round two: an MTU ladder on the paths where full-size datagrams did not
// arrive but small ones did, for at most two paths per host (a link's MTU shows on any of
// them).
func (r *pathRun) mtuLadder() {
	ladder := map[int]*strings.Builder{}
	perHost := map[string]int{}
	for _, mid := range slices.Sorted(maps.Keys(r.mtuOf)) {
		m := r.mtuOf[mid]
		uid := strings.TrimSuffix(mid, "m")
		largest := r.largestGot(mid, m.Addr)
		if s := r.sendRes[mid]; s.state == "emsgsize" {
			m.LocalPMTU = int(s.pmtu)
		}
		m.Largest = largest
		if _, small := r.got[uid]; largest >= m.IfaceMTU || !small || perHost[m.From] >= 2 || perHost[m.To] >= 2 {
			continue
		}
		si, ti := r.idx[m.From], r.idx[m.To]
		if r.runs[si].exited || r.runs[ti].exited {
			continue
		}
		perHost[m.From]++
		perHost[m.To]++
		m.Step = ladderStep
		top := m.IfaceMTU - ladderStep
		if m.LocalPMTU > 0 && m.LocalPMTU < top {
			top = m.LocalPMTU
		}
		for size, k := top, 0; size >= ladderFloor; size, k = size-ladderStep, k+1 {
			lid := fmt.Sprintf("%sl%d", mid, k)
			r.kinds[lid] = "mtu"
			r.mtuOf[lid] = m
			fmt.Fprintf(sourceLines(ladder, si), "mtu %s %s %s %d %d %d\n", lid, m.src, m.Addr, m.Port, size-udpHeader(m.Addr), mtuCopies)
		}
	}
	if len(ladder) == 0 {
		return
	}
	r.rep.Rounds = 2
	r.round(ladder)
	for id, m := range r.mtuOf {
		if l := r.largestGot(id, m.Addr); l > m.Largest {
			m.Largest = l
		}
	}
}

// largestGot is the largest datagram of probe id that arrived, with its IP and UDP headers
// (0 when none did).
func (r *pathRun) largestGot(id string, a netip.Addr) int {
	if b, ok := r.got[id]; ok {
		return int(b) + udpHeader(a)
	}
	return 0
}

// stop reads what the detached probes printed last and ends them, removing their run
// directories; a run directory whose probe never detached (it failed while starting) is
// removed too. After the run was stopped, it only ends and removes, within stopWait.
func (r *pathRun) stop() {
	var running, rest []int
	for i, hr := range r.runs {
		switch {
		case hr.dir == "":
		case hr.detached && !hr.exited && r.ctx.Err() == nil:
			running = append(running, i)
		default:
			rest = append(rest, i)
		}
	}
	r.collect(running, "", true)
	if len(rest) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), stopWait)
	defer cancel()
	script := probeStopScript()
	r.sweep(ctx, rest, stopWait, func(ctx context.Context, hr *hostRun) (string, error) {
		return hr.h.Exec(ctx, "stop", script, nil, hr.dir)
	}, func(i int, _ string, _ error) { r.runs[i].exited, r.runs[i].dir = true, "" })
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
			var tcp, sent *answer
			if a, ok := r.tcpRes[id]; ok {
				tcp = &a
			}
			if a, ok := r.sendRes[id]; ok {
				sent = &a
			}
			_, arrived := r.got[id]
			res.Status, res.Detail, res.Millis = judge(p, r.kinds[id], tcp, sent, arrived, ls, r.runs[r.idx[p.To]], r.idx)
		}
	}
	// An MTU result says something only where small datagrams got through: else the path
	// itself is broken (NodePaths), whatever the size.
	for mid, m := range r.mtuOf {
		if strings.Contains(mid, "l") {
			continue
		}
		if _, small := r.got[strings.TrimSuffix(mid, "m")]; !small {
			m.From = ""
		}
	}
	for _, m := range r.mtus {
		if m.From != "" {
			r.rep.MTU = append(r.rep.MTU, *m)
		}
	}
}
