// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hostinfo reads what a kubelet reports about its host: the node IP (the address of
// the default route's interface, as K3s picks it when node-ip is not set), hostname, OS image,
// kernel, CPU, memory and disk capacity. Nothing here needs root.
package hostinfo

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// DefaultRouteIP returns the first IPv4 address of the interface holding the IPv4 default
// route (read from /proc/net/route). It returns an error when there is no default route
// (K3s needs one: docs/k3s.md#airgap).
func DefaultRouteIP() (string, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	iface := ""
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 8 && fields[1] == "00000000" && fields[7] == "00000000" {
			iface = fields[0]
			break
		}
	}
	if iface == "" {
		return "", errors.New("no default route found in /proc/net/route")
	}
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return "", err
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("interface %s of the default route has no IPv4 address", iface)
}

// Hostname returns the lower-cased host name (K3s's default node name).
func Hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.ToLower(h)
}

// OSImage returns PRETTY_NAME from the os-release file at path, or "Linux".
func OSImage(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		data, err = os.ReadFile("/etc/os-release")
		if err != nil {
			return "Linux"
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return strings.Trim(v, `"'`)
		}
	}
	return "Linux"
}

// KernelVersion returns uname -r.
func KernelVersion() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "unknown"
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// MemoryKi returns MemTotal in KiB (0 if unknown).
func MemoryKi() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// DiskKi returns the size in KiB of the file system holding path (walking up to an
// existing parent), 0 if unknown.
func DiskKi(path string) int64 {
	for p := path; p != "" && p != "."; {
		var st syscall.Statfs_t
		if err := syscall.Statfs(p, &st); err == nil {
			return int64(st.Blocks) * int64(st.Bsize) / 1024
		}
		i := strings.LastIndex(p, "/")
		if i <= 0 {
			p = "/"
			if err := syscall.Statfs(p, &st); err == nil {
				return int64(st.Blocks) * int64(st.Bsize) / 1024
			}
			return 0
		}
		p = p[:i]
	}
	return 0
}

// CPUs returns the number of CPUs.
func CPUs() int { return runtime.NumCPU() }

// MachineID returns /etc/machine-id or 32 zeros.
func MachineID() string {
	b, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		return strings.Repeat("0", 32)
	}
	return strings.TrimSpace(string(b))
}

// BootID returns the kernel boot id, or 32 zeros.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return strings.Repeat("0", 32)
	}
	return strings.TrimSpace(string(b))
}
