// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/k3s"
)

// Probe is one path to test: from host From to host To's address Addr on Port.
type Probe struct {
	From, To string
	Addr     netip.Addr
	Port     k3s.NodePort
	// MTU also probes the path with full-size don't-fragment datagrams (overlay ports).
	MTU bool
}

// Bounds of the path check in large clusters: on a port every node opens to every other,
// a node probes every server but at most peerLimit agents, spread evenly over the inventory
// and shifted by its own position, so that every agent is still probed by about peerLimit
// others and the probes grow linearly with the cluster. The overlay's full-size datagrams go
// to mtuPeers targets of each node: its next two neighbours in the inventory and the one
// half-way round, so every host is measured in and out (a link's MTU shows on any path over
// it); up to mtuAllPairs nodes, every pair.
const (
	peerLimit   = 32
	mtuPeers    = 3
	mtuAllPairs = 8
)

// PlanProbes returns the paths the cluster needs tested: for each port of c.Ports and
// c.Extra, each ordered pair of distinct nodes whose roles match the port's From and To (a
// pair and port needed for two purposes is probed once; beyond peerLimit agents a sample, see
// above). The target address is where the other nodes will reach the node (Node.ProbeAddr).
func PlanProbes(c *Cluster) []Probe {
	var out []Probe
	type pathKey struct {
		from, to, port int
		proto          string
	}
	seen := map[pathKey]bool{}
	n := len(c.Nodes)
	addrs := newPathAddrs(c)
	c.eachPath(func(p k3s.NodePort, i, j int) {
		from, to := &c.Nodes[i], &c.Nodes[j]
		key := pathKey{i, j, p.Port, p.Proto}
		if seen[key] {
			return
		}
		seen[key] = true
		d := (j - i + n) % n
		mtu := p.Overlay && (n <= mtuAllPairs || d == 1 || d == 2 || d == n/2)
		out = append(out, Probe{From: from.Name, To: to.Name, Addr: addrs.of(j, p), Port: p, MTU: mtu})
	})
	return out
}

// eachPath calls fn for each port of c.Ports and c.Extra and each ordered pair of nodes (by
// index) whose roles match the port's From and To, beyond peerLimit agents for the sample
// targetsOf picks: the paths the path check probes and the firewall judgement evaluates.
func (c *Cluster) eachPath(fn func(p k3s.NodePort, from, to int)) {
	for _, p := range append(slices.Clone(c.Ports), c.Extra...) {
		for i := range c.Nodes {
			if !p.From.Has(c.Nodes[i].Server) {
				continue
			}
			for _, j := range targetsOf(c, p, i) {
				fn(p, i, j)
			}
		}
	}
}

// targetsOf returns the indexes of the nodes node i probes on port p (see peerLimit).
func targetsOf(c *Cluster, p k3s.NodePort, i int) []int {
	var servers, agents []int
	n := len(c.Nodes)
	for k := 1; k < n; k++ {
		j := (i + k) % n
		if !p.To.Has(c.Nodes[j].Server) {
			continue
		}
		if c.Nodes[j].Server {
			servers = append(servers, j)
		} else {
			agents = append(agents, j)
		}
	}
	if len(agents) > peerLimit {
		// the MTU neighbours first, then evenly spaced
		var pick []int
		for _, d := range []int{1, 2, n / 2} {
			if j := (i + d) % n; slices.Contains(agents, j) && !slices.Contains(pick, j) {
				pick = append(pick, j)
			}
		}
		for k := 0; len(pick) < peerLimit && k < len(agents); k++ {
			if j := agents[k*len(agents)/peerLimit%len(agents)]; !slices.Contains(pick, j) {
				pick = append(pick, j)
			}
		}
		for k := 0; len(pick) < peerLimit && k < len(agents); k++ {
			if !slices.Contains(pick, agents[k]) {
				pick = append(pick, agents[k])
			}
		}
		agents = pick
	}
	out := append(servers, agents...)
	slices.Sort(out)
	return out
}

// Path states.
const (
	// PathOK: the probe reached k3strap's listener on the right host (TCP: its greeting
	// came back; UDP: a datagram arrived).
	PathOK = "ok"
	// PathOpen: TCP connected to a listener that is not k3strap's: the port's own service
	// (K3s on a re-run) holds it, and the path is open.
	PathOpen = "open"
	// PathFailed: the probe did not get through.
	PathFailed = "failed"
	// PathUntested: the probe could not be run or judged (Detail says why).
	PathUntested = "untested"
)

