// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/internal/golden"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

func taint(t *testing.T, s string) inventory.Taint {
	t.Helper()
	tt, err := inventory.ParseTaint(s)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// cluster: cp1 (server), w1 and w2 (agents); taints per host name.
func cluster(t *testing.T, cni inventory.CNI, taints map[string][]string) *inventory.Cluster {
	c := &inventory.Cluster{APIVersion: inventory.APIVersion, Kind: inventory.Kind, Metadata: inventory.Metadata{Name: "t"}}
	c.Spec.K3s.Version = "v1.36.3+k3s1"
	c.Spec.CNI = cni
	for _, h := range []inventory.Host{
		{Name: "cp1", Address: "10.0.0.10", Role: inventory.RoleServer},
		{Name: "w1", Address: "10.0.0.11", Role: inventory.RoleAgent},
		{Name: "w2", Address: "10.0.0.12", Role: inventory.RoleAgent},
	} {
		for _, s := range taints[h.Name] {
			h.Taints = append(h.Taints, taint(t, s))
		}
		c.Spec.Hosts = append(c.Spec.Hosts, h)
	}
	return c
}

// edgeTaints is the taint combination of the golden files: a custom NoExecute taint on the
// first server, the legacy master key, a valueless NoSchedule taint and a shared one.
var edgeTaints = map[string][]string{
	"cp1": {"dedicated=edge:NoExecute", "node-role.kubernetes.io/master:NoSchedule"},
	"w1":  {"gpu:NoSchedule", "dedicated=edge:NoExecute"},
	"w2":  {"site=far:PreferNoSchedule"},
}

func noFiles(string) ([]byte, error) { return nil, errors.New("no local files in this test") }

func render(t *testing.T, c *inventory.Cluster, read ReadFile) map[string][]byte {
	t.Helper()
	ms, err := Manifests(c, read)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, m := range ms {
		out[m.Name] = m.Content
	}
	return out
}

// TestGolden pins the manifest of every CNI and taint combination.
func TestGolden(t *testing.T) {
	chart := []byte("fake chart archive\x00\x01")
	read := func(p string) ([]byte, error) {
		if strings.HasSuffix(p, ".tgz") {
			return chart, nil
		}
		return noFiles(p)
	}
	cases := []struct {
		name   string
		cni    inventory.CNI
		taints map[string][]string
		cidr   string
		files  map[string]string // manifest name -> golden file
	}{
		{"flannel-standalone plain", inventory.CNI{Type: inventory.CNIFlannelStandalone}, nil, "",
			map[string]string{FileFlannel: "flannel-standalone.yaml"}},
		{"flannel-standalone tainted wireguard exclude", inventory.CNI{Type: inventory.CNIFlannelStandalone, Backend: "wireguard-native",
			KernelPolicy: inventory.KernelPolicyExclude, Flannel: &inventory.FlannelSpec{Version: "v0.25.7"}}, edgeTaints, "",
			map[string]string{FileFlannel: "flannel-standalone-taints-exclude.yaml"}},
		{"calico online plain", inventory.CNI{Type: inventory.CNICalico}, nil, "",
			map[string]string{FileCalicoOperator: "calico-operator-helmchart.yaml", FileCalicoInstallation: "calico-installation.yaml"}},
		{"calico tainted IPIP exclude", inventory.CNI{Type: inventory.CNICalico, Backend: "IPIP", KernelPolicy: inventory.KernelPolicyExclude,
			Calico: &inventory.CalicoSpec{Version: "v3.28.2"}}, edgeTaints, "",
			map[string]string{FileCalicoOperator: "calico-operator-helmchart-taints.yaml", FileCalicoInstallation: "calico-installation-taints-exclude.yaml"}},
		{"calico chart archive wireguard dual-stack", inventory.CNI{Type: inventory.CNICalico, Backend: "wireguard",
			Calico: &inventory.CalicoSpec{Manifest: "tigera-operator-v3.29.1.tgz"}}, nil, "10.42.0.0/16,2001:cafe:42::/56",
			map[string]string{FileCalicoOperator: "calico-operator-chartcontent.yaml", FileCalicoInstallation: "calico-installation-wireguard-dualstack.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(t, tc.cni, tc.taints)
			if tc.cidr != "" {
				c.Spec.K3s.Config.ClusterCIDR = inventory.StringList{tc.cidr}
			}
			got := render(t, c, read)
			if len(got) != len(tc.files) {
				t.Fatalf("rendered %d manifests, want %d", len(got), len(tc.files))
			}
			for name, file := range tc.files {
				b, ok := got[name]
				if !ok {
					t.Fatalf("no manifest %s", name)
				}
				golden.Assert(t, file, b)
				again := render(t, c, read)[name]
				if string(again) != string(b) {
					t.Fatalf("%s: rendering is not stable", name)
				}
			}
		})
	}
}

func TestNoManifestForEmbeddedFlannelAndNone(t *testing.T) {
	for _, typ := range []inventory.CNIType{"", inventory.CNIFlannel, inventory.CNINone} {
		if got := render(t, cluster(t, inventory.CNI{Type: typ}, edgeTaints), noFiles); len(got) != 0 {
			t.Errorf("cni.type %q rendered %d manifests", typ, len(got))
		}
	}
}

// docs splits a rendered manifest into its documents by kind.
func docs(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, d := range strings.Split(string(b), "\n---\n") {
		var k struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(d), &k); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, d)
		}
		if k.Kind != "" {
			out[k.Kind] = []byte(d)
		}
	}
	return out
}

