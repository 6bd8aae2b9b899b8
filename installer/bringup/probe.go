// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/diagnose"
)

// Observation is one tick of the bring-up probe (installer/scripts/probe.sh): what the server
// showed at one moment.
type Observation struct {
	// Service is `systemctl is-active` of the unit ("active", "activating", "failed", ...);
	// Restarts its NRestarts.
	Service  string
	Restarts int
	// Start is the unit's main process start (ExecMainStartTimestamp, epoch seconds, host
	// clock; 0 = unknown, e.g. no systemd); SubnetMtime subnet.env's modification time
	// (likewise; 0 = unknown or missing).
	Start       int64
	SubnetMtime int64
	// SubnetRaw is subnet.env's text, its lines joined by spaces ("" = missing); Subnet the
	// parsed file (nil when missing or not parseable).
	SubnetRaw string
	Subnet    *diagnose.SubnetEnv
	// Readyz is the API's /readyz answer ("ok" once ready). The probe stops asking once it
	// answered ok (until the API refuses again), so the Parser carries it over ticks.
	Readyz string
	// Node is the server's Node (nil when not fetched or not registered); NodeErr what kubectl
	// said instead.
	Node    *corev1.Node
	NodeErr string
	// Quick is a tick the probe made at once when subnet.env appeared during a nap: only the
	// service and subnet.env; the milestones it completes count, nothing is judged from it,
	// and the probe expects no nap for it.
	Quick bool
}

// Taint returns the observed Node's taint with key (the last one, should the Node carry it
// twice), nil when it has none or no Node was observed.
func (o Observation) Taint(key string) *corev1.Taint {
	if o.Node == nil {
		return nil
	}
	var found *corev1.Taint
	for i := range o.Node.Spec.Taints {
		if o.Node.Spec.Taints[i].Key == key {
			found = &o.Node.Spec.Taints[i]
		}
	}
	return found
}

// Parser assembles the probe's lines into Observations. The zero value is ready to use; keep
// one for a whole watch (the /readyz answer carries over ticks and probe restarts).
type Parser struct {
	cur Observation
}

// Line feeds one line of the probe's output. At the tick's end ("@end") it returns the tick's
// Observation and true; unknown lines and unparseable values are ignored (a field keeps its
// zero value), never an error: the probe's output is judged, not trusted.
func (p *Parser) Line(line string) (Observation, bool) {
	tag, rest, _ := strings.Cut(line, " ")
	o := &p.cur
	switch tag {
	case "@end":
		got := p.cur
		p.cur = Observation{Readyz: got.Readyz}
		return got, true
	case "@service":
		f := strings.Fields(rest)
		if len(f) > 0 {
			o.Service = f[0]
		}
		if len(f) > 1 {
			o.Restarts, _ = strconv.Atoi(f[1])
		}
	case "@start":
		o.Start, _ = strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	case "@subnet-mtime":
		o.SubnetMtime, _ = strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	case "@subnet":
		o.SubnetRaw = rest
		if se, err := diagnose.ParseSubnetEnv(rest); err == nil {
			o.Subnet = &se
		}
	case "@quick":
		o.Quick = true
	case "@subnet-missing":
		o.SubnetRaw, o.Subnet = "", nil
	case "@readyz":
		o.Readyz = strings.TrimSpace(rest)
	case "@node":
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "{") {
			var n corev1.Node
			if err := json.Unmarshal([]byte(rest), &n); err == nil {
				o.Node = &n
				return Observation{}, false
			}
		}
		o.NodeErr = rest
	}
	return Observation{}, false
}

// Pending is the tick being assembled (what the probe said since its last "@end").
func (p *Parser) Pending() Observation { return p.cur }

// GatePoll is how long the probe naps between ticks while the Node carries the uninitialized
// taint, and GatePolls the most naps at that pace in one watch: the taint goes about 3.7 s
// after the Node registers (testdata/real-k3s-v1.36.3/timeline-default.txt) and its removal
// opens the join gate, so 150 looks at 0.1 s cover it with room, and a cluster in F1 (the
// taint stays) falls back to the poll interval after about 15 s plus the looks' own time.
const (
	GatePoll  = 100 * time.Millisecond
	GatePolls = 150
)

// ProbeAttempts is how many times in a row the probe is started when it goes quiet or ends
// without a verdict before the watch gives up with that cause.
const ProbeAttempts = 3

// ProbeQuiet is how long the probe may deliver no tick before it counts as quiet: five poll
// intervals, at least 20 s — a tick runs systemctl and up to two kubectl calls of at most 5 s
// each (probe.sh), and on the real lane a loaded host (K3s starting beside other tests on two
// cores) once took 15.6 s for one.
func ProbeQuiet(interval time.Duration) time.Duration {
	return max(20*time.Second, 5*interval)
}

// QuietError is the cause a probe is stopped with when it delivered no tick for Quiet.
type QuietError struct{ Quiet time.Duration }

func (e *QuietError) Error() string {
	return fmt.Sprintf("the probe delivered nothing for %s", e.Quiet.Round(100*time.Millisecond))
}

// NapLine is the line the watch writes to the probe's standard input after a full tick: how
// long to nap before the next one, in seconds ("0.40\n").
func NapLine(nap time.Duration) string {
	return strconv.FormatFloat(nap.Seconds(), 'f', 2, 64) + "\n"
}