// PathResult is what one probe found.
type PathResult struct {
	Probe
	Status string
	// Detail says why a probe failed or was not tested.
	Detail string
	// Millis is how long a TCP connect took.
	Millis int
}

// MTUResult is a path MTU measured with don't-fragment datagrams.
type MTUResult struct {
	From, To string
	Addr     netip.Addr
	Port     int
	// IfaceMTU is the MTU of From's interface towards To: flannel's encapsulated packets are
	// that large.
	IfaceMTU int
	// Largest is the largest IP packet (headers included) that arrived; 0 when none did.
	Largest int
	// Tried is the largest size sent; Step the ladder's step (the path MTU is between Largest
	// and Largest+Step-1 when a ladder ran).
	Tried, Step int
	// LocalPMTU is the path MTU From's kernel already knew (it refused bigger datagrams).
	LocalPMTU int
	src       string
}

// Fits reports whether full-size packets get through.
func (m MTUResult) Fits() bool { return m.Largest >= m.IfaceMTU }

// ListenerState is whether a test listener could be bound.
type ListenerState struct {
	Host  string
	Proto string
	Port  int
	// State is ok (bound to the host's address), any (bound to every address: the target
	// address is not the host's), busy (the port is held), error.
	State  string
	Detail string
}

// PathReport is the outcome of RunPaths.
type PathReport struct {
	Results   []PathResult
	MTU       []MTUResult
	Listeners []ListenerState
	// Hosts says why a host took no part (no interpreter, the probe could not start).
	Hosts map[string]string
	// Elapsed is the wall time of RunPaths; Rounds how many probe rounds ran.
	Elapsed time.Duration
	Rounds  int
}

// Failed returns the failed probes.
func (r *PathReport) Failed() []PathResult {
	var out []PathResult
	for _, p := range r.Results {
		if p.Status == PathFailed {
			out = append(out, p)
		}
	}
	return out
}

// Listener returns the state of the listener for proto/port on host (nil when none).
func (r *PathReport) Listener(host, proto string, port int) *ListenerState {
	for i := range r.Listeners {
		l := &r.Listeners[i]
		if l.Host == host && l.Proto == proto && l.Port == port {
			return l
		}
	}
	return nil
}

// ProbeHost is a host taking part in the path check.
type ProbeHost struct {
	Name string
	// Run runs script on the host as root, feeding it stdin and calling onLine for every
	// line it prints, and returns when it exits (or ctx ends: the remote side is told to
	// stop and its own time limit ends it anyway).
	Run func(ctx context.Context, script string, stdin io.Reader, onLine func(string)) error
	// Skip says why the host cannot take part ("" when it can).
	Skip string
}

// PathOptions shape RunPaths.
type PathOptions struct {
	// ConnectTimeout bounds each TCP connect (default 1 s: a filtered port costs this).
	ConnectTimeout time.Duration
	// Limit is the remote program's own hard limit (default 20 s).
	Limit time.Duration
	// Tool forces an interpreter (perl, python3); "" picks perl, then python3.
	Tool string
	// MTU probes the overlay's UDP port with don't-fragment datagrams (on by default when
	// the cluster has an overlay).
	SkipMTU bool
}

func (o *PathOptions) defaults() {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = time.Second
	}
	if o.Limit <= 0 {
		o.Limit = 20 * time.Second
	}
}

const (
	udpCount  = 3
	mtuCopies = 3
	// readyWait bounds how long the hosts may take to start and bind their listeners.
	readyWait = 10 * time.Second
	// receiptGrace is how long datagrams may take to arrive after the last sender is done
	// (it is spent only when some have not arrived).
	receiptGrace = 500 * time.Millisecond
	// ladderStep is the step of the MTU ladder, ladderFloor its lowest size (IPv6's minimum
	// link MTU; below it the path is broken for IPv6 anyway).
	ladderStep  = 4
	ladderFloor = 1280
)

