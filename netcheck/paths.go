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
func PlanProbes(c *Cluster) []Probe { return planProbes(c, newPathAddrs(c)) }

// planProbes is PlanProbes with the nodes' probe addresses from addrs.
func planProbes(c *Cluster, addrs *pathAddrs) []Probe {
	var out []Probe
	type pathKey struct {
		from, to, port int
		proto          string
	}
	seen := map[pathKey]bool{}
	n := len(c.Nodes)
	c.eachPath(func(p k3s.NodePort, i, j int) {
		key := pathKey{i, j, p.Port, p.Proto}
		if seen[key] {
			return
		}
		seen[key] = true
		d := (j - i + n) % n
		mtu := p.Overlay && (n <= mtuAllPairs || d == 1 || d == 2 || d == n/2)
		out = append(out, Probe{From: c.Nodes[i].Name, To: c.Nodes[j].Name, Addr: addrs.of(j, p), Port: p, MTU: mtu})
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
	// Exec runs script on the host as root with args as $1, $2, ..., feeding it stdin (nil:
	// none), and returns what it printed on standard output once it exited; a non-zero exit
	// is an error, with the output still returned. ctx bounds it (RunPaths gives every call a
	// deadline of seconds). Each call is short: RunPaths holds no session per host. step names
	// the call for logs and recordings: "start", "hand over", "read", "read and stop", "stop".
	Exec func(ctx context.Context, step, script string, stdin io.Reader, args ...string) (string, error)
	// Skip says why the host cannot take part ("" when it can).
	Skip string
	// Tool is the interpreter the host's facts found first, as they report it
	// (facts.Network.ProbeTools: /usr/bin/perl, /usr/bin/python3,
	// /usr/libexec/platform-python): the probe is then sent only that program (ProbeScript).
	// "" carries both and lets the host pick; PathOptions.Tool overrides it.
	Tool string
}

// PathOptions shape RunPaths.
type PathOptions struct {
	// ConnectTimeout bounds each TCP connect (default 1 s: a filtered port costs this).
	ConnectTimeout time.Duration
	// Limit is the remote program's own hard limit, after which it ends and removes its
	// output whatever happens (default 60 s plus 100 ms per host: the sweeps take longer with
	// more hosts).
	Limit time.Duration
	// Concurrency is how many hosts each sweep works on at once (default 32).
	Concurrency int
	// Tool forces an interpreter (perl, python3); "" picks perl, then python3.
	Tool string
	// MTU probes the overlay's UDP port with don't-fragment datagrams (on by default when
	// the cluster has an overlay).
	SkipMTU bool
}

func (o *PathOptions) defaults(hosts int) {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = time.Second
	}
	if o.Limit <= 0 {
		o.Limit = 60*time.Second + time.Duration(hosts)*100*time.Millisecond
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
}

const (
	udpCount  = 3
	mtuCopies = 3
	// readyWait bounds how long a host may take to start its probe and bind its listeners.
	readyWait = 10 * time.Second
	// sweepTimeout bounds a host's part of any other sweep (handing it probes, reading its
	// results: beyond the time its probes may take, ConnectTimeout + 2 s).
	sweepTimeout = 10 * time.Second
	// stopWait bounds the stop sweep after the run was stopped (Ctrl-C): what is not stopped
	// by then ends at its Limit.
	stopWait = 3 * time.Second
	// settle is how long after the last host was given its probes the first results are read:
	// probe-send.sh wakes the probe up (SIGUSR1), which starts them at once, and on a link
	// where every path is open the answers take a round trip or two.
	settle = 30 * time.Millisecond
	// receiptGrace is how long datagrams may take to arrive after the last sender is done
	// (it is spent only when some have not arrived).
	receiptGrace = 500 * time.Millisecond
	// ladderStep is the step of the MTU ladder, ladderFloor its lowest size (IPv6's minimum
	// link MTU; below it the path is broken for IPv6 anyway).
	ladderStep  = 4
	ladderFloor = 1280
)

// RunPaths runs the path check: on every host of hosts a probe (ProbeScript) binds test
// listeners for the ports the others will reach it on and goes on detached from the command
// that started it; once all listen, every host probes its paths to the others — TCP connects
// (ConnectTimeout each), three UDP datagrams 100 ms apart, and for the overlay port
// don't-fragment datagrams of the full interface MTU (a second round measures the largest size
// that gets through on the paths where full-size ones did not). Every step is a sweep of one
// short command per host, opt.Concurrency hosts at a time (start, hand over the probes, read
// the results, stop), so no SSH session is held per host while the probes run: at 500 hosts
// that held 500 sessions' buffers and goroutines (docs/preflight.md "Cost at scale"). The
// results are read from settle after the last host got its probes, each host's once its
// connects ended and every datagram probe sent its first copy (at most ConnectTimeout + 2 s
// after it got them); if some probe has no answer then, the hosts it involves once more,
// receiptGrace after the last host got its probes and once their round is over. Every probe is
// stopped at the end, also when ctx ends (then within stopWait), and the ports are free when
// RunPaths returns; one that cannot be reached ends itself after Limit. A port a host already
// holds (K3s running) takes no test listener: a TCP connect there judges the path, a UDP one is
// left to the rulesets (PathUntested).
//
// The steps (pathrun.go): start a probe per host, round one, round two (the MTU ladder), stop
// the probes, judge the results.
func RunPaths(ctx context.Context, c *Cluster, hosts []ProbeHost, opt PathOptions) *PathReport {
	opt.defaults(len(hosts))
	start := time.Now()
	r := newPathRun(ctx, c, hosts, opt)
	r.startProbes()
	r.roundOne()
	r.mtuLadder()
	r.stop()
	r.results()
	r.rep.Elapsed = time.Since(start)
	return r.rep
}

// judge turns what was printed about one probe into its status.
// tcp and sent are the source's answers (nil: none came), arrived whether any datagram of the
// probe reached the target.
func judge(p Probe, kind string, tcp, sent *answer, arrived bool, ls *ListenerState, target *hostRun, idx map[string]int) (string, string, int) {
	if ls == nil {
		return PathUntested, fmt.Sprintf("%s reported no listener for %s/%d", p.To, p.Port.Proto, p.Port.Port), 0
	}
	busy := ls.State == "busy"
	if ls.State == "error" {
		return PathUntested, fmt.Sprintf("%s could not open a test listener on %s/%d: %s", p.To, p.Port.Proto, p.Port.Port, ls.Detail), 0
	}
	switch p.Port.Proto {
	case "tcp":
		if tcp == nil {
			return PathUntested, "no answer from the probe on " + p.From, 0
		}
		ms := int(tcp.ms)
		switch tcp.state {
		case "ok":
			want := fmt.Sprintf("h%d", idx[p.To])
			if tcp.detail != want {
				return PathFailed, fmt.Sprintf("%s reached another host's test listener (%s) at %s: the address leads elsewhere", p.From, tcp.detail, p.Addr), ms
			}
			return PathOK, "", ms
		case "other":
			if busy {
				return PathOpen, fmt.Sprintf("connected to the process that holds %s/%d on %s", p.Port.Proto, p.Port.Port, p.To), ms
			}
			// The handshake completed (the kernel answers for the listener); only the
			// greeting that names the host did not come: the path is open.
			return PathOpen, fmt.Sprintf("connected to %s, whose test listener did not greet in time", p.Addr), ms
		case "timeout":
			return PathFailed, fmt.Sprintf("no answer within %d ms (packets dropped on the way or at %s)", ms, p.To), ms
		case "fail":
			if tcp.detail == "ECONNREFUSED" && busy {
				return PathFailed, "connection refused", ms
			}
			return PathFailed, errText(tcp.detail), ms
		}
		return PathUntested, "tcp " + tcp.state, 0
	case "udp":
		if busy {
			return PathUntested, fmt.Sprintf("%s/%d is held on %s (by K3s's flannel on a running node); datagrams cannot be checked there, the rulesets are judged instead", p.Port.Proto, p.Port.Port, p.To), 0
		}
		if kind == "" {
			return PathUntested, "not probed", 0
		}
		if arrived {
			return PathOK, "", 0
		}
		if sent != nil && sent.state == "fail" {
			return PathFailed, fmt.Sprintf("%s could not send: %s", p.From, errText(sent.detail)), 0
		}
		if sent == nil {
			return PathUntested, "no answer from the probe on " + p.From, 0
		}
		if target.exited && !target.ready {
			return PathUntested, p.To + "'s probe ended early", 0
		}
		return PathFailed, fmt.Sprintf("none of the %d datagrams %s sent arrived at %s", udpCount, p.From, p.To), 0
	}
	return PathUntested, "unknown protocol " + p.Port.Proto, 0
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