// tolerates reports whether tols let a pod onto a node with the taint.
func tolerates(tols []corev1.Toleration, tt inventory.Taint) bool { return tt.ToleratedBy(tols) }

// TestFlannelToleratesEveryDeclaredTaint: F4 — both control-plane keys and every declared
// custom taint (NoExecute included) are tolerated; without them the upstream manifest would
// not tolerate the NoExecute one.
func TestFlannelToleratesEveryDeclaredTaint(t *testing.T) {
	c := cluster(t, inventory.CNI{Type: inventory.CNIFlannelStandalone, KernelPolicy: inventory.KernelPolicyExclude}, edgeTaints)
	c.Spec.K3s.Config.NodeTaint = inventory.StringList{"zone=cold:NoExecute"}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(docs(t, render(t, c, noFiles)[FileFlannel])["DaemonSet"], &ds); err != nil {
		t.Fatal(err)
	}
	tols := ds.Spec.Template.Spec.Tolerations
	must := []string{"dedicated=edge:NoExecute", "gpu:NoSchedule", "site=far:PreferNoSchedule", "zone=cold:NoExecute",
		"node-role.kubernetes.io/master:NoSchedule", "node-role.kubernetes.io/master:NoExecute", "node-role.kubernetes.io/control-plane:NoExecute"}
	for _, s := range must {
		if !tolerates(tols, taint(t, s)) {
			t.Errorf("kube-flannel-ds does not tolerate %s: %+v", s, tols)
		}
	}
	keys := map[string]bool{}
	for _, tl := range tols {
		keys[tl.Key] = true
	}
	if !keys[k3s.TaintControlPlane] || !keys[k3s.TaintMaster] {
		t.Errorf("both control-plane keys must be named explicitly: %+v", tols)
	}
	if tolerates(FlannelDefaultTolerations(), taint(t, "dedicated=edge:NoExecute")) {
		t.Error("the upstream default should NOT tolerate a NoExecute taint (docs/cni.md); the test would prove nothing")
	}
	if ds.Spec.Template.Spec.Containers[0].Image != "docker.io/flannel/flannel:"+DefaultFlannelVersion {
		t.Errorf("image %s", ds.Spec.Template.Spec.Containers[0].Image)
	}
	// exclude: the affinity requires the excluded label to be absent (or not true), in every term.
	terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		found := false
		for _, e := range term.MatchExpressions {
			if e.Key == ExcludedLabel && e.Operator == corev1.NodeSelectorOpNotIn && len(e.Values) == 1 && e.Values[0] == "true" {
				found = true
			}
		}
		if !found {
			t.Errorf("term %+v does not exclude %s=true", term, ExcludedLabel)
		}
	}
	// strict: no exclusion rendered.
	c.Spec.CNI.KernelPolicy = ""
	if strings.Contains(string(render(t, c, noFiles)[FileFlannel]), ExcludedLabel) {
		t.Error("strict policy renders the exclusion")
	}
}

