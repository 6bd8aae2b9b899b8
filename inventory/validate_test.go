// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/k3s"
)

// wantErr is one expected problem: exact position and host, and substrings of message and fix.
type wantErr struct {
	line, col int
	host      string
	msg       string
	fix       string // substring of Fix; "" asserts nothing about the fix
}

// loadErrors loads file and returns its ErrorList, failing the test when Load succeeds or fails
// with another kind of error.
func loadErrors(t *testing.T, file string, opts LoadOptions) ErrorList {
	t.Helper()
	c, err := Load(file, opts)
	if err == nil {
		t.Fatalf("Load(%s) succeeded, want errors", file)
	}
	if c != nil {
		t.Errorf("Load(%s) returned a cluster together with an error", file)
	}
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Load(%s) error is %T (%v), want ErrorList", file, err, err)
	}
	return list
}

func checkErrors(t *testing.T, file string, got ErrorList, want []wantErr) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d problems, want %d:\n%v", file, len(got), len(want), got)
	}
	for i := 0; i < len(got) && i < len(want); i++ {
		g, w := got[i], want[i]
		if g.File != file {
			t.Errorf("problem %d: File = %q, want %q", i, g.File, file)
		}
		if g.Line != w.line || g.Column != w.col || g.Host != w.host {
			t.Errorf("problem %d at %d:%d host %q, want %d:%d host %q: %v", i, g.Line, g.Column, g.Host, w.line, w.col, w.host, g)
		}
		if !strings.Contains(g.Message, w.msg) {
			t.Errorf("problem %d message %q does not contain %q", i, g.Message, w.msg)
		}
		if !strings.Contains(g.Fix, w.fix) {
			t.Errorf("problem %d fix %q does not contain %q", i, g.Fix, w.fix)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		file string
		want []wantErr
	}{
		{"testdata/errors/hosts.yaml", []wantErr{
			{10, 13, "CP_1", `host name "CP_1" is not a valid node name (DNS-1123 subdomain)`, "e.g. cp-1"},
			{13, 13, "cp1", `duplicate host name "cp1" (also spec.hosts[0], line 7)`, "unique name"},
			{17, 16, "w1", "address 10.0.0.1 port 22 is already used by host cp1", "its own address"},
			{18, 13, "w1", `unknown role "worker"`, "write role: agent"},
			{22, 7, "w2", `unknown field "adress" in spec.hosts[4]`, "did you mean address?"},
			{24, 16, "w3", `address "10.0.0.6:22" is neither an IP address nor a DNS name`, "write address: 10.0.0.6 and ssh: {port: 22}"},
			{26, 7, "", "spec.hosts[6] has no name", "add name:"},
		}},
		{"testdata/errors/noserver.yaml", []wantErr{
			{6, 3, "", "the cluster has agents (a1, a2) but no server", "set role: server on at least one host"},
		}},
		{"testdata/errors/types.yaml", []wantErr{
			{7, 11, "", `spec.ssh.port must be a whole number, not a string`, "whole number"},
			{8, 21, "", `spec.ssh.connectTimeout must be a duration, not a string`, "10s"},
			{10, 12, "", "spec.k3s.token must be a single value, not a list", "one value"},
			{12, 33, "", "spec.k3s.config.disable-cloud-controller must be true or false, not a list", "true or false"},
			{13, 16, "", "spec.k3s.config.tls-san must be a string or a list of strings, not a mapping", "YAML list"},
			{17, 13, "cp1", "spec.hosts[0].role must be a single value, not a list", "one value"},
			{18, 15, "cp1", "spec.hosts[0].labels must be a mapping, not a list", "key: value"},
			{20, 16, "cp1", `spec.hosts[0].ssh.agent must be true or false, not a string`, "true or false"},
		}},
		{"testdata/errors/taints.yaml", []wantErr{
			{11, 11, "cp1", `taint "dedicated=edge" has no effect`, "write taints as key[=value]:Effect"},
			{12, 11, "cp1", `taint "dedicated=edge:noschedule" has unknown effect "noschedule"`, "effects are case-sensitive: write NoSchedule"},
			{13, 11, "cp1", `taint "bad key=x:NoSchedule" has an invalid key "bad key"`, "write taints as"},
			{15, 11, "cp1", "taint key gpu with effect NoSchedule is declared twice (also taints[3] gpu=a:NoSchedule)", "one taint per key and effect"},
			{18, 9, "cp1", `label key "Bad Key" is invalid`, "[prefix/]name"},
			{19, 15, "cp1", `label tier has an invalid value "not valid!"`, "63"},
			{20, 9, "cp1", "label node-role.kubernetes.io/worker is in the kubernetes.io / k8s.io namespace, which a kubelet may not set on its own node", "example.com/role"},
		}},
		{"testdata/errors/k3sconfig.yaml", []wantErr{
			{8, 7, "", "unknown K3s config key flanel-backend", "did you mean flannel-backend?"},
			{9, 7, "", "K3s config key node-name: node-name is the host's name", "hosts[].name"},
			{10, 7, "", "K3s config key node-label: node labels are managed by k3strap", "hosts[].labels"},
			{11, 7, "", "K3s config key node-taint: node taints are managed by k3strap", "hosts[].taints"},
			{12, 7, "", "K3s config key token: the join token is managed by k3strap", "spec.k3s.token"},
			{13, 7, "", "K3s config key server: k3strap sets server and cluster-init itself", "order spec.hosts"},
			{14, 7, "", "K3s config key cluster-init: k3strap sets server and cluster-init itself", "remove it"},
			{15, 14, "", "K3s config key debug is a list; it takes true or false", "debug:"},
			{16, 23, "", "K3s config key kube-proxy-arg is a mapping; it takes one value or a list of values", "kube-proxy-arg:"},
			{18, 32, "", "K3s config key service-node-port-range is a list; it takes one value", "one value"},
			{19, 7, "", "K3s config key log has no value", "remove the key"},
			{26, 11, "cp1", "K3s config key cluster-cidr must be the same on every server", "spec.k3s.config"},
			{33, 11, "a1", "K3s config key etcd-snapshot-retention is a server flag, and this host is an agent", "spec.k3s.config"},
			{35, 11, "a1", "unknown K3s config key nod-ip", "did you mean node-ip?"},
		}},
		{"testdata/errors/k3s.yaml", []wantErr{
			{7, 14, "", `K3s version "1.31.4" is not a K3s release`, "write v1.31.4+k3s1"},
			{8, 5, "", "spec.k3s.version and spec.k3s.channel are both set", "not both"},
			{8, 5, "", "a channel only applies to online installs", "remove channel"},
			{11, 7, "", `unknown airgap architecture "x86_64"`, "write amd64"},
			{14, 9, "", "spec.k3s.airgap.arm64 has no binary", "k3s-arm64"},
			{14, 17, "", "airgap images archive " + abs("testdata/errors/images.tar.zst") + " does not exist", "relative to the inventory file's directory"},
			{16, 17, "", "airgap binary " + abs("testdata/errors/does-not-exist/k3s") + " does not exist", "relative to the inventory file's directory"},
			{17, 22, "", "cloudController: external needs spec.k3s.externalCloudController.manifest", "cloudController: embedded"},
			{19, 24, "", "flannel-backend: vxlan conflicts with cni.type: calico", "remove flannel-backend"},
			{20, 7, "", "disable-cloud-controller: false contradicts cloudController: external", "remove disable-cloud-controller"},
			{23, 14, "", `"vxlan" is not a calico backend`, "did you mean VXLAN?"},
			{24, 19, "", `unknown kernelPolicy "lenient"`, "strict"},
			{30, 15, "cp1", "SSH port 70000 is out of range", "between 1 and 65535"},
		}},
		{"testdata/errors/doc.yaml", []wantErr{
			{1, 13, "", `apiVersion "k3strap.io/v1beta1" is not supported`, "apiVersion: k3strap.io/v1alpha1"},
			{2, 7, "", `kind "Kluster" is not supported`, "kind: Cluster"},
			{4, 9, "", `cluster name "Edge_Prod" is not a DNS-1123 label`, "e.g. edge-prod"},
			{5, 1, "", `unknown field "hosts" in the document`, "move hosts under spec:"},
			{6, 1, "", "the inventory declares no hosts", "role: server"},
			{8, 5, "", `unknown field "keypath" in spec.ssh`, "did you mean keyPath?"},
			{10, 5, "", `duplicate key "user" (first at line 9)`, "remove one"},
			{11, 3, "", `unknown field "cloudController" in spec`, "move cloudController under spec.k3s:"},
		}},
		{"testdata/errors/cloud.yaml", []wantErr{
			{7, 14, "", `K3s channel "edge" is not a release channel`, "stable"},
			{8, 14, "", `unknown install mode "usb"`, "install: online or install: airgap"},
			{9, 22, "", `unknown cloudController "none"`, "embedded, external or disabled"},
			{14, 14, "", `"wireguard" is not a flannel backend`, "vxlan, host-gw, wireguard-native"},
			{15, 5, "", "cni.calico is set but cni.type is flannel", "cni.type: calico"},
		}},
		{"testdata/errors/cloud2.yaml", []wantErr{
			{7, 5, "", "externalCloudController is set but cloudController is embedded", "cloudController: external"},
			{11, 24, "", "flannel-backend: none turns off the pod network of cni.type: flannel", "cni.type: none"},
		}},
		{"testdata/errors/external.yaml", []wantErr{
			{10, 17, "", "cloud controller manifest " + abs("testdata/errors/missing-ccm.yaml") + " does not exist", "correct the path"},
		}},
		{"testdata/errors/syntax.yaml", []wantErr{
			{6, 0, "", "YAML syntax error: ", "indentation"},
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			checkErrors(t, tt.file, loadErrors(t, tt.file, LoadOptions{}), tt.want)
		})
	}
}

