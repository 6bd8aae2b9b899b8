// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	_ "embed"
	"strconv"
	"strings"

	"al.essio.dev/pkg/shellescape"

	"github.com/k3strap/k3strap/facts"
)

// The path probe: probe.sh starts probe.pl (Perl) or probe.py (Python 3) on a host; both speak
// the line protocol described in probe.pl. RunPaths drives one per host.

//go:embed probe.sh
var probeSh string

//go:embed probe.pl
var probePl string

//go:embed probe.py
var probePy string

//go:embed probe-send.sh
var probeSendSh string

//go:embed probe-collect.sh
var probeCollectSh string

//go:embed probe-stop.sh
var probeStopSh string

// probeSendScript is probe-send.sh without its comments: $1 the run directory, $2 a sequence
// number; the protocol lines on standard input.
func probeSendScript() string { return facts.WithoutComments(probeSendSh) }

// probeCollectScript is probe-collect.sh and then probe-stop.sh, without their comments: $1 the
// run directory, $2 the bytes of output already read, $3 how many 50 ms ticks to wait for mark
// $5 (sent, idle), $4 1 to stop the probe afterwards (else the stop part is not reached).
func probeCollectScript() string {
	return facts.WithoutComments(probeCollectSh) + facts.WithoutComments(probeStopSh)
}

// probeStopScript is probe-stop.sh without its comments: $1 the run directory.
func probeStopScript() string { return facts.WithoutComments(probeStopSh) }

// ProbeScript returns what a host runs for the path check: script, the launcher k3strap runs
// as root with `sh -c` (under 2 KB: the hard time limit in seconds, after which the program
// ends itself whatever happens to the SSH connection; an interpreter to force; the programs'
// lengths; probe.sh without its comments), and program, the bytes its standard input must
// start with, before the protocol's lines: probe.pl and probe.py for tool "" (probe.sh picks
// perl, then python3), only probe.pl for tool "perl", only probe.py for any other tool
// (python3, /usr/libexec/platform-python). The programs travel on standard input, not on the
// command line: one copy for all hosts instead of a 12 KB command line per host, which the
// SSH library also keeps a buffer of for the connection's life, and no 12 KB line in the
// host's process list or sudo's log (docs/preflight.md "Cost at scale").
func ProbeScript(limitSeconds int, tool string) (script, program string) {
	pl, py := probePl, probePy
	switch tool {
	case "":
	case "perl":
		py = ""
	default:
		pl = ""
	}
	var b strings.Builder
	b.WriteString("K3SP_PL_LEN=" + strconv.Itoa(len(pl)) + "\n")
	b.WriteString("K3SP_PY_LEN=" + strconv.Itoa(len(py)) + "\n")
	b.WriteString("K3SP_LIMIT=" + strconv.Itoa(limitSeconds) + "\n")
	if tool != "" {
		b.WriteString("K3SP_TOOL=" + shellescape.Quote(tool) + "\n")
	}
	b.WriteString(facts.WithoutComments(probeSh))
	return b.String(), pl + py
}

// probeLine is one line a probe printed, parsed.
type probeLine struct {
	kind string // listen, ready, detached, tcp, udp, mtu, got, probed, error
	// listen: proto, port, state (ok any busy error), detail
	proto, state, detail string
	port                 int
	// tcp/udp/mtu: id and state (ok other fail timeout sent emsgsize); ms; host id or errno
	id   string
	ms   int
	size int
	pmtu int
	// got: port, source address, id, bytes
	src   string
	bytes int
}

// answer is what judging keeps of a probe's own line (tcp, udp, mtu): its state, detail (the
// host id greeting it, or an errno name), milliseconds and, for mtu, the path MTU.
type answer struct {
	state, detail string
	ms, pmtu      int32
}

func (l probeLine) answer() answer {
	return answer{state: l.state, detail: l.detail, ms: int32(l.ms), pmtu: int32(l.pmtu)}
}

// parseProbeLine reads one line of the protocol; ok is false for a line it does not know.
func parseProbeLine(s string) (probeLine, bool) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return probeLine{}, false
	}
	// Every field is a copy (token): a kept probeLine must not hold the whole line, since a
	// run keeps one per path (33,497 at 500 nodes; docs/preflight.md "Cost at scale").
	for i := range f {
		f[i] = token(f[i])
	}
	l := probeLine{kind: f[0]}
	atoi := func(i int) int {
		if i < len(f) {
			n, _ := strconv.Atoi(f[i])
			return n
		}
		return 0
	}
	at := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	switch f[0] {
	case "ready", "probed":
		return l, true
	case "detached":
		// detached PID
		l.detail = at(1)
		return l, true
	case "error":
		l.detail = strings.Clone(strings.TrimSpace(strings.TrimPrefix(s, "error")))
		return l, true
	case "listen":
		if len(f) < 4 {
			return l, false
		}
		l.proto, l.port, l.state, l.detail = f[1], atoi(2), f[3], at(4)
		return l, true
	case "tcp":
		// tcp ID ok|other|fail|timeout MS [HOSTID|ERRNO]
		if len(f) < 4 {
			return l, false
		}
		l.id, l.state, l.ms, l.detail = f[1], f[2], atoi(3), at(4)
		return l, true
	case "udp":
		// udp ID sent N | udp ID fail ERRNO
		if len(f) < 4 {
			return l, false
		}
		l.id, l.state, l.detail = f[1], f[2], f[3]
		return l, true
	case "mtu":
		// mtu ID sent SIZE | mtu ID emsgsize SIZE PMTU | mtu ID fail ERRNO
		if len(f) < 4 {
			return l, false
		}
		l.id, l.state = f[1], f[2]
		switch l.state {
		case "sent":
			l.size = atoi(3)
		case "emsgsize":
			l.size, l.pmtu = atoi(3), atoi(4)
		default:
			l.detail = f[3]
		}
		return l, true
	case "got":
		// got PORT SRCADDR ID SEQ BYTES
		if len(f) < 6 {
			return l, false
		}
		l.port, l.src, l.id, l.bytes = atoi(1), f[2], f[3], atoi(5)
		return l, true
	}
	return l, false
}

// token returns the protocol's own words as constants and any other field as a copy.
func token(s string) string {
	for _, w := range [...]string{"ready", "probed", "detached", "error", "listen", "tcp", "udp", "mtu", "got",
		"ok", "any", "busy", "other", "fail", "timeout", "sent", "emsgsize", "-"} {
		if s == w {
			return w
		}
	}
	return strings.Clone(s)
}

// errText turns the probe's errno name into words for messages.
func errText(e string) string {
	switch e {
	case "ECONNREFUSED":
		return "connection refused (a reject rule, or nothing listening)"
	case "EHOSTUNREACH":
		return "no route to host (ICMP host unreachable, or a reject rule)"
	case "ENETUNREACH":
		return "network unreachable (no route to that address)"
	case "ETIMEDOUT":
		return "timed out"
	case "EACCES", "EPERM":
		return "refused by a local firewall rule (" + e + ")"
	case "EADDR":
		return "not an address"
	}
	return e
}
