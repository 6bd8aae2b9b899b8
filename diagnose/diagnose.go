// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package diagnose explains why a K3s node did not come up; the bring-up supervisor of
// `k3strap apply` uses it. It is pure: callers gather the Evidence (the Node object, pods, K3s
// journal lines, whether subnet.env exists) and get back a Diagnosis naming cause, evidence and
// fixes. Rules follow docs/failure-modes.md (F1) and docs/k3s.md: the same symptom (the
// uninitialized taint staying) has several causes, so a diagnosis rests on evidence — the
// node's K3s arguments, the journal — never on the symptom alone.
package diagnose

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/k3s"
)

// Evidence is what is known about one node that did not come up.
type Evidence struct {
	// NodeName is the node being watched.
	NodeName string
	// Node is the Node object; nil when it never registered.
	Node *corev1.Node
	// Pods are the cluster's pods (all namespaces), when the API answered.
	Pods []corev1.Pod
	// Journal are recent K3s log lines, oldest first (journalctl -u k3s -o cat).
	Journal []string
	// ConfigArgs are the K3s arguments from the host's config files when the node never
	// registered (flag name -> values); the node's k3s.io/node-args annotation wins otherwise.
	ConfigArgs map[string][]string
	// SubnetEnvPresent reports whether /run/flannel/subnet.env exists.
	SubnetEnvPresent bool
	// ServiceState is `systemctl is-active` of the K3s unit.
	ServiceState string
	// ExternalCloudController is true when the inventory declares an external cloud controller.
	ExternalCloudController bool
	// TaintAge is how long the uninitialized taint has been seen on the node.
	TaintAge time.Duration
}

// Diagnosis is a recognised failure with what proves it and what to do.
type Diagnosis struct {
	// ID is stable: F1-cloud-controller, external-cloud-controller-missing,
	// manifest-deployer-stall, uninitialized-stall-unknown, no-podcidr, service-failing,
	// bring-up-timeout.
	ID string
	// Title is one line.
	Title string
	// Message explains the cause with the host's actual settings.
	Message string
	// Evidence lists the facts the diagnosis rests on (settings, journal lines, pods).
	Evidence []string
	// Fixes are the ways out, best first.
	Fixes []string
}

// NodeArgs returns the K3s arguments recorded in the node's k3s.io/node-args annotation
// (a JSON array: ["server", "--flag", "value", ...]) as flag name -> values. Boolean flags
// recorded without a value get "true". nil when the annotation is missing or malformed.
func NodeArgs(n *corev1.Node) map[string][]string {
	if n == nil {
		return nil
	}
	raw, ok := n.Annotations["k3s.io/node-args"]
	if !ok {
		return nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(raw), &argv); err != nil {
		return nil
	}
	out := map[string][]string{}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasVal {
			if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
				val = argv[i+1]
				i++
			} else {
				val = "true"
			}
		}
		out[name] = append(out[name], val)
	}
	return out
}

// args returns the best-known K3s arguments: the node's annotation, else the config files.
func (ev Evidence) args() map[string][]string {
	if a := NodeArgs(ev.Node); a != nil {
		return a
	}
	return ev.ConfigArgs
}

// argsSource says where args() read the node's K3s arguments.
func (ev Evidence) argsSource() string {
	if NodeArgs(ev.Node) != nil {
		return "node " + ev.NodeName + " annotation k3s.io/node-args"
	}
	return "the K3s config files on the host"
}