// TestCalicoTolerationsKeepDefaults: the Installation's tolerations replace Calico's
// defaults, so the defaults must be there, plus one per declared taint.
func TestCalicoTolerationsKeepDefaults(t *testing.T) {
	c := cluster(t, inventory.CNI{Type: inventory.CNICalico, Backend: "vxlan"}, edgeTaints)
	var in installation
	if err := yaml.Unmarshal(docs(t, render(t, c, noFiles)[FileCalicoInstallation])["Installation"], &in); err != nil {
		t.Fatal(err)
	}
	tols := in.Spec.CalicoNodeDaemonSet.Spec.Template.Spec.Tolerations
	for _, d := range CalicoDefaultTolerations() {
		found := false
		for _, tl := range tols {
			if tl == d {
				found = true
			}
		}
		if !found {
			t.Errorf("Calico default toleration %+v missing: %+v", d, tols)
		}
	}
	for _, dt := range c.DeclaredTaints() {
		want := dt.Toleration()
		found := false
		for _, tl := range tols {
			if tl == want {
				found = true
			}
		}
		if !found {
			t.Errorf("no toleration for declared taint %s", dt)
		}
	}
	if len(c.DeclaredTaints()) != 4 {
		t.Errorf("declared taints %v, want 4 distinct", c.DeclaredTaints())
	}
	if got := in.Spec.CalicoNetwork.IPPools; len(got) != 1 || got[0].Encapsulation != "VXLAN" || got[0].CIDR != "10.42.0.0/16" {
		t.Errorf("ip pools %+v (backend vxlan, case-insensitive)", got)
	}
	if in.Spec.CalicoNodeDaemonSet.Spec.Template.Spec.Affinity != nil {
		t.Error("strict policy renders an affinity, which would replace Calico's")
	}
	for _, tl := range in.Spec.ControlPlaneTolerations {
		if tl.Key == "" {
			t.Errorf("control plane tolerations tolerate everything: %+v", tl)
		}
	}
	if !tolerates(in.Spec.ControlPlaneTolerations, taint(t, "dedicated=edge:NoExecute")) {
		t.Error("controlPlaneTolerations miss the declared taint")
	}
}

func TestCalicoSources(t *testing.T) {
	local := []byte("# the user's tigera-operator.yaml\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: tigera-operator\n")
	var asked string
	read := func(p string) ([]byte, error) { asked = p; return local, nil }
	c := cluster(t, inventory.CNI{Type: inventory.CNICalico, Calico: &inventory.CalicoSpec{Manifest: "ops/tigera-operator.yaml"}}, nil)
	c.Source = "/inv/cluster.yaml"
	got := render(t, c, read)
	if string(got[FileCalicoOperator]) != string(local) {
		t.Errorf("local manifest not placed unchanged:\n%s", got[FileCalicoOperator])
	}
	if asked != "/inv/ops/tigera-operator.yaml" {
		t.Errorf("read %q, want the path resolved against the inventory", asked)
	}

	// airgap without a local operator: refused, naming the field.
	c = cluster(t, inventory.CNI{Type: inventory.CNICalico}, nil)
	c.Spec.K3s.Install = inventory.Airgap
	if _, err := Manifests(c, noFiles); err == nil || !strings.Contains(err.Error(), "spec.cni.calico.manifest") {
		t.Errorf("airgap without manifest: %v", err)
	}
	// unreadable file: the error names the field.
	c = cluster(t, inventory.CNI{Type: inventory.CNICalico, Calico: &inventory.CalicoSpec{Manifest: "x.yaml"}}, nil)
	if _, err := Manifests(c, noFiles); err == nil || !strings.Contains(err.Error(), "spec.cni.calico.manifest") {
		t.Errorf("unreadable manifest: %v", err)
	}
	// chart archive: base64 chartContent, no repo.
	arch := []byte{0x1f, 0x8b, 0, 1, 2}
	c = cluster(t, inventory.CNI{Type: inventory.CNICalico, Calico: &inventory.CalicoSpec{Manifest: "op.tar.gz"}}, nil)
	out := string(render(t, c, func(string) ([]byte, error) { return arch, nil })[FileCalicoOperator])
	if !strings.Contains(out, "chartContent: "+base64.StdEncoding.EncodeToString(arch)) || strings.Contains(out, "repo:") {
		t.Errorf("chart archive HelmChart:\n%s", out)
	}
	// an unknown encapsulation is refused with the valid ones.
	if _, err := CalicoEncapsulation("GRE"); err == nil || !strings.Contains(err.Error(), "VXLANCrossSubnet") {
		t.Errorf("GRE: %v", err)
	}
}

func TestNodeDaemonSet(t *testing.T) {
	if w, ok := NodeDaemonSet(inventory.CNICalico); !ok || w.Namespace != "calico-system" || w.Name != "calico-node" {
		t.Errorf("calico: %+v", w)
	}
	if w, ok := NodeDaemonSet(inventory.CNIFlannelStandalone); !ok || w.Name != "kube-flannel-ds" {
		t.Errorf("flannel-standalone: %+v", w)
	}
	for _, typ := range []inventory.CNIType{inventory.CNIFlannel, inventory.CNINone, ""} {
		if Excludable(typ) {
			t.Errorf("%q is excludable", typ)
		}
	}
}
