// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
)

// requiredConfig is a kernel config with every option RequiredKernelFeatures and the flannel
// backends need, all =y.
func requiredConfig() map[string]string {
	cfg := map[string]string{"CONFIG_VXLAN": "y", "CONFIG_WIREGUARD": "y", "CONFIG_NET_IPIP": "y"}
	for _, v := range []int{1, 2} {
		for _, f := range RequiredKernelFeatures(v) {
			cfg[f.Config[0]] = "y"
		}
	}
	for _, f := range calicoFeatures() {
		cfg[f.Config[0]] = "y"
	}
	return cfg
}

// goodFacts returns the facts of a healthy Debian 12 amd64 host named name.
func goodFacts(name string) *facts.Host {
	id := sha256.Sum256([]byte(name))
	return &facts.Host{
		Name:          name,
		FormatVersion: facts.FormatVersion,
		OS:            facts.OSRelease{ID: "debian", VersionID: "12", PrettyName: "Debian GNU/Linux 12 (bookworm)"},
		Machine:       "x86_64",
		Arch:          "amd64",
		KernelRelease: "6.1.0-28-amd64",
		InitSystem:    "systemd",
		Sudo:          facts.Sudo{User: "root", Root: true, OK: true, Mode: "root"},
		Kernel: facts.Kernel{
			ConfigSource:  "/boot/config-6.1.0-28-amd64",
			Config:        requiredConfig(),
			ModuleSupport: true,
			SysModuleRead: true,
			BuiltinSource: "/lib/modules/6.1.0-28-amd64/modules.builtin",
			DepSource:     "/lib/modules/6.1.0-28-amd64/modules.dep",
			Namespaces:    []string{"cgroup", "ipc", "mnt", "net", "pid", "uts"},
		},
		Cgroup:          facts.Cgroup{Version: 2, Controllers: []string{"cpuset", "cpu", "io", "memory", "pids"}},
		MemTotalKiB:     4 << 20,
		DiskFreeKiB:     50 << 20,
		DiskPath:        "/var/lib",
		Listening:       []facts.Port{{Proto: "tcp", Port: 22, Addr: "0.0.0.0"}},
		DefaultRoute:    &facts.Route{Interface: "eth0", Gateway: "10.0.0.1"},
		Addresses:       []string{"10.0.0.10"},
		Hostname:        name,
		MachineID:       hex.EncodeToString(id[:16]),
		RemoteClock:     time.Unix(1767225600, 0),
		KeysRootMaxKeys: 1000000,
		K3s:             facts.K3sInstall{PrivilegedRead: true},
	}
}

func host(name string, role inventory.Role) inventory.Host {
	return inventory.Host{Name: name, Address: name + ".example.net", Role: role}
}

// newCluster returns a cluster of hosts with K3s v1.36.3+k3s1.
func newCluster(hosts ...inventory.Host) *inventory.Cluster {
	return &inventory.Cluster{
		APIVersion: inventory.APIVersion, Kind: inventory.Kind,
		Metadata: inventory.Metadata{Name: "test"},
		Spec: inventory.Spec{
			K3s:   inventory.K3s{Version: "v1.36.3+k3s1"},
			Hosts: hosts,
		},
	}
}

// input returns an Input with good facts for every host of c, passed through mutate.
func input(c *inventory.Cluster, mutate func(name string, f *facts.Host)) *Input {
	in := &Input{Cluster: c, Facts: map[string]*facts.Host{}}
	for _, h := range c.Spec.Hosts {
		f := goodFacts(h.Name)
		if mutate != nil {
			mutate(h.Name, f)
		}
		in.Facts[h.Name] = f
	}
	return in
}

// want is one expected finding: host, severity and substrings of message and fix.
type want struct {
	host string
	sev  finding.Severity
	msg  []string
	fix  []string
}

func errW(host string, msg ...string) want  { return want{host: host, sev: finding.Error, msg: msg} }
func warnW(host string, msg ...string) want { return want{host: host, sev: finding.Warning, msg: msg} }

func (w want) withFix(fix ...string) want { w.fix = fix; return w }

type checkCase struct {
	name string
	in   *Input
	want []want
}

func checkByID(t *testing.T, id string) Check {
	t.Helper()
	for _, c := range Checks() {
		if c.ID() == id {
			return c
		}
	}
	t.Fatalf("no check %q", id)
	return nil
}

// runCases runs one check on each case and compares the findings in order. Every finding must
// name the check and a host and carry a fix.
func runCases(t *testing.T, id string, cases []checkCase) {
	t.Helper()
	chk := checkByID(t, id)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := chk.Run(tc.in)
			if len(got) != len(tc.want) {
				var lines []string
				for _, f := range got {
					lines = append(lines, f.String())
				}
				t.Fatalf("got %d findings, want %d:\n%s", len(got), len(tc.want), strings.Join(lines, "\n"))
			}
			for i, w := range tc.want {
				f := got[i]
				if f.ID != id || f.Host != w.host || f.Severity != w.sev {
					t.Errorf("finding %d = %s (host %q), want [%s %s] %s", i, f, f.Host, w.sev, id, w.host)
				}
				if f.Fix() == "" || f.Message == "" {
					t.Errorf("finding %d has no message or fix: %+v", i, f)
				}
				for _, s := range w.msg {
					if !strings.Contains(f.Message, s) {
						t.Errorf("finding %d message %q lacks %q", i, f.Message, s)
					}
				}
				for _, s := range w.fix {
					if !strings.Contains(f.Fix(), s) {
						t.Errorf("finding %d fix %q lacks %q", i, f.Fix(), s)
					}
				}
			}
		})
	}
}