func lastValue(m map[string][]string, k string) (string, bool) {
	v := m[k]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// kubeletCloudProvider returns the kubelet's cloud-provider as the evidence shows it: the
// "Running kubelet" journal line is authoritative (it is what K3s actually ran); else
// kubelet-arg entries; else K3s's own rule (external while the embedded controller runs).
func (ev Evidence) kubeletCloudProvider() (value, source string) {
	for i := len(ev.Journal) - 1; i >= 0; i-- {
		l := ev.Journal[i]
		if j := strings.Index(l, k3s.LineRunningKubelet); j >= 0 {
			for _, f := range strings.Fields(l[j:]) {
				if v, ok := strings.CutPrefix(f, "--cloud-provider="); ok {
					return v, "journal: " + trimLine(l)
				}
			}
			return "", "journal: " + trimLine(l)
		}
	}
	if v, ok := k3s.ArgValue(ev.args()["kubelet-arg"], "cloud-provider"); ok {
		return v, "kubelet-arg cloud-provider=" + v + ", " + ev.argsSource()
	}
	if !ev.embeddedCCMDisabled() {
		return "external", "K3s sets it while its embedded cloud controller runs"
	}
	return "", "no kubelet-arg cloud-provider and the embedded cloud controller is disabled"
}

func (ev Evidence) embeddedCCMDisabled() bool {
	if v, ok := lastValue(ev.args(), "disable-cloud-controller"); ok {
		return v == "true"
	}
	for _, l := range ev.Journal {
		if strings.Contains(l, k3s.LineRunningCCM) {
			return false
		}
	}
	for _, l := range ev.Journal {
		if strings.Contains(l, k3s.LineSkippingCCM) {
			return true
		}
	}
	return false
}

// cloudControllerPods returns pods that look like a cloud controller and whether one runs.
func (ev Evidence) cloudControllerPods() (names []string, running bool) {
	for _, p := range ev.Pods {
		if strings.Contains(p.Name, "cloud-controller") {
			names = append(names, p.Namespace+"/"+p.Name+" ("+string(p.Status.Phase)+")")
			if p.Status.Phase == corev1.PodRunning {
				running = true
			}
		}
	}
	return names, running
}

// PendingOn returns "namespace/name" of pods that are Pending and do not tolerate taint.
func PendingOn(pods []corev1.Pod, taint corev1.Taint) []string {
	var out []string
	for _, p := range pods {
		if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
			continue
		}
		if !tolerates(p.Spec.Tolerations, taint) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// tolerates reports whether any of tolerations tolerates taint (Kubernetes's own matching).
func tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), &taint, false) {
			return true
		}
	}
	return false
}

func (ev Evidence) journalMatches(fragment string) (count int, last string) {
	for _, l := range ev.Journal {
		if strings.Contains(l, fragment) {
			count++
			last = trimLine(l)
		}
	}
	return count, last
}

func trimLine(l string) string {
	l = strings.TrimSpace(l)
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}

func hasTaint(n *corev1.Node, key string) (corev1.Taint, bool) {
	if n == nil {
		return corev1.Taint{}, false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return t, true
		}
	}
	return corev1.Taint{}, false
}

