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
