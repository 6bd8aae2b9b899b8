// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"bytes"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"encoding/pem"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"al.essio.dev/pkg/shellescape"

	"github.com/k3strap/k3strap/k3s"
)

// `k3strap doctor` gathers with DoctorNodeScript once per node (one SSH command each) and
// reads the cluster's view through one server's Kubernetes API (installer/kube: no command).
// The script runs as root and prints sections "@name" (a JSON document on one line, or text
// lines) ended by "@end". Nothing secret is printed: config lines with a secret key are left out on the host
// (k3s.SecretKeys), certificate files are printed but never key files, and the caller masks
// every text again with k3s.Mask.

// DoctorNodeScript prints what doctor needs from one node (doctor-node.sh, the host paths of
// k3s.ShellVars and the secret key pattern before it): the host facts preflight gathers too
// (host.sh: hostname and addresses, the clock, memory, free disk, the K3s binary's version),
// which unit runs (k3s or k3s-agent) with its state, restart count and
// last start, when systemd restarted it (its journal's k3s.LineRestartScheduled lines, the last
// 20, in the host's epoch seconds), the unit's journal tail (300 lines), the K3s config file and drop-ins (secret
// keys left out), flannel's subnet.env, the first certificate of every K3s certificate file
// (PEM, parsed locally — no openssl needed), and the network sections (network.sh: interfaces, routes, flannel's FDB, rulesets,
// firewalld, ufw, NetworkManager, resolver files). ParseDoctorNode reads it.
var DoctorNodeScript = k3s.ShellVars() + "SECRET_KEYS='" + secretKeyPattern() + "'\n" +
	"K3STRAP_HOST_SH=" + shellescape.Quote(HostScript()) + "\n" +
	"K3STRAP_NETWORK_SH=" + shellescape.Quote(NetworkScript()) + "\n" +
	"K3STRAP_PROXY_SH=" + shellescape.Quote(proxyScript) + "\n" +
	"K3STRAP_RESTART_LINE=" + shellescape.Quote(k3s.LineRestartScheduled) + "\n" + doctorNodeScript

//go:embed doctor-node.sh
var doctorNodeScript string

// DoctorNodeArgs are DoctorNodeScript's arguments: the journal line fragments a diagnosis needs
// from before the tail (k3s.JournalKeyLines), newline-separated in one argument.
func DoctorNodeArgs() []string { return []string{strings.Join(k3s.JournalKeyLines(), "\n")} }

// secretKeyPattern is the alternation of K3s's secret config keys and any key naming a
// password, for grep -E.
func secretKeyPattern() string {
	return strings.Join(append(k3s.SecretKeys(), "[a-z0-9-]*password[a-z0-9-]*"), "|")
}

// Cert is one certificate file's first certificate.
type Cert struct {
	// Path is the file on the host.
	Path string `json:"path"`
	// Subject is the certificate's common name.
	Subject string `json:"subject"`
	// NotAfter is when it expires.
	NotAfter time.Time `json:"notAfter"`
	// IsCA says it is a CA certificate.
	IsCA bool `json:"isCA,omitempty"`
}

// DoctorNode is what DoctorNodeScript printed, parsed.
type DoctorNode struct {
	// Host holds the host facts preflight gathers too (host.sh, parsed by the same section
	// parsers as Parse: ParseHostSections): Hostname, Addresses, RemoteClock, MemTotalKiB and
	// MemAvailableKiB, DiskPath (the nearest existing parent of K3s's data root), DiskFreeKiB,
	// DiskTotalKiB and DiskUsedPercent, and K3s.BinaryVersion / BinaryLabel of the K3s binary.
	// Its other fields stay empty.
	Host
	// Unit is k3s or k3s-agent ("" when no unit exists).
	Unit string `json:"unit,omitempty"`
	// ActiveState and SubState are systemd's; Restarts is NRestarts; ActiveSince when the unit
	// last became active (zero when unknown or not active); StartedAt when its main process last
	// started (ExecMainStartTimestamp: set while activating too; zero when unknown).
	ActiveState string    `json:"activeState,omitempty"`
	SubState    string    `json:"subState,omitempty"`
	Restarts    int       `json:"restarts"`
	ActiveSince time.Time `json:"activeSince,omitempty"`
	StartedAt   time.Time `json:"startedAt,omitempty"`
	// RestartTimes are when systemd scheduled the unit's last restarts (at most 20, oldest
	// first, the host's clock: its journal's k3s.LineRestartScheduled lines); RestartTimesRead
	// says the journal was read for them (systemd units; OpenRC keeps only a count).
	RestartTimes     []time.Time `json:"restartTimes,omitempty"`
	RestartTimesRead bool        `json:"restartTimesRead,omitempty"`
	// Journal is the unit's journal, oldest first (journald's short prefix kept): the lines with
	// a k3s.JournalKeyLines fragment from before the tail, then the tail (300 lines).
	Journal []string `json:"journal,omitempty"`
	// ConfigFiles are the K3s config files in the order K3s reads them (path → text, secret
	// keys left out); ConfigPaths their order.
	ConfigPaths []string          `json:"configPaths,omitempty"`
	ConfigFiles map[string]string `json:"configFiles,omitempty"`
	// SubnetEnv is /run/flannel/subnet.env's text; SubnetEnvPresent whether it exists (nil:
	// not reported); SubnetEnvWritten its modification time (zero when unknown).
	SubnetEnvPresent *bool     `json:"subnetEnvPresent,omitempty"`
	SubnetEnv        string    `json:"subnetEnv,omitempty"`
	SubnetEnvWritten time.Time `json:"subnetEnvWritten,omitempty"`
	// Certs are the K3s certificates found.
	Certs []Cert `json:"certs,omitempty"`
	// Network is what network.sh gathered (nil when the script printed no network section).
	Network *Network `json:"network,omitempty"`
	// Proxy is the K3s unit's proxy environment (proxy.sh; nil without a unit). Never
	// serialised: its values may hold a proxy password.
	Proxy *ProxyFacts `json:"-"`
}