// UninitializedStall explains why node.cloudprovider.kubernetes.io/uninitialized outlived its
// grace period. It distinguishes F1 (kubelet cloud-provider=external, embedded cloud
// controller disabled, no external one running), a declared external cloud controller that is
// not running, the manifest-deployer (CRD) stall after a crash during first start
// (docs/k3s.md), and an unknown cause (with the journal tail as evidence).
func UninitializedStall(ev Evidence) Diagnosis {
	taint, _ := hasTaint(ev.Node, k3s.TaintUninitialized)
	cp, cpSource := ev.kubeletCloudProvider()
	ccmOff := ev.embeddedCCMDisabled()
	ccmPods, ccmRunning := ev.cloudControllerPods()
	pending := PendingOn(ev.Pods, taint)
	waits, lastWait := ev.journalMatches(k3s.LineWaitingTaint)
	shutdowns, lastShutdown := ev.journalMatches(k3s.LineShutdownTaint)

	var evidence []string
	evidence = append(evidence, fmt.Sprintf("node %s has taint %s=%s:%s for %s", ev.NodeName, taint.Key, taint.Value, taint.Effect, ev.TaintAge.Round(time.Second)))
	evidence = append(evidence, fmt.Sprintf("kubelet cloud-provider=%q (%s)", cp, cpSource))
	if ccmOff {
		src := "journal: " + k3s.LineSkippingCCM
		if _, ok := lastValue(ev.args(), "disable-cloud-controller"); ok {
			src = ev.argsSource()
		}
		evidence = append(evidence, "K3s's embedded cloud controller is disabled (disable-cloud-controller: true, "+src+")")
	} else {
		evidence = append(evidence, "K3s's embedded cloud controller is enabled")
	}
	if len(ccmPods) > 0 {
		evidence = append(evidence, "cloud controller pods: "+strings.Join(ccmPods, ", "))
	} else if ev.Pods != nil {
		evidence = append(evidence, "no cloud controller pod in the cluster")
	}
	if len(pending) > 0 {
		evidence = append(evidence, "Pending on the taint: "+strings.Join(pending, ", "))
	}
	if waits > 0 {
		evidence = append(evidence, fmt.Sprintf("journal, %d times: %s", waits, lastWait))
	}
	if shutdowns > 0 {
		evidence = append(evidence, fmt.Sprintf("journal, %d times: %s", shutdowns, lastShutdown))
	}

	switch {
	case cp == "external" && ccmOff && !ccmRunning && !ev.ExternalCloudController:
		return Diagnosis{
			ID:    checkid.F1CloudController,
			Title: "F1: no cloud controller will ever initialise this node",
			Message: fmt.Sprintf("The kubelet on %s runs with cloud-provider=external, so the node registered with the %s taint, "+
				"but K3s's embedded cloud controller is disabled and no external cloud controller runs: nothing will remove the taint. "+
				"CoreDNS and every pod without a matching toleration stay Pending; K3s's network policy controller waits for the taint "+
				"and, on K3s v1.36, shuts K3s down after ~15 minutes, after which systemd restarts it and the cycle repeats.",
				ev.NodeName, k3s.TaintUninitialized),
			Evidence: evidence,
			Fixes: []string{
				"keep K3s's embedded cloud controller: remove disable-cloud-controller from the K3s config (spec.k3s.cloudController: embedded) and re-run `k3strap apply`",
				"or declare the cloud controller you run: spec.k3s.cloudController: external with externalCloudController.manifest, and re-run `k3strap apply`",
				"or, without any cloud controller, drop kubelet-arg cloud-provider=external (spec.k3s.cloudController: disabled; no ServiceLB then)",
				fmt.Sprintf("last resort, by hand and never automatic: `kubectl taint nodes %s %s-`", ev.NodeName, k3s.TaintUninitialized),
			},
		}
	case cp == "external" && ccmOff && (ev.ExternalCloudController || len(ccmPods) > 0) && !ccmRunning:
		return Diagnosis{
			ID:    checkid.ExternalCloudControllerMissing,
			Title: "the external cloud controller is not running",
			Message: fmt.Sprintf("K3s's embedded cloud controller is disabled and the kubelet on %s runs with cloud-provider=external, "+
				"so the external cloud controller must initialise the node — but none is running yet.", ev.NodeName),
			Evidence: evidence,
			Fixes: []string{
				"check the external cloud controller's pods (`kubectl -n kube-system get pods`) — they must tolerate " + k3s.TaintUninitialized + " and " + k3s.TaintControlPlane,
				"check that its manifest (spec.k3s.externalCloudController.manifest) was applied: it is placed in /var/lib/rancher/k3s/server/manifests/ on the first server",
			},
		}
	}
	if n, last := ev.journalMatches(k3s.LineWaitingCRD); n > 0 && !ccmOff {
		evidence = append(evidence, fmt.Sprintf("journal, %d times: %s", n, last))
		return Diagnosis{
			ID:    checkid.ManifestDeployerStall,
			Title: "K3s is waiting for its own CRDs; the cloud controller has not run yet",
			Message: "The embedded cloud controller is enabled, so this is not F1: K3s is still waiting for a CRD of its packaged " +
				"manifests (seen after a crash during the first start left a half-created CRD). The taint usually clears within " +
				"about 70 s and subnet.env follows; flannel also waits for its RBAC from those manifests.",
			Evidence: evidence,
			Fixes: []string{
				"wait: re-run `k3strap apply` in a minute or two (it resumes)",
				"if it persists: `systemctl restart k3s` on the host and watch `journalctl -u k3s -f` for the CRD it waits for",
			},
		}
	}
	msg := "The uninitialized taint stays although the evidence does not show F1"
	if !ccmOff {
		msg += ": K3s's embedded cloud controller is enabled but has not initialised the node"
	}
	msg += ". The journal tail below shows what K3s is doing."
	return Diagnosis{
		ID:       checkid.UninitializedStallUnknown,
		Title:    "the node stays uninitialized",
		Message:  msg,
		Evidence: append(evidence, journalTail(ev.Journal, 15)...),
		Fixes: []string{
			"look at `journalctl -u k3s` on the host for errors of the cloud controller",
			"re-run `k3strap apply` once the cause is fixed (it resumes)",
		},
	}
}

