// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package preflight judges gathered host facts against the inventory before anything is
// installed, with kubeadm's contract (docs/preflight.md, kubeadm cmd/kubeadm/app/preflight/checks.go):
// every check has a stable ID (Port-6443, Swap, CloudController, ...), returns errors and
// warnings, and --ignore-preflight-errors=ID,... (case-insensitive, or `all` alone) turns a named
// check's errors into warnings. Every finding names its host, says what is wrong with the host's
// actual values and gives a concrete fix.
//
// The package never opens a connection: it reads facts.Host values gathered by the installer
// and the inventory.
package preflight

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/netcheck"
)

// Input is what the checks judge.
type Input struct {
	// Cluster is the validated inventory.
	Cluster *inventory.Cluster
	// Facts are the gathered facts by inventory host name; nil or missing when the host was
	// unreachable or its facts could not be gathered.
	Facts map[string]*facts.Host
	// Unreachable holds SSH connect / authentication failures by host name.
	Unreachable map[string]error
	// Tolerations are tolerations the installer adds to a deployed component beyond its
	// packaged ones, by component name (see Components), e.g. rendered from the inventory.
	// FirstNodeTaints counts them.
	Tolerations map[string][]corev1.Toleration
	// BinaryReleases are the K3s releases of the inventory's airgap binaries, by architecture
	// (the keys of spec.k3s.airgap), as ReadBinaryReleases finds them on the workstation.
	// AirgapRelease compares them with spec.k3s.version; nil skips that comparison.
	BinaryReleases map[string]BinaryRelease
	// Writes is what k3strap will write on each host, by host name: the directories and
	// sizes UploadSpace compares with the free space the facts show; nil skips that check.
	Writes map[string][]Write
	// Paths is the path check's report (the paths step); nil when it did not run, and then
	// NodePaths judges the hosts' rulesets alone.
	Paths *netcheck.PathReport
	// Proxy is the proxy evidence by host name (facts.ProxyScript: the K3s unit's proxy
	// environment and, with spec.proxy, the probe); nil when it was not gathered, and then the
	// Proxy and NoProxy checks judge nothing (proxy.go).
	Proxy map[string]*facts.ProxyFacts
	// NotInRun are the hosts this run does not work on (--host left them out, or a box in
	// local mode joining by itself: docs/edge-first-boot.md); the SSH check asks nothing of
	// them.
	NotInRun map[string]bool
}

// BinaryRelease is what was found in one airgap binary.
type BinaryRelease struct {
	// File is the local path of the binary.
	File string
	// Release is its K3s release (e.g. "v1.36.3+k3s1"); "" when Err is set.
	Release string
	// Err says why the release could not be read (missing file, not a K3s binary).
	Err error
}

// Check is one preflight check.
type Check interface {
	// ID is the stable name used in output and in --ignore-preflight-errors.
	ID() string
	// Static reports whether the check reads only the inventory (Input.Cluster, and for
	// AirgapRelease Input.BinaryReleases), never host facts: `k3strap validate` runs the static
	// checks without connecting (RunStatic); host checks need gathered facts.
	Static() bool
	// Run returns the check's findings. Hosts without facts are skipped (the SSH check reports
	// them).
	Run(in *Input) []finding.Finding
}

type check struct {
	id     string
	run    func(in *Input) []finding.Finding
	static bool
}

func (c check) ID() string { return c.id }

func (c check) Static() bool { return c.static }

func (c check) Run(in *Input) []finding.Finding {
	out := c.run(in)
	for i := range out {
		out[i].ID, out[i].Source = c.id, finding.Preflight
	}
	return out
}