// ParseDoctorNode reads DoctorNodeScript's output. It never fails: what it cannot read stays
// empty (doctor works with what there is).
func ParseDoctorNode(out []byte) DoctorNode {
	var n DoctorNode
	section, file, cert := "", "", ""
	var pemBuf, netBuf, proxyBuf, hostBuf bytes.Buffer
	inNet, inProxy, inHost := false, false, false
	flushCert := func() {
		if cert != "" {
			if b, _ := pem.Decode(pemBuf.Bytes()); b != nil {
				if c, err := x509.ParseCertificate(b.Bytes); err == nil {
					n.Certs = append(n.Certs, Cert{Path: cert, Subject: c.Subject.CommonName, NotAfter: c.NotAfter, IsCA: c.IsCA})
				}
			}
		}
		cert = ""
		pemBuf.Reset()
	}
	for _, line := range strings.Split(string(bytes.TrimRight(out, "\n")), "\n") {
		// host.sh's sections ("@@ clock start", ...) until @host-facts-end; a second block at
		// the end carries "@@ clock end", parsed with the first (both clocks averaged)
		if inHost {
			if line == "@host-facts-end" {
				inHost = false
				n.Host = *ParseHostSections(hostBuf.String())
			} else {
				hostBuf.WriteString(line + "\n")
			}
			continue
		}
		if line == "@host-facts" {
			flushCert()
			inHost, section = true, ""
			continue
		}
		// network.sh's own sections ("@@ net-...") until @network-end
		if inNet {
			if line == "@network-end" {
				inNet = false
				n.Network = ParseNetwork(netBuf.String())
			} else {
				netBuf.WriteString(line + "\n")
			}
			continue
		}
		if line == "@network" {
			flushCert()
			inNet, section = true, ""
			continue
		}
		// proxy.sh's own sections until @proxy-end
		if inProxy {
			if line == "@proxy-end" {
				inProxy = false
				pf := ParseProxy(proxyBuf.Bytes())
				n.Proxy = &pf
			} else {
				proxyBuf.WriteString(line + "\n")
			}
			continue
		}
		if line == "@proxy" {
			flushCert()
			inProxy, section = true, ""
			continue
		}
		if strings.HasPrefix(line, "@") {
			name, val, _ := strings.Cut(line, " ")
			known := true
			switch name {
			case "@unit":
				n.Unit = strings.TrimSpace(val)
			case "@restarts":
				n.RestartTimes, n.RestartTimesRead = nil, true
			case "@unitstate", "@keylines", "@journal", "@config":
			case "@file":
				file = strings.TrimSpace(val)
				n.ConfigPaths = append(n.ConfigPaths, file)
				if n.ConfigFiles == nil {
					n.ConfigFiles = map[string]string{}
				}
			case "@subnet":
				f := strings.Fields(val)
				p := len(f) > 0 && f[0] == "present"
				n.SubnetEnvPresent = &p
				if p && len(f) > 1 {
					if sec, err := strconv.ParseInt(f[1], 10, 64); err == nil {
						n.SubnetEnvWritten = time.Unix(sec, 0)
					}
				}
			case "@cert":
				flushCert()
				cert = strings.TrimSpace(val)
			case "@end":
			default:
				known = false
			}
			if known {
				if name != "@cert" {
					flushCert()
				}
				section = name
				continue
			}
		}
		switch section {
		case "@unitstate":
			k, v, _ := strings.Cut(line, "=")
			switch k {
			case "ActiveState":
				n.ActiveState = v
			case "SubState":
				n.SubState = v
			case "NRestarts":
				n.Restarts, _ = strconv.Atoi(v)
			case "ActiveEnterTimestamp":
				n.ActiveSince = parseSystemdTime(v)
			case "ExecMainStartTimestamp":
				n.StartedAt = parseSystemdTime(v)
			}
		case "@restarts":
			if sec, err := strconv.ParseFloat(strings.TrimSpace(line), 64); err == nil && sec > 0 {
				n.RestartTimes = append(n.RestartTimes, time.Unix(0, int64(sec*1e9)))
			}
		case "@keylines", "@journal":
			if strings.TrimSpace(line) != "" {
				n.Journal = append(n.Journal, line)
			}
		case "@file":
			n.ConfigFiles[file] += line + "\n"
		case "@subnet":
			n.SubnetEnv += line + "\n"
		case "@cert":
			pemBuf.WriteString(line + "\n")
		}
	}
	flushCert()
	return n
}

