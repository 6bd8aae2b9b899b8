// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func parseFile(t *testing.T, name string) *Host {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	h, err := Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return h
}

func TestParseAlpineOpenRC(t *testing.T) {
	h := parseFile(t, "alpine-openrc.txt")
	eq(t, "Arch", h.Arch, "arm64")
	eq(t, "Machine", h.Machine, "aarch64")
	eq(t, "KernelRelease", h.KernelRelease, "6.6.58-0-lts")
	eq(t, "OS", h.OS, OSRelease{ID: "alpine", VersionID: "3.20.3", PrettyName: "Alpine Linux v3.20"})
	eq(t, "InitSystem", h.InitSystem, "openrc")
	eq(t, "Sudo", h.Sudo, Sudo{User: "alpine", OK: true, Mode: "nopasswd"})
	eq(t, "ConfigSource", h.Kernel.ConfigSource, "/boot/config-6.6.58-0-lts")
	eq(t, "CONFIG_VXLAN", h.Kernel.Config["CONFIG_VXLAN"], "m")
	eq(t, "CONFIG_LOCALVERSION", h.Kernel.Config["CONFIG_LOCALVERSION"], "-lts")
	eq(t, "ModuleSupport", h.Kernel.ModuleSupport, true)
	eq(t, "Loaded", h.Kernel.Loaded, []string{"vxlan", "ip6_udp_tunnel", "br_netfilter", "bridge"})
	eq(t, "Builtin", h.Kernel.Builtin, []string{"unix", "crc32c_generic"})
	eq(t, "Loadable[0]", h.Kernel.Loadable[0], "veth")
	eq(t, "Loadable has xt_MASQUERADE", slices.Contains(h.Kernel.Loadable, "xt_MASQUERADE"), true)
	eq(t, "Cgroup", h.Cgroup, Cgroup{Version: 2, Controllers: []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma"}})
	eq(t, "MemTotalKiB", h.MemTotalKiB, int64(1011924))
	eq(t, "SwapTotalKiB", h.SwapTotalKiB, int64(524284))
	eq(t, "DiskPath", h.DiskPath, "/var")
	eq(t, "DiskFreeKiB", h.DiskFreeKiB, int64(5041200))
	eq(t, "Listening", h.Listening, []Port{{"tcp", 22, "0.0.0.0"}, {"udp", 68, "0.0.0.0"}})
	if h.DefaultRoute != nil || h.DefaultRoute6 != nil {
		t.Errorf("default routes = %+v, %+v; want none", h.DefaultRoute, h.DefaultRoute6)
	}
	eq(t, "Addresses", h.Addresses, []string{"192.168.1.20"})
	eq(t, "Hostname", h.Hostname, "edge-1")
	eq(t, "MachineID", h.MachineID, "")
	eq(t, "KeysRootMaxKeys", h.KeysRootMaxKeys, int64(1000000))
	// busybox date has no %N: whole seconds, averaged.
	eq(t, "RemoteClock", h.RemoteClock, time.Unix(1767225601, 0))
	eq(t, "K3s.Installed", h.K3s.Installed(), false)
	eq(t, "K3s.Files", h.K3s.Files, map[string]string{"/etc/rancher/k3s/config.yaml": ""})
	eq(t, "K3s.PrivilegedRead", h.K3s.PrivilegedRead, true)
}

func TestParseRHELWithK3s(t *testing.T) {
	h := parseFile(t, "rhel-k3s.txt")
	eq(t, "Arch", h.Arch, "amd64")
	eq(t, "OS", h.OS, OSRelease{ID: "rhel", IDLike: "fedora", VersionID: "9.5", PrettyName: "Red Hat Enterprise Linux 9.5 (Plow)"})
	eq(t, "InitSystem", h.InitSystem, "systemd")
	eq(t, "Sudo", h.Sudo, Sudo{User: "cloud-user", OK: true, Mode: "password"})
	eq(t, "Cgroup.Version", h.Cgroup.Version, 2)
	eq(t, "SwapTotalKiB", h.SwapTotalKiB, int64(0))
	eq(t, "DiskFreeKiB", h.DiskFreeKiB, int64(32100352))
	eq(t, "Listening", h.Listening, []Port{
		{"tcp", 2379, "127.0.0.1"},
		{"tcp", 2379, "10.0.0.10"},
		{"tcp", 2380, "10.0.0.10"},
		{"tcp", 6443, "::"},
		{"tcp", 10250, "::"},
		{"tcp", 10000, "::1"},
		{"tcp", 8080, "10.0.0.5"}, // v4-mapped v6 address, unmapped
		{"udp", 8472, "0.0.0.0"},
	})
	eq(t, "DefaultRoute", h.DefaultRoute, &Route{Interface: "eth0", Gateway: "10.0.0.1"}) // lowest metric
	if h.DefaultRoute6 != nil {
		t.Errorf("DefaultRoute6 = %+v; the lo reject route is not a default route", h.DefaultRoute6)
	}
	eq(t, "Addresses", h.Addresses, []string{"10.0.0.10", "10.42.0.1", "fd00:10::10"})
	eq(t, "Hostname", h.Hostname, "cp1.example.com")
	eq(t, "MachineID", h.MachineID, "0f1e2d3c4b5a69788796a5b4c3d2e1f0")
	eq(t, "RemoteClock", h.RemoteClock, time.Unix(1767225601, 0))
	eq(t, "K3s", h.K3s, K3sInstall{
		BinaryVersion:  "v1.36.3+k3s1",
		BinaryLabel:    "0a1b2c3d",
		BinaryPath:     "/usr/local/bin/k3s",
		Service:        "k3s",
		Services:       []string{"k3s"},
		ServiceActive:  "active",
		ServiceEnabled: "enabled",
		Files: map[string]string{
			"/etc/rancher/k3s/config.yaml":        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			"/etc/systemd/system/k3s.service.env": "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
			"/etc/rancher/k3s/registries.yaml":    "",
		},
		UnreadableFiles:  []string{"/etc/rancher/k3s/config.yaml.d"},
		PrivilegedRead:   true,
		TokenPresent:     true,
		SubnetEnvPresent: true,
	})
	eq(t, "Installed", h.K3s.Installed(), true)
}

func TestParseMinimalHost(t *testing.T) {
	h := parseFile(t, "minimal.txt")
	eq(t, "Machine", h.Machine, "riscv64")
	eq(t, "Arch", h.Arch, "")
	eq(t, "Cgroup", h.Cgroup, Cgroup{})
	eq(t, "Kernel.Readable", h.Kernel.Readable(), false)
	if h.DefaultRoute != nil || !h.RemoteClock.IsZero() || h.K3s.Installed() || h.K3s.PrivilegedRead {
		t.Errorf("missing sections must leave zero values: %+v", h)
	}
}

func TestParseVariants(t *testing.T) {
	doc := func(body string) []byte { return []byte("@k3strap-facts 1\n" + body + "\n@@ end\n") }
	t.Run("ip addr scope", func(t *testing.T) {
		h, err := Parse(doc("@@ addr ip\n" +
			"1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n" +
			"2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever\n" +
			"2: eth0    inet 192.0.2.3/24 scope global secondary eth0\\       valid_lft forever\n" +
			"2: eth0    inet6 fe80::1/64 scope link \\       valid_lft forever preferred_lft forever\n" +
			"2: eth0    inet6 2001:db8::2/64 scope global flags 02 \\       valid_lft forever\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "Addresses", h.Addresses, []string{"192.0.2.2", "192.0.2.3", "2001:db8::2"})
	})
	t.Run("cgroup v1 hybrid", func(t *testing.T) {
		h, err := Parse(doc("@@ cgroup-mounts\n" +
			"tmpfs /sys/fs/cgroup tmpfs rw 0 0\n" +
			"cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n" +
			"cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n" +
			"@@ proc-cgroups\n#subsys_name\thierarchy\tnum_cgroups\tenabled\n" +
			"cpuset\t3\t1\t1\nmemory\t4\t1\t1\nhugetlb\t0\t1\t0\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "Cgroup", h.Cgroup, Cgroup{Version: 1, Controllers: []string{"cpuset", "memory"}})
	})
	t.Run("ipv6 default route", func(t *testing.T) {
		h, err := Parse(doc("@@ route6 /proc/net/ipv6_route\n" +
			"00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "DefaultRoute6", h.DefaultRoute6, &Route{Interface: "eth0", Gateway: "fd00::1"})
	})
	t.Run("no module support", func(t *testing.T) {
		h, err := Parse(doc("@@ modules\n@@ sys-module /sys/module\nvxlan\n@@ modules-builtin\n@@ modules-dep"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "ModuleSupport", h.Kernel.ModuleSupport, false)
		eq(t, "SysModule", h.Kernel.SysModule, []string{"vxlan"})
		eq(t, "Readable", h.Kernel.Readable(), true)
	})
	t.Run("odd k3s version output", func(t *testing.T) {
		h, err := Parse(doc("@@ k3s-version /usr/local/bin/k3s\nSegmentation fault\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "BinaryVersion", h.K3s.BinaryVersion, "")
		eq(t, "BinaryLabel", h.K3s.BinaryLabel, "Segmentation fault")
		eq(t, "BinaryPath", h.K3s.BinaryPath, "/usr/local/bin/k3s")
	})
	t.Run("simulator label and both units", func(t *testing.T) {
		h, err := Parse(doc("@@ k3s-version /usr/local/bin/k3s\nk3s version v1.36.3+k3s1 (simulator)\n" +
			"@@ k3s-units\nunit k3s-agent /etc/systemd/system/k3s-agent.service\nactive k3s-agent failed\nenabled k3s-agent enabled\n" +
			"unit k3s /etc/init.d/k3s\nactive k3s inactive\nenabled k3s disabled\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "BinaryLabel", h.K3s.BinaryLabel, "simulator")
		eq(t, "Service", h.K3s.Service, "k3s")
		eq(t, "Services", h.K3s.Services, []string{"k3s-agent", "k3s"})
		eq(t, "ServiceActive", h.K3s.ServiceActive, "inactive")
	})
	t.Run("sudo refused", func(t *testing.T) {
		h, err := Parse(doc("@@ sudo\nuser=ops\nmode=bad-password\nmessage=Sorry, try again.\nmessage=\nmessage=sudo: 1 incorrect password attempt\n@@ privileged skipped\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "Sudo", h.Sudo, Sudo{User: "ops", NeedsPassword: true, Mode: "bad-password", Message: "Sorry, try again.; sudo: 1 incorrect password attempt"})
		eq(t, "PrivilegedRead", h.K3s.PrivilegedRead, false)
		eq(t, "Files", h.K3s.Files, map[string]string(nil))
	})
	t.Run("df printed nothing", func(t *testing.T) {
		h, err := Parse(doc("@@ df /var/lib\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "DiskPath", h.DiskPath, "")
		eq(t, "DiskFreeKiB", h.DiskFreeKiB, int64(0))
	})
	t.Run("space", func(t *testing.T) {
		h, err := Parse(doc("@@ space\n/usr/local/bin 24576 /usr/local/bin rw,relatime,size=24576k\n/etc/rancher/k3s 9000 /mnt/my disk ro,nosuid\n/tmp 100 / -\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "Space", h.Space, []DirSpace{{Dir: "/usr/local/bin", Mount: "/usr/local/bin", FreeKiB: 24576},
			{Dir: "/etc/rancher/k3s", Mount: "/mnt/my disk", FreeKiB: 9000, ReadOnly: true}, {Dir: "/tmp", Mount: "/", FreeKiB: 100}})
	})
	t.Run("CRLF line ends", func(t *testing.T) {
		h, err := Parse([]byte("@k3strap-facts 1\r\n@@ hostname\r\nh1\r\n@@ end\r\n"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "Hostname", h.Hostname, "h1")
	})
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		line      int
		section   string
		msg       string
	}{
		{"empty", "", 1, "", "empty document"},
		{"no header", "hello\n", 1, "", "want \"@k3strap-facts <version>\""},
		{"newer format", "@k3strap-facts 2\n@@ end\n", 1, "", "newer"},
		{"bad version", "@k3strap-facts one\n", 1, "", "bad format version"},
		{"cut short", "@k3strap-facts 1\n@@ uname\nmachine=x86_64\n", 4, "uname", "cut short"},
		{"text before sections", "@k3strap-facts 1\nstray\n@@ end\n", 2, "", "outside a section"},
		{"text after end", "@k3strap-facts 1\n@@ end\nstray\n", 3, "end", "after the end"},
		{"uname not key=value", "@k3strap-facts 1\n@@ uname\nx86_64\n@@ end\n", 3, "uname", "key=value"},
		{"meminfo not a number", "@k3strap-facts 1\n@@ meminfo\nMemTotal: lots kB\n@@ end\n", 3, "meminfo", "MemTotal"},
		{"df without use%", "@k3strap-facts 1\n@@ df /\nFilesystem 1K-blocks\n/dev/sda 10 5 5 /\n@@ end\n", 4, "df", "use%"},
		{"bad space line", "@k3strap-facts 1\n@@ space\n/usr/local/bin lots / rw\n@@ end\n", 3, "space", "DIR AVAILABLE-KiB"},
		{"bad tcp line", "@k3strap-facts 1\n@@ net tcp\n   0: ZZZZ:1F90 00000000:0000 0A\n@@ end\n", 3, "net", "local address"},
		{"unknown net proto", "@k3strap-facts 1\n@@ net sctp\n@@ end\n", 2, "net", "unknown protocol"},
		{"bad sudo mode", "@k3strap-facts 1\n@@ sudo\nmode=maybe\n@@ end\n", 3, "sudo", "unknown sudo mode"},
		{"bad sha", "@k3strap-facts 1\n@@ privileged root\nsha abc /etc/x\n@@ end\n", 3, "privileged", "sha HEX PATH"},
		{"bad clock", "@k3strap-facts 1\n@@ clock start\nnoon\n@@ end\n", 3, "clock", "seconds"},
		{"bad route", "@k3strap-facts 1\n@@ route /proc/net/route\neth0 00000000\n@@ end\n", 3, "route", "/proc/net/route"},
		{"bad maxkeys", "@k3strap-facts 1\n@@ root-maxkeys\nmany\n@@ end\n", 3, "root-maxkeys", "integer"},
		{"bad unit line", "@k3strap-facts 1\n@@ k3s-units\nunit k3s\n@@ end\n", 3, "k3s-units", "unit|active|enabled"},
		{"bad address", "@k3strap-facts 1\n@@ addr hostname-I\n10.0.0.300\n@@ end\n", 3, "addr", "bad address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("no error; got %+v", h)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			if pe.Line != tc.line || pe.Section != tc.section || !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("got line %d section %q msg %q; want line %d section %q msg containing %q", pe.Line, pe.Section, pe.Msg, tc.line, tc.section, tc.msg)
			}
			if tc.section != "" && !strings.Contains(err.Error(), "section "+tc.section) {
				t.Errorf("error text %q does not name the section", err)
			}
		})
	}
}

func TestArchFor(t *testing.T) {
	for in, want := range map[string]string{
		"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm", "armv7": "arm",
		"armhf": "arm", "armv6l": "", "i686": "", "riscv64": "", "": "", "s390x": "",
	} {
		if got := ArchFor(in); got != want {
			t.Errorf("ArchFor(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSetClockSkew(t *testing.T) {
	sent := time.Unix(1000, 0)
	received := sent.Add(2 * time.Second) // midpoint 1001
	h := &Host{RemoteClock: time.Unix(1031, 500e6)}
	h.SetClockSkew(sent, received)
	eq(t, "ClockSkew", h.ClockSkew, 30500*time.Millisecond)
	h = &Host{RemoteClock: time.Unix(990, 0)}
	h.SetClockSkew(sent, received)
	eq(t, "ClockSkew behind", h.ClockSkew, -11*time.Second)
	h = &Host{}
	h.SetClockSkew(sent, received)
	eq(t, "ClockSkew unknown clock", h.ClockSkew, time.Duration(0))
}

func TestKernelFind(t *testing.T) {
	ipset := Feature{Name: "ip_set", Config: []string{"CONFIG_IP_SET"}, Modules: []string{"ip_set"}}
	vxlan := Feature{Name: "vxlan", Config: []string{"CONFIG_VXLAN"}, Modules: []string{"vxlan"}}
	masq := Feature{Name: "MASQUERADE", Config: []string{"CONFIG_IP_NF_TARGET_MASQUERADE", "CONFIG_NETFILTER_XT_TARGET_MASQUERADE"}, Modules: []string{"ipt_MASQUERADE", "xt_MASQUERADE"}}
	netns := Feature{Name: "net namespace", Config: []string{"CONFIG_NET_NS"}, Namespace: "net"}
	alpine := parseFile(t, "alpine-openrc.txt").Kernel

	tests := []struct {
		name       string
		k          Kernel
		f          Feature
		present    bool
		where      []string
		conclusive bool
	}{
		{"=y in config", Kernel{ConfigSource: "/proc/config.gz", Config: map[string]string{"CONFIG_IP_SET": "y"}}, ipset, true,
			[]string{"CONFIG_IP_SET=y in /proc/config.gz"}, true},
		{"=m and loaded", alpine, vxlan, true, []string{"CONFIG_VXLAN=m in /boot/config-6.6.58-0-lts", "module vxlan loaded (/proc/modules)"}, true},
		{"=m and loadable", alpine, ipset, true, []string{"CONFIG_IP_SET=m", "module ip_set loadable (/lib/modules/6.6.58-0-lts/modules.dep)"}, true},
		{"second alternative =m loadable", alpine, masq, true, []string{"CONFIG_NETFILTER_XT_TARGET_MASQUERADE=m", "xt_MASQUERADE loadable"}, true},
		{"=m but module missing", alpine, Feature{Name: "wireguard", Config: []string{"CONFIG_WIREGUARD"}, Modules: []string{"wireguard"}}, false,
			[]string{"CONFIG_WIREGUARD=m in /boot/config-6.6.58-0-lts but the module is not available", "not in /proc/modules", "not in /sys/module", "not in /lib/modules/6.6.58-0-lts/modules.builtin", "not in /lib/modules/6.6.58-0-lts/modules.dep"}, true},
		{"not set, no module support", Kernel{ConfigSource: "/proc/config.gz", Config: map[string]string{}, SysModuleRead: true}, ipset, false,
			[]string{"not in /proc/config.gz (CONFIG_IP_SET not set)", "no module support (no /proc/modules)", "not in /sys/module", "no modules.builtin"}, true},
		{"no config, built in per modules.builtin", Kernel{BuiltinSource: "/lib/modules/r/modules.builtin", Builtin: []string{"ip_set"}}, ipset, true,
			[]string{"ip_set built in (/lib/modules/r/modules.builtin)"}, true},
		{"no config, /sys/module", Kernel{SysModuleRead: true, SysModule: []string{"vxlan"}}, vxlan, true, []string{"/sys/module/vxlan exists"}, false},
		{"dash and underscore are the same module", Kernel{ModuleSupport: true, Loaded: []string{"ip_set"}}, Feature{Name: "x", Modules: []string{"ip-set"}}, true, []string{"module ip_set loaded"}, false},
		{"loadable ignored without module support", Kernel{DepSource: "/lib/modules/r/modules.dep", Loadable: []string{"vxlan"}}, vxlan, false,
			[]string{"no kernel config", "no module support"}, false},
		{"no config, all module lists read: conclusive", Kernel{ModuleSupport: true, SysModuleRead: true, BuiltinSource: "b", DepSource: "d"}, vxlan, false,
			[]string{"no kernel config", "not in /proc/modules", "not in /sys/module", "not in b", "not in d"}, true},
		{"nothing readable", Kernel{}, ipset, false, []string{"no kernel config", "no module support", "no /sys/module", "no modules.builtin"}, false},
		{"namespace evidence without config", Kernel{Namespaces: []string{"net", "pid"}}, netns, true, []string{"/proc/self/ns/net exists"}, false},
		{"namespace missing without config", Kernel{Namespaces: []string{"pid"}}, netns, false, []string{"no /proc/self/ns/net"}, false},
		{"config beats namespace list", Kernel{ConfigSource: "c", Config: map[string]string{}, Namespaces: []string{"net"}}, netns, false, []string{"not in c (CONFIG_NET_NS not set)"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, where := tc.k.Find(tc.f)
			if got != tc.present {
				t.Errorf("present = %v, want %v (where %q)", got, tc.present, where)
			}
			for _, w := range tc.where {
				if !strings.Contains(where, w) {
					t.Errorf("where = %q, want it to contain %q", where, w)
				}
			}
			if c := tc.k.Conclusive(tc.f); c != tc.conclusive {
				t.Errorf("Conclusive = %v, want %v", c, tc.conclusive)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	ents, _ := os.ReadDir("testdata")
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("testdata", e.Name())); err == nil && !e.IsDir() {
			f.Add(b)
		}
	}
	f.Add([]byte("@k3strap-facts 1\n@@ net tcp6\n 0: 00000000000000000000000000000000:192B 0:0 0A\n@@ end\n"))
	f.Add([]byte("@k3strap-facts 1\n@@ df\n5%\n@@ route6\n" + strings.Repeat("0 ", 12) + "\n@@ end"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if err == nil && h == nil {
			t.Fatal("nil Host without error")
		}
		if err != nil && h != nil {
			t.Fatal("Host with error")
		}
	})
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}