// ServiceFailing explains a K3s unit that does not stay up (crash loop or failed start), from
// its journal (oldest first, with or without journald's "date host unit[pid]: " prefix). The
// evidence leads with the fatal line K3s printed before each exit (FatalLines): a K3s start
// prints many error lines that are noise (503 responses while the runtime core is not ready,
// sysctls it may not set), and the line that says why it exits is the last fatal one before
// systemd's "Main process exited" (testdata/real-k3s-v1.36.3/journal-crashloop-readonly-sysctl.txt).
// The other error lines follow as context.
func ServiceFailing(ev Evidence, unit string) Diagnosis {
	fatal := FatalLines(ev.Journal)
	shown := map[string]bool{}
	var evidence []string
	for _, l := range fatal {
		shown[l] = true
		evidence = append(evidence, trimLine(l))
	}
	var errs []string
	for _, l := range ev.Journal {
		if !shown[l] && isErrorLine(l) {
			errs = append(errs, "context: "+trimLine(l))
		}
	}
	if len(errs) > 8 {
		errs = errs[len(errs)-8:]
	}
	evidence = append(evidence, errs...)
	if len(evidence) == 0 {
		evidence = journalTail(ev.Journal, 10)
	}
	msg := fmt.Sprintf("The %s service keeps failing; systemd restarts it every few seconds. The last error lines of its journal "+
		"say why.", unit)
	if len(fatal) > 0 {
		msg = fmt.Sprintf("The %s service keeps failing; systemd restarts it every few seconds. K3s exits because: %s",
			unit, journalMessage(fatal[len(fatal)-1]))
	}
	d := Diagnosis{
		ID:       checkid.ServiceFailing,
		Title:    fmt.Sprintf("%s does not stay up (state %q)", unit, ev.ServiceState),
		Message:  msg,
		Evidence: evidence,
		Fixes:    []string{fmt.Sprintf("read `journalctl -u %s` on the host, fix the cause in the inventory, and re-run `k3strap apply`", unit)},
	}
	if n, last := ev.journalMatches(k3s.LineCriticalMismatch); n > 0 {
		d.ID = checkid.CriticalConfigMismatch
		d.Title = "this server's critical settings differ from the cluster's"
		d.Message = "K3s refuses to join a server whose critical settings (cluster-cidr, service-cidr, disable, flannel-backend, ...) differ from the first server's."
		if !shown[last] {
			d.Evidence = append([]string{last}, d.Evidence...)
		}
		d.Fixes = append([]string{"make the critical settings equal on every server (set them in spec.k3s.config, not per host)"}, d.Fixes...)
	}
	return d
}

// Journal line patterns of a K3s exit (never written after initialisation).
var (
	// fatalRE matches the lines that say why K3s exits: logrus level=fatal, K3s's "Shutdown
	// request received" (a component ended and took K3s down), and a klog error line
	// `E1124 05:12:42.539502  189 kubelet.go:1821] "Failed to start …"`.
	fatalRE = regexp.MustCompile(`level=fatal|Shutdown request received|\bE\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+\] "Failed to start`)
	// errorRE matches error lines (logrus level=error/fatal, klog E/F lines).
	errorRE = regexp.MustCompile(`level=(?:error|fatal)|\b[EF]\d{4} \d\d:\d\d:\d\d\.\d+\s`)
	// imagePullRE matches the kubelet's and containerd's image pull errors.
	imagePullRE = regexp.MustCompile(`(?i)pull(ing)? image|ErrImagePull|ImagePullBackOff|failed to resolve reference|PullImage`)
	// prefixRE matches journald's short prefix "Nov 24 05:12:42 host unit[pid]: ".
	prefixRE = regexp.MustCompile(`^[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \S+ \S+: `)
	// klogHeaderRE matches klog's "E1124 05:12:42.539502     189 file.go:1] ".
	klogHeaderRE = regexp.MustCompile(`^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+\] `)
	// logrusMsgRE extracts msg="…" of a logrus line.
	logrusMsgRE = regexp.MustCompile(`msg="((?:[^"\\]|\\.)*)"`)
)

// isErrorLine reports whether l is an error line that can explain a K3s exit. Errors about
// pulling container images are workload noise (the kubelet retries them forever; they never
// stop K3s) and are left out.
func isErrorLine(l string) bool { return errorRE.MatchString(l) && !imagePullRE.MatchString(l) }