// parseSystemdTime reads systemd's "Mon 2026-05-04 10:12:13 UTC" ("" or "n/a": zero).
func parseSystemdTime(v string) time.Time {
	f := strings.Fields(v)
	if len(f) < 3 {
		return time.Time{}
	}
	t, err := time.Parse("2006-01-02 15:04:05", f[1]+" "+f[2])
	if err != nil {
		return time.Time{}
	}
	if len(f) > 3 {
		if loc, err := time.LoadLocation(f[3]); err == nil {
			t, _ = time.ParseInLocation("2006-01-02 15:04:05", f[1]+" "+f[2], loc)
		}
	}
	return t
}

// HelmChart is the part of a helm.cattle.io/v1 HelmChart doctor reads.
type HelmChart struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Chart     string `json:"chart,omitempty"`
	Version   string `json:"version,omitempty"`
	// JobName is status.jobName (the helm-install job).
	JobName string `json:"jobName,omitempty"`
}

// ClusterView is the cluster's view read through a server's API: nodes, pods, events,
// DaemonSets, Deployments, Jobs and HelmCharts of every namespace (ClusterResources), each
// added as its list's JSON with Add. A resource that could not be listed stays nil and its
// error text is in Errors.
type ClusterView struct {
	Nodes       []corev1.Node       `json:"nodes"`
	Pods        []corev1.Pod        `json:"pods"`
	Events      []corev1.Event      `json:"events"`
	DaemonSets  []appsv1.DaemonSet  `json:"daemonSets"`
	Deployments []appsv1.Deployment `json:"deployments"`
	Jobs        []batchv1.Job       `json:"jobs"`
	HelmCharts  []HelmChart         `json:"helmCharts"`
	Errors      map[string]string   `json:"errors,omitempty"`
	Raw         map[string][]byte   `json:"-"`
}

// ClusterResources are the resources of a ClusterView, as the API names them (resource or
// resource.group), in the order they are read.
var ClusterResources = []string{"nodes", "pods", "events", "daemonsets", "deployments", "jobs", "helmcharts.helm.cattle.io"}

// NewClusterView returns an empty view to Add lists to.
func NewClusterView() ClusterView {
	return ClusterView{Errors: map[string]string{}, Raw: map[string][]byte{}}
}

// Add decodes list, the API's JSON list of section (one of ClusterResources), into v and keeps
// it in Raw (for the support bundle); a decoding error goes to Errors.
func (v *ClusterView) Add(section string, list []byte) {
	v.Raw[section] = list
	var err error
	switch section {
	case "nodes":
		var l corev1.NodeList
		err = json.Unmarshal(list, &l)
		v.Nodes = l.Items
	case "pods":
		var l corev1.PodList
		err = json.Unmarshal(list, &l)
		v.Pods = l.Items
	case "events":
		var l corev1.EventList
		err = json.Unmarshal(list, &l)
		v.Events = l.Items
	case "daemonsets":
		var l appsv1.DaemonSetList
		err = json.Unmarshal(list, &l)
		v.DaemonSets = l.Items
	case "deployments":
		var l appsv1.DeploymentList
		err = json.Unmarshal(list, &l)
		v.Deployments = l.Items
	case "jobs":
		var l batchv1.JobList
		err = json.Unmarshal(list, &l)
		v.Jobs = l.Items
	case "helmcharts.helm.cattle.io":
		var l struct {
			Items []struct {
				Metadata struct{ Namespace, Name string } `json:"metadata"`
				Spec     struct{ Chart, Version string }  `json:"spec"`
				Status   struct {
					JobName string `json:"jobName"`
				} `json:"status"`
			} `json:"items"`
		}
		err = json.Unmarshal(list, &l)
		for _, it := range l.Items {
			v.HelmCharts = append(v.HelmCharts, HelmChart{Namespace: it.Metadata.Namespace, Name: it.Metadata.Name,
				Chart: it.Spec.Chart, Version: it.Spec.Version, JobName: it.Status.JobName})
		}
	}
	if err != nil {
		v.Errors[section] = err.Error()
	}
}