// Checks returns every check in its stable order (the order of the output within one host).
func Checks() []Check {
	cs := []Check{
		check{id: checkid.SSH, run: checkSSH},
		check{id: checkid.Sudo, run: checkSudo},
		check{id: checkid.OS, run: checkOS},
		check{id: checkid.Arch, run: checkArch},
		check{id: checkid.InitSystem, run: checkInitSystem},
		check{id: checkid.KernelConfig, run: checkKernelConfig},
		check{id: checkid.CNIKernel, run: checkCNIKernel},
		check{id: checkid.Cgroups, run: checkCgroups},
		check{id: checkid.Swap, run: checkSwap},
	}
	for _, p := range portSpecs() {
		cs = append(cs, check{id: p.id(), run: p.run})
	}
	cs = append(cs,
		check{id: checkid.Mem, run: checkMem},
		check{id: checkid.Disk, run: checkDisk},
		check{id: checkid.UploadSpace, run: checkUploadSpace},
		check{id: checkid.Hostname, run: checkHostname},
		check{id: checkid.MachineID, run: checkMachineID},
		check{id: checkid.ClockSkew, run: checkClockSkew},
		check{id: checkid.DefaultRoute, run: checkDefaultRoute},
		check{id: checkid.IPFamilies, run: checkIPFamilies},
		check{id: checkid.Proxy, run: checkProxy},
		check{id: checkid.NoProxy, run: checkNoProxy},
	)
	cs = append(cs, netChecks()...)
	return append(cs,
		check{id: checkid.SELinux, run: checkSELinux},
		check{id: checkid.ExistingInstall, run: checkExistingInstall},
		check{id: checkid.ServerCount, run: checkServerCount, static: true},
		check{id: checkid.CriticalConfig, run: checkCriticalConfig, static: true},
		check{id: checkid.CloudController, run: checkCloudController, static: true},
		check{id: checkid.FirstNodeTaints, run: checkFirstNodeTaints, static: true},
		check{id: checkid.RancherAgentTolerations, run: checkRancherAgentTolerations, static: true},
		check{id: checkid.RancherVersion, run: checkRancherVersion, static: true},
		check{id: checkid.AirgapRelease, run: checkAirgapRelease, static: true},
	)
}

// Ignore is a parsed --ignore-preflight-errors list. The zero value ignores nothing.
type Ignore struct {
	all bool
	ids map[string]bool
}

// ParseIgnore parses --ignore-preflight-errors values: each element may hold several
// comma-separated check IDs, matched case-insensitively; `all` ignores every check and must
// stand alone. An unknown ID is an error that lists the known ones.
func ParseIgnore(list []string) (Ignore, error) {
	known := map[string]string{}
	var names []string
	for _, c := range Checks() {
		known[strings.ToLower(c.ID())] = c.ID()
		names = append(names, c.ID())
	}
	ign := Ignore{ids: map[string]bool{}}
	var n int
	for _, item := range list {
		for _, id := range strings.Split(item, ",") {
			id = strings.TrimSpace(id)
			if id == "" {
				continue
			}
			n++
			l := strings.ToLower(id)
			if l == "all" {
				ign.all = true
				continue
			}
			if _, ok := known[l]; !ok {
				return Ignore{}, fmt.Errorf("unknown preflight check %q in --ignore-preflight-errors; known checks: %s, or all", id, strings.Join(names, ", "))
			}
			ign.ids[l] = true
		}
	}
	if ign.all && n > 1 {
		return Ignore{}, fmt.Errorf("--ignore-preflight-errors: `all` ignores every check; do not list individual checks with it")
	}
	return ign, nil
}

// Has reports whether errors of check id are ignored.
func (i Ignore) Has(id string) bool { return i.all || i.ids[strings.ToLower(id)] }

// Report is the outcome of Run.
type Report struct {
	// Findings sorted by host (inventory order; cluster-wide findings under their first host),
	// then check order (Checks), then the order the check produced them.
	Findings []finding.Finding `json:"findings"`
}

// Errors returns the findings that are errors (ignored ones are warnings).
func (r *Report) Errors() []finding.Finding { return r.bySeverity(finding.Error) }

// Warnings returns the warnings, including ignored errors.
func (r *Report) Warnings() []finding.Finding { return r.bySeverity(finding.Warning) }

// HasErrors reports whether any error remains: apply must stop.
func (r *Report) HasErrors() bool { return len(r.Errors()) > 0 }

func (r *Report) bySeverity(s finding.Severity) []finding.Finding {
	var out []finding.Finding
	for _, f := range r.Findings {
		if f.Severity == s {
			out = append(out, f)
		}
	}
	return out
}

// Run runs every check on in, turns ignored checks' errors into warnings (Ignored set), and
// sorts the findings stably by host order in the inventory, then check order. A nil Cluster
// yields one error finding (check "Inventory", not ignorable).
func Run(in *Input, ign Ignore) *Report {
	return run(in, ign, Checks())
}