// event is one line (or the end) of one host's probe.
type event struct {
	host int
	line probeLine
	raw  string
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

// RunPaths runs the path check: on every host of hosts a probe (ProbeScript) binds test
// listeners for the ports the others will reach it on; once all listen, every host probes
// its paths to the others at the same time — TCP connects (ConnectTimeout each), three UDP
// datagrams 100 ms apart, and for the overlay port don't-fragment datagrams of the full
// interface MTU (a second round measures the largest size that gets through on the paths
// where full-size ones did not). It returns once every answer is in, or when the last
// sender is done and receiptGrace has passed; then every probe is told to end (and ends
// itself after Limit whatever happens to its connection). A port a host already holds (K3s
// running) takes no test listener: a TCP connect there judges the path, a UDP one is left
// to the rulesets (PathUntested).
func RunPaths(ctx context.Context, c *Cluster, hosts []ProbeHost, opt PathOptions) *PathReport {
	opt.defaults()
	start := time.Now()
	rep := &PathReport{Hosts: map[string]string{}}
	probes := PlanProbes(c)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	idx := map[string]int{}
	runs := make([]*hostRun, len(hosts))
	for i, h := range hosts {
		idx[h.Name] = i
		runs[i] = &hostRun{h: h, in: make(chan string, 16)}
		if h.Skip != "" {
			rep.Hosts[h.Name] = h.Skip
		}
	}
	nonce := randHex(6)
	script := ProbeScript(int(opt.Limit/time.Second), opt.Tool)
	events := make(chan event, 1024)

	// Listeners: one per target host, proto and port.
	type lkey struct {
		proto string
		port  int
	}
	listens := make([]map[lkey]netip.Addr, len(hosts))
	for _, p := range probes {
		if i, ok := idx[p.To]; ok {
			if listens[i] == nil {
				listens[i] = map[lkey]netip.Addr{}
			}
			listens[i][lkey{p.Port.Proto, p.Port.Port}] = p.Addr
		}
	}

	var wg sync.WaitGroup
	for i, r := range runs {
		if r.h.Skip != "" || r.h.Run == nil {
			r.exited = true
			continue
		}
		pr, pw := io.Pipe()
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer pw.Close()
			for {
				select {
				case s, ok := <-r.in:
					if !ok {
						return
					}
					if _, err := io.WriteString(pw, s); err != nil {
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			err := r.h.Run(ctx, script, pr, func(s string) {
				l, ok := parseProbeLine(s)
				if !ok {
					return
				}
				select {
				case events <- event{host: i, line: l, raw: s}:
				case <-ctx.Done():
				}
			})
			_ = pr.Close()
			select {
			case events <- event{host: i, done: true, err: err}:
			case <-ctx.Done():
			}
		}()
		var b strings.Builder
		fmt.Fprintf(&b, "id %s h%d\n", nonce, i)
		keys := make([]lkey, 0, len(listens[i]))
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
		r.in <- b.String()
	}

	// handle applies one event to the state; it returns false once ctx ends.
	tcpRes := map[string]probeLine{}
	sendRes := map[string]probeLine{}
	got := map[string][]probeLine{}
	lstate := map[string]ListenerState{}
	kinds := map[string]string{}
	// unanswered counts the probes without their answer (a connect's result, a datagram's
	// first arrival), unreceived the datagram probes sent of which nothing arrived yet: kept
	// as each line comes, so that judging whether a round is over costs nothing per line.
	var unanswered, unreceived int
	isAnswered := func(id string) bool {
		switch kinds[id] {
		case "tcp":
			_, ok := tcpRes[id]
			return ok
		case "udp", "mtu":
			return len(got[id]) > 0
		}
		return true
	}
	isUnreceived := func(id string) bool {
		switch kinds[id] {
		case "udp", "mtu":
			s, ok := sendRes[id]
			return ok && s.state == "sent" && len(got[id]) == 0
		}
		return false
	}
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	track := func(id string, change func()) {
		a, u := isAnswered(id), isUnreceived(id)
		change()
		unanswered += b2i(a) - b2i(isAnswered(id))
		unreceived += b2i(isUnreceived(id)) - b2i(u)
	}
	setKind := func(id, k string) {
		track(id, func() { kinds[id] = k })
	}
	handle := func(e event) {
		r := runs[e.host]
		if e.done {
			r.exited, r.probing = true, false
			if !r.ready {
				msg := "the probe ended before it was ready"
				if e.err != nil {
					msg += ": " + e.err.Error()
				}
				if r.err != "" {
					msg = r.err
				}
				rep.Hosts[r.h.Name] = msg
			}
			return
		}
		l := e.line
		switch l.kind {
		case "error":
			r.err = l.detail
			r.close()
		case "listen":
			ls := ListenerState{Host: r.h.Name, Proto: l.proto, Port: l.port, State: l.state, Detail: l.detail}
			rep.Listeners = append(rep.Listeners, ls)
			lstate[fmt.Sprintf("%s %s %d", r.h.Name, l.proto, l.port)] = ls
		case "ready":
			r.ready = true
		case "probed":
			r.probing = false
		case "tcp":
			track(l.id, func() { tcpRes[l.id] = l })
		case "udp", "mtu":
			if prev, ok := sendRes[l.id]; !ok || prev.state == "sent" {
				track(l.id, func() { sendRes[l.id] = l })
			}
		case "got":
			track(l.id, func() { got[l.id] = append(got[l.id], l) })
		}
	}
	// wait runs handle until done() holds or the deadline passes.
	wait := func(deadline time.Time, done func() bool) {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		for !done() {
			select {
			case e := <-events:
				handle(e)
			case <-t.C:
				return
			case <-ctx.Done():
				return
			}
		}
	}

	wait(time.Now().Add(readyWait), func() bool {
		for _, r := range runs {
			if !r.ready && !r.exited {
				return false
			}
		}
		return true
	})
	for _, r := range runs {
		if !r.ready && rep.Hosts[r.h.Name] == "" {
			rep.Hosts[r.h.Name] = fmt.Sprintf("the probe did not start within %s", readyWait)
		}
	}

	// Round 1: every probe at once.
	ids := map[string]Probe{}
	mtuOf := map[string]*MTUResult{}
	var mtus []*MTUResult
	overlayPort, _ := c.Overlay()
	bySource := map[int][]string{}
	// flannelSrc is the overlay source address of host si, worked out once per host.
	srcs := map[int]string{}
	flannelSrc := func(si int) string {
		if s, ok := srcs[si]; ok {
			return s
		}
		s := "-"
		if n := c.Node(hosts[si].Name); n != nil {
			if a, _, _ := n.FlannelAddr(); a.IsValid() {
				s = a.String()
			}
		}
		srcs[si] = s
		return s
	}
	for n, p := range probes {
		si, ok := idx[p.From]
		ti, ok2 := idx[p.To]
		if !ok || !ok2 || !runs[si].ready || !runs[ti].ready {
			continue
		}
		id := "p" + strconv.Itoa(n)
		ids[id] = p
		var line string
		switch p.Port.Proto {
		case "tcp":
			setKind(id, "tcp")
			line = fmt.Sprintf("tcp %s %s %d %d\n", id, p.Addr, p.Port.Port, opt.ConnectTimeout.Milliseconds())
		case "udp":
			if ls, ok := lstate[fmt.Sprintf("%s udp %d", p.To, p.Port.Port)]; !ok || (ls.State != "ok" && ls.State != "any") {
				continue
			}
			setKind(id, "udp")
			src := "-"
			if p.Port.Overlay {
				src = flannelSrc(si)
			}
			line = fmt.Sprintf("udp %s %s %s %d %d %d\n", id, src, p.Addr, p.Port.Port, udpCount, 64)
			if !opt.SkipMTU && p.Port.Port == overlayPort && p.MTU {
				m := &MTUResult{From: p.From, To: p.To, Addr: p.Addr, Port: p.Port.Port, IfaceMTU: ifaceMTU(c.Node(p.From), p.Addr)}
				mid := id + "m"
				setKind(mid, "mtu")
				mtuOf[mid] = m
				mtus = append(mtus, m)
				m.Tried = m.IfaceMTU
				m.src = src
				line += fmt.Sprintf("mtu %s %s %s %d %d %d\n", mid, src, p.Addr, p.Port.Port, m.IfaceMTU-udpHeader(p.Addr), mtuCopies)
			}
		}
		bySource[si] = append(bySource[si], line)
	}
	go1 := func(lines map[int][]string) {
		for si, ls := range lines {
			if len(ls) == 0 {
				continue
			}
			runs[si].probing = true
			runs[si].in <- strings.Join(ls, "") + "go\n"
		}
	}
	go1(bySource)
	rep.Rounds = 1
	// answered: every probe has its answer — each connect its result, each datagram probe a
	// first arrival — so the copies still being sent change nothing (the usual case: every
	// path open ends the round at once, not after the last copy's 200 ms).
	answered := func() bool { return unanswered == 0 }
	roundWait := func(expect func() bool) {
		deadline := time.Now().Add(opt.ConnectTimeout + 2*time.Second)
		wait(deadline, func() bool {
			if answered() {
				return true
			}
			for _, r := range runs {
				if r.probing && !r.exited {
					return false
				}
			}
			return true
		})
		wait(minTime(deadline, time.Now().Add(receiptGrace)), expect)
	}
	// allReceived: every datagram probe sent has had an arrival.
	allReceived := func() bool { return unreceived == 0 }
	roundWait(allReceived)

	// Round 2: an MTU ladder on the paths where full-size datagrams did not arrive but
	// small ones did, for at most two paths per host (a link's MTU shows on any of them).
	ladder := map[int][]string{}
	perHost := map[string]int{}
	for mid, m := range mtuOf {
		uid := strings.TrimSuffix(mid, "m")
		largest := largestGot(got[mid], m.Addr)
		if s := sendRes[mid]; s.state == "emsgsize" {
			m.LocalPMTU = s.pmtu
		}
		m.Largest = largest
		if largest >= m.IfaceMTU || len(got[uid]) == 0 || perHost[m.From] >= 2 || perHost[m.To] >= 2 {
			continue
		}
		perHost[m.From]++
		perHost[m.To]++
		si := idx[m.From]
		m.Step = ladderStep
		top := m.IfaceMTU - ladderStep
		if m.LocalPMTU > 0 && m.LocalPMTU < top {
			top = m.LocalPMTU
		}
		for size, k := top, 0; size >= ladderFloor; size, k = size-ladderStep, k+1 {
			lid := fmt.Sprintf("%sl%d", mid, k)
			setKind(lid, "mtu")
			mtuOf[lid] = m
			ladder[si] = append(ladder[si], fmt.Sprintf("mtu %s %s %s %d %d %d\n", lid, m.src, m.Addr, m.Port, size-udpHeader(m.Addr), mtuCopies))
		}
	}
	if len(ladder) > 0 {
		rep.Rounds = 2
		go1(ladder)
		roundWait(allReceived)
		for id, m := range mtuOf {
			if l := largestGot(got[id], m.Addr); l > m.Largest {
				m.Largest = l
			}
		}
	}

	// Stop every probe: end of input; each exits at once (or at its own limit).
	for _, r := range runs {
		r.close()
	}
	stopped, drained := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(drained)
		for {
			select {
			case e := <-events:
				handle(e)
			case <-stopped:
				return
			}
		}
	}()
	waitDone := make(chan struct{})
	go func() { wg.Wait(); close(waitDone) }()
	select {
	case <-waitDone:
	case <-time.After(3 * time.Second):
		cancel()
		<-waitDone
	}
	close(stopped)
	<-drained
	for len(events) > 0 {
		handle(<-events)
	}

	// Results.
	for n, p := range probes {
		id := "p" + strconv.Itoa(n)
		res := PathResult{Probe: p}
		switch {
		case rep.Hosts[p.From] != "":
			res.Status, res.Detail = PathUntested, p.From+": "+rep.Hosts[p.From]
		case rep.Hosts[p.To] != "":
			res.Status, res.Detail = PathUntested, p.To+": "+rep.Hosts[p.To]
		default:
			var ls *ListenerState
			if l, ok := lstate[fmt.Sprintf("%s %s %d", p.To, p.Port.Proto, p.Port.Port)]; ok {
				ls = &l
			}
			res.Status, res.Detail, res.Millis = judge(p, kinds[id], tcpRes[id], sendRes[id], got[id], ls, runs[idx[p.To]], idx)
		}
		rep.Results = append(rep.Results, res)
	}
	// An MTU result says something only where small datagrams got through: else the path
	// itself is broken (NodePaths), whatever the size.
	for mid, m := range mtuOf {
		if strings.Contains(mid, "l") {
			continue
		}
		if len(got[strings.TrimSuffix(mid, "m")]) == 0 {
			m.From = ""
		}
	}
	for _, m := range mtus {
		if m.From != "" {
			rep.MTU = append(rep.MTU, *m)
		}
	}
	rep.Elapsed = time.Since(start)
	return rep
}

// judge turns what was printed about one probe into its status.
func judge(p Probe, kind string, tcp, sent probeLine, gots []probeLine, ls *ListenerState, target *hostRun, idx map[string]int) (string, string, int) {
	if ls == nil {
		return PathUntested, fmt.Sprintf("%s reported no listener for %s/%d", p.To, p.Port.Proto, p.Port.Port), 0
	}
	busy := ls.State == "busy"
	if ls.State == "error" {
		return PathUntested, fmt.Sprintf("%s could not open a test listener on %s/%d: %s", p.To, p.Port.Proto, p.Port.Port, ls.Detail), 0
	}
	switch p.Port.Proto {
	case "tcp":
		if tcp.kind == "" {
			return PathUntested, "no answer from the probe on " + p.From, 0
		}
		switch tcp.state {
		case "ok":
			want := fmt.Sprintf("h%d", idx[p.To])
			if tcp.detail != want {
				return PathFailed, fmt.Sprintf("%s reached another host's test listener (%s) at %s: the address leads elsewhere", p.From, tcp.detail, p.Addr), tcp.ms
			}
			return PathOK, "", tcp.ms
		case "other":
			if busy {
				return PathOpen, fmt.Sprintf("connected to the process that holds %s/%d on %s", p.Port.Proto, p.Port.Port, p.To), tcp.ms
			}
			// The handshake completed (the kernel answers for the listener); only the
			// greeting that names the host did not come: the path is open.
			return PathOpen, fmt.Sprintf("connected to %s, whose test listener did not greet in time", p.Addr), tcp.ms
		case "timeout":
			return PathFailed, fmt.Sprintf("no answer within %d ms (packets dropped on the way or at %s)", tcp.ms, p.To), tcp.ms
		case "fail":
			if tcp.detail == "ECONNREFUSED" && busy {
				return PathFailed, "connection refused", tcp.ms
			}
			return PathFailed, errText(tcp.detail), tcp.ms
		}
		return PathUntested, tcp.raw(), 0
	case "udp":
		if busy {
			return PathUntested, fmt.Sprintf("%s/%d is held on %s (by K3s's flannel on a running node); datagrams cannot be checked there, the rulesets are judged instead", p.Port.Proto, p.Port.Port, p.To), 0
		}
		if kind == "" {
			return PathUntested, "not probed", 0
		}
		if len(gots) > 0 {
			return PathOK, "", 0
		}
		if sent.state == "fail" {
			return PathFailed, fmt.Sprintf("%s could not send: %s", p.From, errText(sent.detail)), 0
		}
		if sent.kind == "" {
			return PathUntested, "no answer from the probe on " + p.From, 0
		}
		if target.exited && !target.ready {
			return PathUntested, p.To + "'s probe ended early", 0
		}
		return PathFailed, fmt.Sprintf("none of the %d datagrams %s sent arrived at %s", udpCount, p.From, p.To), 0
	}
	return PathUntested, "unknown protocol " + p.Port.Proto, 0
}

func (l probeLine) raw() string { return l.String() }

func largestGot(gs []probeLine, a netip.Addr) int {
	best := 0
	for _, g := range gs {
		if n := g.bytes + udpHeader(a); n > best {
			best = n
		}
	}
	return best
}

// udpHeader is the IP and UDP header size in front of a datagram's payload.
func udpHeader(a netip.Addr) int {
	if family(a) == 6 {
		return 48
	}
	return 28
}

// ifaceMTU is the MTU of the interface n routes a through (1500 when unknown).
func ifaceMTU(n *Node, a netip.Addr) int {
	if n != nil && n.Net != nil {
		if r := n.Net.RouteTo(a); r != nil {
			if i := n.Net.Interface(r.Dev); i != nil && i.MTU > 0 {
				return i.MTU
			}
		}
	}
	return 1500
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
