// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// realSingleServer is one real-K3s server; Extra.config adds cluster config keys.
const realSingleServer = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: real
spec:
{{template "spec-k3s-real" .}}
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
`

// TestRealF1 (real K3s): F1 on a real kubelet. With preflight's CloudController check ignored,
// the embedded cloud controller disabled and the kubelet told cloud-provider=external, the
// supervisor diagnoses F1 and apply exits 5; the evidence is the node's arguments (the
// kubelet's command line as the K3s journal shows it, the disabled cloud controller from the
// node's k3s.io/node-args). (K3s's own "waiting for removal" lines come from its network
// policy controller, which on these hosts can start minutes later, and the Pending pods exist
// only once K3s deployed its manifests, which under load can come after the diagnosis: they
// are logged, not required.) The taint is really there and
// stays (the API), flannel still wrote subnet.env (the host).
func TestRealF1(t *testing.T) {
	c := newRealCluster(t, 1)
	c.writeInventory(realSingleServer, f1Config)
	r := c.k3strap(5*time.Minute, "apply", "--ignore-preflight-errors=CloudController", "--stall-grace=20s")
	defer r.dump(t)
	if r.code != 5 {
		t.Fatalf("apply exited %d, want 5 (bring-up)", r.code)
	}
	var diag *events.ErrorInfo
	for _, e := range r.ofType(events.Error) {
		if e.Error.Diagnosis != "" {
			diag = e.Error
		}
	}
	if diag == nil || diag.Diagnosis != "F1-cloud-controller" {
		t.Fatalf("diagnosis %+v, want F1-cloud-controller", diag)
	}
	ev := strings.Join(diag.Evidence, "\n")
	t.Logf("F1 evidence:\n%s", ev)
	for _, want := range []string{"(journal: ", "Running kubelet --cloud-provider=external", "disable-cloud-controller: true, node cp1 annotation k3s.io/node-args"} {
		if !strings.Contains(ev, want) {
			t.Errorf("F1 evidence lacks %q:\n%s", want, ev)
		}
	}
	if taints := c.exec(0, "k3s", "kubectl", "get", "node", "cp1", "-o", "jsonpath={.spec.taints[*].key}"); !strings.Contains(taints, "node.cloudprovider.kubernetes.io/uninitialized") {
		t.Errorf("the real node carries no uninitialized taint: %q", taints)
	}
	if out := c.exec(0, "sh", "-c", "test -s /run/flannel/subnet.env && echo present"); out != "present" {
		t.Error("flannel wrote no subnet.env although K3s v1.36 does not wait for the taint")
	}
}