// The same problems are found whether or not an override layer is present.
func TestLoadErrorsWithOverrideLayer(t *testing.T) {
	got := loadErrors(t, "testdata/errors/hosts.yaml", LoadOptions{Override: func(*Cluster) ErrorList { return nil }})
	if len(got) != 7 {
		t.Errorf("got %d problems, want 7:\n%v", len(got), got)
	}
}

func TestSkipFileChecks(t *testing.T) {
	if _, err := Load("testdata/errors/external.yaml", LoadOptions{SkipFileChecks: true}); err != nil {
		t.Errorf("with SkipFileChecks: %v", err)
	}
	c := &Cluster{}
	c.Spec.K3s.Install = Airgap
	c.Spec.K3s.Airgap = map[string]AirgapArtifacts{"arm64": {Binary: "/nonexistent/k3s-arm64"}}
	errsWith := c.ValidateWith(ValidateOptions{SkipFileChecks: true})
	errsWithout := c.Validate()
	if len(errsWithout) != len(errsWith)+1 {
		t.Errorf("file check should add exactly one problem: with %d, without %d\n%v", len(errsWith), len(errsWithout), errsWithout)
	}
}

// A cluster built in code (no file, no positions) validates with problems that carry no
// position, and a valid one has none.
func TestValidateInCode(t *testing.T) {
	c := &Cluster{APIVersion: APIVersion, Kind: Kind, Metadata: Metadata{Name: "code"}}
	c.Spec.Hosts = []Host{{Name: "cp1", Address: "192.0.2.1", Role: RoleServer}}
	c.ApplyDefaults()
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("valid in-code cluster: %v", errs)
	}
	c.Spec.Hosts = append(c.Spec.Hosts, Host{Name: "w1", Address: "192.0.2.2", Role: RoleAgent,
		K3s: HostK3s{Config: K3sConfig{ClusterCIDR: StringList{"10.9.0.0/16"}}}})
	errs := c.Validate()
	if len(errs) != 1 {
		t.Fatalf("got %v, want one problem", errs)
	}
	e := errs[0]
	if e.Line != 0 || e.File != "" || e.Host != "w1" || e.Path != "spec.hosts[1].k3s.config.cluster-cidr" {
		t.Errorf("problem = %#v", *e)
	}
	if !strings.Contains(e.Message, "server flag") {
		t.Errorf("message %q", e.Message)
	}
}

