package installer

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// testSupervisor is a supervisor of a server (re)started at started, without a connection:
// evaluate only reads probe states.
func testSupervisor(started time.Time) (*supervisor, *events.Recorder) {
	rec := &events.Recorder{}
	c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{{Name: "cp1", Address: "192.0.2.1", Role: inventory.RoleServer}}}}
	in := New(c, Options{StallGrace: time.Hour, Timeout: time.Hour}, rec)
	s := in.newSession(commandFor("apply"))
	hs := s.first
	hs.facts = &facts.Host{}
	hs.plan = &plan.HostPlan{Host: hs.host, Service: "k3s"}
	sup := &supervisor{s: s, hs: hs, em: in.emitter(events.PhaseSupervise), started: started,
		reached: map[k3s.Milestone]float64{}, gate: make(chan struct{})}
	return sup, rec
}

// upState is a probe state of a server that is up; heartbeat is its Ready condition's.
func upState(start, subnetMtime int64, heartbeat time.Time) *probeState {
	n := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.42.0.0/24"}}
	n.Name = "cp1"
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(heartbeat)}}
	st := &probeState{service: "active", readyz: "ok", node: n, start: start, subnetMtime: subnetMtime, subnetRaw: "FLANNEL_NETWORK=10.42.0.0/16"}
	if se, err := diagnose.ParseSubnetEnv("FLANNEL_NETWORK=10.42.0.0/16 FLANNEL_SUBNET=10.42.0.1/24 FLANNEL_MTU=1450 FLANNEL_IPMASQ=true"); err == nil {
		st.subnet = &se
	}
	return st
}

// After a restart, what the probe sees of the process before it counts for nothing: an old
// start time, an old subnet.env, a Ready condition without a heartbeat since the restart.
func TestSupervisorIgnoresStateFromBeforeTheRestart(t *testing.T) {
	now := time.Now()
	sup, _ := testSupervisor(now)
	old := now.Add(-10 * time.Minute)

	// The old process still runs: nothing is reached.
	if done, err := sup.evaluate(context.Background(), upState(old.Unix(), old.Unix(), old)); done || err != nil || len(sup.reached) != 0 {
		t.Fatalf("old process: done %v err %v reached %v", done, err, sup.reached)
	}
	// The new process runs, but subnet.env and the Ready condition are from before.
	if done, _ := sup.evaluate(context.Background(), upState(now.Unix(), old.Unix(), old)); done {
		t.Fatal("done with an old subnet.env and an old Ready condition")
	}
	for _, m := range []k3s.Milestone{k3s.MilestoneSubnetEnv, k3s.MilestoneNodeReady} {
		if _, ok := sup.reached[m]; ok {
			t.Errorf("%s reached from state before the restart", m)
		}
	}
	for _, m := range []k3s.Milestone{k3s.MilestoneServiceActive, k3s.MilestoneAPIReady, k3s.MilestoneTaintGone} {
		if _, ok := sup.reached[m]; !ok {
			t.Errorf("%s not reached from the new process", m)
		}
	}
	// Fresh subnet.env and heartbeat: done.
	if done, err := sup.evaluate(context.Background(), upState(now.Unix(), now.Unix()+1, now.Add(time.Second))); !done || err != nil {
		t.Fatalf("fresh state: done %v err %v reached %v", done, err, sup.reached)
	}
}

// Other nodes may join once the API answers, the node exists and its uninitialized taint is
// gone — before subnet.env and Ready.
func TestSupervisorOpensTheJoinGateBeforeSubnetEnv(t *testing.T) {
	now := time.Now()
	sup, _ := testSupervisor(now)
	gate := sup.gate
	st := upState(now.Unix(), 0, now.Add(-time.Hour))
	st.subnet, st.subnetRaw = nil, ""
	st.node.Spec.PodCIDR = ""
	st.node.Spec.Taints = []corev1.Taint{{Key: k3s.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	sup.evaluate(context.Background(), st)
	select {
	case <-gate:
		t.Fatal("gate open while the uninitialized taint is there")
	default:
	}
	st.node.Spec.Taints = nil
	if done, _ := sup.evaluate(context.Background(), st); done {
		t.Fatal("done without subnet.env")
	}
	select {
	case <-gate:
	default:
		t.Fatalf("gate still closed with API ready, node registered, taint gone: %v", sup.reached)
	}
}

// A joining node Ready only from before its restart is not done.
func TestNodeNotDoneNeedsAHeartbeatSinceTheRestart(t *testing.T) {
	since := time.Now()
	n := &corev1.Node{}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(since.Add(-time.Minute))}}
	h := &inventory.Host{Name: "w1", Role: inventory.RoleAgent}
	if why := nodeNotDone(n, h, false, "", false, since); why == "" {
		t.Fatal("a Ready condition from before the restart counted")
	}
	if why := nodeNotDone(n, h, false, "", false, time.Time{}); why != "" {
		t.Fatalf("without a restart: %s", why)
	}
	n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(since.Add(time.Second))
	if why := nodeNotDone(n, h, false, "", false, since); why != "" {
		t.Fatalf("fresh heartbeat: %s", why)
	}
}