// FatalLines returns the lines of journal (oldest first) that say why K3s exited: for each
// systemd "Main process exited" line, the last fatal line (level=fatal, "Shutdown request
// received", a klog `E… "Failed to start …"`) since the previous exit; and the last fatal line
// after the final exit (a crash in progress). A message repeated by several crashes is kept
// once, at its latest occurrence (timestamps and pids ignored). nil when there is none.
func FatalLines(journal []string) []string {
	var all []string
	add := func(l string) { all = append(all, l) }
	last := ""
	for _, l := range journal {
		switch {
		case strings.Contains(l, k3s.LineMainExited):
			if last != "" {
				add(last)
			}
			last = ""
		case fatalRE.MatchString(l):
			last = l
		}
	}
	if last != "" {
		add(last)
	}
	// Keep the latest occurrence of each message, in order.
	var out []string
	seen := map[string]bool{}
	for i := len(all) - 1; i >= 0; i-- {
		if k := journalMessage(all[i]); !seen[k] {
			seen[k] = true
			out = append([]string{all[i]}, out...)
		}
	}
	return out
}

// journalMessage strips journald's prefix, klog's header and logrus's time/level from a
// journal line, for comparing repeats and quoting in a message.
func journalMessage(l string) string {
	l = prefixRE.ReplaceAllString(strings.TrimSpace(l), "")
	l = klogHeaderRE.ReplaceAllString(l, "")
	if m := logrusMsgRE.FindStringSubmatch(l); m != nil {
		return strings.ReplaceAll(m[1], `\"`, `"`)
	}
	return trimLine(l)
}

// Timeout describes a bring-up that reached its deadline: the last milestone (a k3s.Milestone
// name, possibly with detail such as "node-registered at 9.3 s"), the node's taints and
// conditions, and the journal tail.
func Timeout(ev Evidence, lastMilestone string, after time.Duration) Diagnosis {
	var evidence []string
	evidence = append(evidence, "last milestone reached: "+lastMilestone)
	if ev.Node == nil {
		evidence = append(evidence, "node "+ev.NodeName+" never registered")
	} else {
		var taints []string
		for _, t := range ev.Node.Spec.Taints {
			taints = append(taints, t.ToString())
		}
		evidence = append(evidence, "taints: "+orNone(strings.Join(taints, ", ")))
		evidence = append(evidence, "spec.podCIDR: "+orNone(ev.Node.Spec.PodCIDR))
		for _, c := range ev.Node.Status.Conditions {
			if c.Type == corev1.NodeReady || c.Status == corev1.ConditionTrue {
				evidence = append(evidence, fmt.Sprintf("condition %s=%s (%s)", c.Type, c.Status, c.Message))
			}
		}
	}
	evidence = append(evidence, fmt.Sprintf("subnet.env present: %v; service: %s", ev.SubnetEnvPresent, ev.ServiceState))
	evidence = append(evidence, journalTail(ev.Journal, 15)...)
	d := Diagnosis{
		ID:       checkid.BringUpTimeout,
		Title:    fmt.Sprintf("the server did not come up within %s", after.Round(time.Second)),
		Message:  "Bring-up stopped at \"" + lastMilestone + "\".",
		Evidence: evidence,
		Fixes:    []string{"read the journal lines above and `journalctl -u k3s` on the host", "re-run `k3strap apply` once fixed (it resumes), or with a longer --timeout"},
	}
	if ev.Node != nil && ev.Node.Spec.PodCIDR == "" {
		if v, ok := k3s.ArgValue(ev.args()["kube-controller-manager-arg"], "allocate-node-cidrs"); ok && v == "false" {
			d.ID = checkid.NoPodCIDR
			d.Message += " No PodCIDR is assigned because kube-controller-manager runs with allocate-node-cidrs=false, so flannel never writes subnet.env."
			d.Fixes = append([]string{"remove kube-controller-manager-arg allocate-node-cidrs=false, or bring a CNI that assigns pod addresses itself (cni.type: none)"}, d.Fixes...)
		}
	}
	return d
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func journalTail(lines []string, n int) []string {
	lines = slices.DeleteFunc(slices.Clone(lines), imagePullRE.MatchString)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, "journal: "+trimLine(l))
	}
	return out
}

// WaitingForUntaintedNode reports whether the journal shows K3s's own wait for an untainted
// node (printed only with the embedded cloud controller).
func WaitingForUntaintedNode(journal []string) bool {
	for _, l := range journal {
		if strings.Contains(l, k3s.LineWaitingUntaint) {
			return true
		}
	}
	return false
}
