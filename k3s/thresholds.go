package k3s

import "time"

// Clock skew between a node and the workstation (and so between nodes), judged by preflight's
// ClockSkew check and doctor's clock-skew finding alike: above ClockSkewWarn it is reported as a
// warning — etcd already complains when its members' clocks differ by more than a second
// (etcd-io/etcd server/etcdserver/api/rafthttp/probing_status.go) —, above ClockSkewError as an
// error: certificates K3s issues then look not yet valid or expired to other nodes, and etcd and
// token checks fail.
const (
	ClockSkewWarn  = 2 * time.Second
	ClockSkewError = time.Minute
)

// StallGrace is how long a node's uninitialized taint may stay before the bring-up supervisor
// and doctor call it a stall (F1, docs/failure-modes.md): on a real K3s v1.36.3 the embedded
// cloud controller removes it about 3.7 s after the Node registers
// (testdata/real-k3s-v1.36.3/timeline-default.txt), so a minute without it is no slow start.
// --stall-grace overrides it.
const StallGrace = 60 * time.Second