// A server-only key in the cluster-wide config is fine (HostConfig drops it for agents); a list
// given for a list flag in the free-form map is fine; an append key ("+") is looked up without
// the suffix, and a managed key cannot be smuggled in with one.
func TestK3sConfigRoles(t *testing.T) {
	c := &Cluster{APIVersion: APIVersion, Kind: Kind, Metadata: Metadata{Name: "roles"}}
	c.Spec.K3s.Config = K3sConfig{Extra: map[string]any{
		"etcd-snapshot-retention": "10", "kube-proxy-arg": []any{"a=b"}, "kubelet-arg+": []any{"x=y"},
		"selinux": true, "debug": "true",
	}}
	c.Spec.Hosts = []Host{
		{Name: "cp1", Address: "192.0.2.1", Role: RoleServer},
		{Name: "w1", Address: "192.0.2.2", Role: RoleAgent, K3s: HostK3s{Config: K3sConfig{Extra: map[string]any{"node-label+": []any{"a=b"}}}}},
	}
	c.ApplyDefaults()
	errs := c.Validate()
	if len(errs) != 1 || errs[0].Path != "spec.hosts[1].k3s.config.node-label+" || !strings.Contains(errs[0].Fix, "hosts[].labels") {
		t.Fatalf("got %v, want one problem for node-label+", errs)
	}
	if _, ok := c.HostConfig(&c.Spec.Hosts[1]).Extra["etcd-snapshot-retention"]; ok {
		t.Errorf("HostConfig kept a server-only key for an agent")
	}
}

