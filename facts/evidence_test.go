// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEvidence(t *testing.T) {
	node, err := os.ReadFile(filepath.Join("..", "testdata", "real-k3s-v1.36.3", "node-f1.json"))
	if err != nil {
		t.Fatal(err)
	}
	oneLine := strings.ReplaceAll(string(node), "\n", "")
	out := "@journal\nfirst line\n\nsecond line\n@pods\n{\"items\":[{\"metadata\":{\"name\":\"coredns-1\",\"namespace\":\"kube-system\"},\"status\":{\"phase\":\"Pending\"}}]}\n" +
		"@node\n" + oneLine + "\n@config\n@file /etc/rancher/k3s/config.yaml\ndisable-cloud-controller: true\n" +
		"@file /etc/rancher/k3s/config.yaml.d/10-extra.yaml\nkubelet-arg:\n- cloud-provider=external\n@subnet missing\n@service active\n@end\n"
	ev := ParseEvidence([]byte(out))
	if strings.Join(ev.Journal, "|") != "first line|second line" {
		t.Errorf("journal %q", ev.Journal)
	}
	if len(ev.Pods) != 1 || ev.Pods[0].Name != "coredns-1" || ev.Pods[0].Status.Phase != "Pending" {
		t.Errorf("pods %+v", ev.Pods)
	}
	if ev.Node == nil || ev.Node.Name == "" || len(ev.Node.Spec.Taints) == 0 {
		t.Fatalf("node from the real F1 capture not parsed: %+v", ev.Node)
	}
	if len(ev.ConfigFiles) != 2 || !strings.Contains(ev.ConfigFiles[1], "cloud-provider=external") {
		t.Errorf("config files %q", ev.ConfigFiles)
	}
	if ev.SubnetEnvPresent == nil || *ev.SubnetEnvPresent || ev.ServiceState != "active" {
		t.Errorf("subnet %v service %q", ev.SubnetEnvPresent, ev.ServiceState)
	}
	if empty := ParseEvidence(nil); empty.Node != nil || empty.SubnetEnvPresent != nil {
		t.Errorf("empty output parsed as %+v", empty)
	}
}

// The evidence script never prints a secret config key.
func TestEvidenceScriptFiltersSecrets(t *testing.T) {
	for _, k := range []string{"token", "agent-token", "datastore-endpoint", "etcd-s3-secret-key"} {
		if !strings.Contains(EvidenceScript, k) {
			t.Errorf("EvidenceScript does not filter %s", k)
		}
	}
}