// StaticChecks returns the checks that read only the inventory (Check.Static), in Checks order.
func StaticChecks() []Check {
	var out []Check
	for _, c := range Checks() {
		if c.Static() {
			out = append(out, c)
		}
	}
	return out
}

// RunStatic runs only the static checks (StaticChecks) on in, as Run does; in.Facts and
// in.Unreachable are not read. For `k3strap validate`, which connects to nothing: fill
// in.BinaryReleases with ReadBinaryReleases for the AirgapRelease check.
func RunStatic(in *Input, ign Ignore) *Report {
	return run(in, ign, StaticChecks())
}

func run(in *Input, ign Ignore, checks []Check) *Report {
	if in == nil || in.Cluster == nil {
		return &Report{Findings: []finding.Finding{{ID: checkid.Inventory, Severity: finding.Error,
			Message: "no inventory to check", Fixes: finding.Fixes("load the inventory before running preflight"), Source: finding.Preflight}}}
	}
	var all []finding.Finding
	order := map[string]int{}
	for i, c := range checks {
		order[c.ID()] = i
		for _, f := range c.Run(in) {
			if f.Severity == finding.Error && ign.Has(c.ID()) {
				f.Severity, f.Ignored = finding.Warning, true
			}
			all = append(all, f)
		}
	}
	hostIdx := map[string]int{}
	for i, h := range in.Cluster.Spec.Hosts {
		if _, dup := hostIdx[h.Name]; !dup {
			hostIdx[h.Name] = i
		}
	}
	rank := func(f finding.Finding) int {
		best := len(in.Cluster.Spec.Hosts)
		for _, h := range f.Hosts() {
			if i, ok := hostIdx[h]; ok && i < best {
				best = i
			}
		}
		return best
	}
	sort.SliceStable(all, func(a, b int) bool {
		ra, rb := rank(all[a]), rank(all[b])
		if ra != rb {
			return ra < rb
		}
		return order[all[a].ID] < order[all[b].ID]
	})
	return &Report{Findings: all}
}

// --- helpers shared by the checks

func errorf(host, fix, format string, a ...any) finding.Finding {
	return finding.Finding{Host: host, Severity: finding.Error, Message: fmt.Sprintf(format, a...), Fixes: finding.Fixes(fix)}
}

func warnf(host, fix, format string, a ...any) finding.Finding {
	return finding.Finding{Host: host, Severity: finding.Warning, Message: fmt.Sprintf(format, a...), Fixes: finding.Fixes(fix)}
}

// eachHost calls fn for every inventory host (in file order) that has facts.
func eachHost(in *Input, fn func(i int, h *inventory.Host, f *facts.Host) []finding.Finding) []finding.Finding {
	var out []finding.Finding
	for i := range in.Cluster.Spec.Hosts {
		h := &in.Cluster.Spec.Hosts[i]
		f := in.Facts[h.Name]
		if f == nil {
			continue
		}
		out = append(out, fn(i, h, f)...)
	}
	return out
}

// hostList joins host names for a cluster-wide finding, in inventory order.
func hostList(c *inventory.Cluster, names []string) string {
	var out []string
	for _, h := range c.Spec.Hosts {
		if slices.Contains(names, h.Name) && !slices.Contains(out, h.Name) {
			out = append(out, h.Name)
		}
	}
	return strings.Join(out, ", ")
}

// setting names an inventory setting for messages: "path: value", or "path" when value is "",
// followed by " (file:line)" when the loader recorded where it stands.
func setting(c *inventory.Cluster, path, value string) string {
	s := path
	if value != "" {
		s += ": " + value
	}
	if p, ok := c.Positions[path]; ok && p.Line > 0 {
		if c.Source != "" {
			return fmt.Sprintf("%s (%s:%d)", s, c.Source, p.Line)
		}
		return fmt.Sprintf("%s (line %d)", s, p.Line)
	}
	return s
}

// fmtKiB renders a size in KiB as MiB or GiB with one decimal.
func fmtKiB(k int64) string {
	switch {
	case k >= 1<<20:
		return fmt.Sprintf("%.1f GiB", float64(k)/(1<<20))
	case k >= 1<<10:
		return fmt.Sprintf("%.0f MiB", float64(k)/(1<<10))
	}
	return fmt.Sprintf("%d KiB", k)
}