// Every typed K3sConfig field is a K3s flag of the kind its Go type implies.
func TestTypedConfigKeysAreKnownFlags(t *testing.T) {
	tbl := flagTable()
	fi := fieldsOf(reflect.TypeOf(K3sConfig{}))
	if len(fi.names) < 20 {
		t.Fatalf("only %d typed fields found", len(fi.names))
	}
	for _, name := range fi.names {
		kind, ok := tbl.Lookup("server", name)
		if !ok {
			t.Errorf("typed field %s is not a K3s server flag", name)
			continue
		}
		ft := reflect.TypeOf(K3sConfig{}).Field(fi.byName[name]).Type
		want := map[string]string{"StringList": "list", "*bool": "bool", "string": "string", "Secret": "string"}[strings.TrimPrefix(ft.String(), "inventory.")]
		if string(kind) != want {
			t.Errorf("typed field %s is %s, flag table says %s", name, ft, kind)
		}
	}
}

func TestKindProblem(t *testing.T) {
	tests := []struct {
		kind k3s.Kind
		val  any
		want string // "" = accepted
	}{
		{k3s.Bool, true, ""},
		{k3s.Bool, "false", ""},
		{k3s.Bool, 1, ""}, // K3s parses --flag=1 with strconv.ParseBool
		{k3s.Bool, "yes", "takes true or false"},
		{k3s.Bool, []any{true}, "is a list"},
		{k3s.String, "x", ""},
		{k3s.String, 10, ""},
		{k3s.String, []any{"a"}, "is a list"},
		{k3s.String, map[string]any{"a": "b"}, "is a mapping"},
		{k3s.List, "a", ""},
		{k3s.List, []any{"a", 1, true}, ""},
		{k3s.List, []any{"a", []any{"b"}}, "not a plain value"},
		{k3s.List, []any{nil}, "empty list item"},
		{k3s.List, map[string]any{"a": "b"}, "is a mapping"},
		{k3s.List, nil, "has no value"},
	}
	for _, tt := range tests {
		msg, _ := kindProblem("k", tt.kind, tt.val)
		if (tt.want == "") != (msg == "") || !strings.Contains(msg, tt.want) {
			t.Errorf("kindProblem(%s, %#v) = %q, want %q", tt.kind, tt.val, msg, tt.want)
		}
	}
}

func TestKubeletLabel(t *testing.T) {
	tests := map[string]bool{ // key -> accepted for node-label
		"tier": true, "example.com/role": true, "topology.kubernetes.io/zone": true,
		"node.kubernetes.io/pool": true, "sub.node.kubernetes.io/x": true, "kubelet.kubernetes.io/x": true,
		"kubernetes.io/hostname": true, "node-role.kubernetes.io/worker": false, "app.kubernetes.io/name": false,
		"example.k8s.io/x": false, "kubernetes.io/role": false,
	}
	for key, ok := range tests {
		if got := !kubernetesLabel(key) || kubeletLabel(key); got != ok {
			t.Errorf("label %s accepted = %v, want %v", key, got, ok)
		}
	}
}
