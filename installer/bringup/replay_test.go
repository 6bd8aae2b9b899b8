// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The real K3s v1.36.3 captures (testdata/real-k3s-v1.36.3/README.md): every Node watch event
// of a default start (run A) and of an F1 start (run B), the Node objects, subnet.env, a
// journal of a crash loop and the log lines of the F1 start.
const captures = "../../testdata/real-k3s-v1.36.3/"

func readCapture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(captures + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nodeEvent is one line of node-events-*.jsonl: seconds since the capture began, and the
// watch event.
type nodeEvent struct {
	T     float64 `json:"t"`
	Event struct {
		Type   string      `json:"type"`
		Object corev1.Node `json:"object"`
	} `json:"event"`
}

func nodeEvents(t *testing.T, name string) []nodeEvent {
	t.Helper()
	var out []nodeEvent
	sc := bufio.NewScanner(strings.NewReader(string(readCapture(t, name))))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e nodeEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no events", name)
	}
	return out
}

func readNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	if err := json.Unmarshal(readCapture(t, name), &n); err != nil {
		t.Fatal(err)
	}
	return &n
}

// subnetLine is subnet.env as probe.sh prints it: its lines joined by spaces.
func subnetLine(t *testing.T) string {
	return strings.ReplaceAll(string(readCapture(t, "subnet.env")), "\n", " ")
}

// probeTick is one tick as probe.sh prints it.
type probeTick struct {
	service     string
	restarts    int
	start       int64
	subnetMtime int64 // 0: subnet.env missing
	subnet      string
	readyz      string // "": the probe did not ask (the API answered ok before)
	node        *corev1.Node
	nodeErr     string
	quick       bool
}

// lines renders the tick in probe.sh's format.
func (tk probeTick) lines(t *testing.T) []string {
	t.Helper()
	var out []string
	if tk.quick {
		out = append(out, "@quick")
	}
	out = append(out, fmt.Sprintf("@service %s %d", tk.service, tk.restarts))
	if tk.start != 0 {
		out = append(out, fmt.Sprintf("@start %d", tk.start))
	}
	if tk.subnetMtime != 0 {
		out = append(out, fmt.Sprintf("@subnet-mtime %d", tk.subnetMtime), "@subnet "+tk.subnet)
	} else {
		out = append(out, "@subnet-missing")
	}
	if tk.quick {
		return append(out, "@end")
	}
	if tk.readyz != "" {
		out = append(out, "@readyz "+tk.readyz)
	}
	switch {
	case tk.node != nil:
		b, err := json.Marshal(tk.node)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "@node "+string(b))
	case tk.nodeErr != "":
		out = append(out, "@node "+tk.nodeErr)
	}
	return append(out, "@end")
}

// parse runs the tick's lines through p and returns the observation.
func (tk probeTick) parse(t *testing.T, p *Parser) Observation {
	t.Helper()
	for _, l := range tk.lines(t) {
		if o, ok := p.Line(l); ok {
			return o
		}
	}
	t.Fatal("no @end")
	return Observation{}
}

// at is a probe tick seen at a moment of a capture.
type at struct {
	sec  float64 // since the capture's T0 (K3s start)
	tick probeTick
}

// replayRun builds the probe's ticks of a real start from its node watch events: the
// probe asks /readyz until it answers (apiReady s after T0), sees the unit active from
// active s, and subnet.env from subnetAt s (0: never). One tick at /readyz's answer, one per
// node event, one quick tick when subnet.env appears, and the ticks of extra, every node
// event's Node as it was then.
func replayRun(t *testing.T, events []nodeEvent, t0 time.Time, capT0, apiReady, active, subnetAt float64) []at {
	t.Helper()
	start := t0.Unix()
	tick := func(sec float64, n *corev1.Node) probeTick {
		tk := probeTick{service: "activating", start: start, readyz: "ok", node: n}
		if sec >= active {
			tk.service = "active"
		}
		if subnetAt > 0 && sec >= subnetAt {
			tk.subnetMtime, tk.subnet = t0.Add(time.Duration(subnetAt*float64(time.Second))).Unix(), subnetLine(t)
		}
		if n == nil {
			tk.nodeErr = `Error from server (NotFound): nodes "vm" not found`
		}
		return tk
	}
	out := []at{{sec: 1, tick: probeTick{service: "activating", start: start, nodeErr: ""}}}
	out[0].tick.readyz = "Get \"https://127.0.0.1:6443/readyz\": dial tcp 127.0.0.1:6443: connect: connection refused"
	out = append(out, at{sec: apiReady, tick: tick(apiReady, nil)})
	subnetSaid := false
	for i := range events {
		sec := events[i].T - capT0
		if subnetAt > 0 && !subnetSaid && sec > subnetAt {
			subnetSaid = true
			q := tick(subnetAt, nil)
			q.quick, q.nodeErr = true, ""
			out = append(out, at{sec: subnetAt, tick: q})
		}
		n := events[i].Event.Object
		out = append(out, at{sec: sec, tick: tick(sec, &n)})
	}
	return out
}

// withHeartbeat returns a copy of n whose Ready condition's heartbeat is hb.
func withHeartbeat(n *corev1.Node, hb time.Time) *corev1.Node {
	c := n.DeepCopy()
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == corev1.NodeReady {
			c.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(hb)
		}
	}
	return c
}
