// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nodeagent simulates the node side of a K3s process — kubelet, embedded flannel and
// the embedded network policy controller — for a server's own node (through the store) or an
// agent's / joined server's node (through the API). Timings are the real K3s v1.36.3 ones of
// fixtures timeline-default.txt and log-lines-*.txt, scaled by the clock.
package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/clock"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/sched"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/simlog"
)

// Offsets in real seconds, relative to node registration (timeline-default.txt: registered
// 9.25, annotations 9.30, Ready 9.52, role label 10.44; netpol ~20.5) or to the PodCIDR
// (13.46 -> flannel found ~14.0, subnet.env 15.40, kubelet "Updating Pod CIDR" 19.69).
const (
	annotateAfter   = 0.05
	readyAfter      = 0.2
	roleLabelAfter  = 1.1
	flannelFound    = 0.5
	flannelWrite    = 1.4
	kubeletPodCIDR  = 4.3
	netpolAfter     = 11.2
	netpolInterval  = 2.0
	netpolShutdown  = 914.0 // seconds after process start (log-lines-f1.txt)
	crdStallRelease = 70.0  // seconds after process start (docs/k3s.md#bring-up-timeline, CRD stall)
	// The kubelet's heartbeats (kubelet defaults): the node Lease in kube-node-lease
	// (leaseDurationSeconds 40) is renewed every 10 s (nodeStatusUpdateFrequency, a quarter of
	// the lease), and the node status — every condition's lastHeartbeatTime — is posted when
	// nodeStatusReportFrequency (5 min, kubelet-arg node-status-report-frequency) has passed
	// since the last post that succeeded, checked every 10 s.
	statusUpdateEvery    = 10.0
	leaseDurationSeconds = 40
	// DefaultStatusReportEvery is the kubelet's default nodeStatusReportFrequency (seconds).
	DefaultStatusReportEvery = 300.0
)

// ErrNetpolTimeout is returned by Run when the network policy controller gave up waiting
// for the uninitialized taint (F1): K3s shuts down and systemd restarts it.
var ErrNetpolTimeout = errors.New("network policy controller failed to wait for node.cloudprovider.kubernetes.io/uninitialized taint to be removed")

// Host describes what the kubelet reports about its machine.
type Host struct {
	OSImage, KernelVersion, Architecture, MachineID, BootID string
	CPUs                                                    int
	MemoryKi, DiskKi                                        int64
}

// Config configures one node.
type Config struct {
	Log   *simlog.Logger
	Clock clock.Clock
	API   NodeAPI
	// RegisterAt is when the kubelet registers, in real seconds after process start.
	RegisterAt float64

	NodeName    string
	NodeIP      string
	ExternalIPs []string
	// Labels are the node-label entries (key=value).
	Labels []string
	// Taints are the registration taints in order: node-taint entries, the uninitialized taint
	// (when CloudProviderExternal) and node.kubernetes.io/not-ready:NoSchedule.
	Taints []corev1.Taint
	// CloudProviderExternal: the kubelet runs with --cloud-provider=external.
	CloudProviderExternal bool
	// EmbeddedCCM: K3s's cloud controller runs in the cluster; the node then carries the
	// k3s.io/hostname and k3s.io/internal-ip annotations it reads (absent in node-f1.json).
	EmbeddedCCM bool
	// ControlPlane: a server's node (gets node-role.kubernetes.io/control-plane=true).
	ControlPlane bool
	// Etcd: an embedded-etcd member (gets node-role.kubernetes.io/etcd=true).
	Etcd bool
	// NodeArgs, NodeEnv are the k3s.io/node-args and k3s.io/node-env annotation values.
	NodeArgs, NodeEnv string

	FlannelBackend string // vxlan, host-gw, wireguard-native or none
	ClusterCIDR    string
	// SubnetEnvPath is the physical path of /run/flannel/subnet.env.
	SubnetEnvPath string
	// DisableNetworkPolicy turns the network policy controller (and the F1 shutdown) off.
	DisableNetworkPolicy bool
	// SubnetEnvWaitsForTaint, CRDStall are knobs (see package knobs).
	SubnetEnvWaitsForTaint, CRDStall bool
	// APIHostPort is the address in the network policy controller's timeout line
	// (127.0.0.1:6443 on servers, 127.0.0.1:6444 on agents).
	APIHostPort string
	Version     string
	Host        Host
	// OnRegistered is called once the node is registered (agents send sd_notify READY).
	OnRegistered func()
	// StatusReportEvery is the kubelet's nodeStatusReportFrequency in real seconds (0:
	// DefaultStatusReportEvery).
	StatusReportEvery float64
}

// Run registers the node and runs flannel and the network policy controller until ctx
// ends (nil) or the network policy controller times out (ErrNetpolTimeout, after logging the
// K3s shutdown lines).
func Run(ctx context.Context, cfg Config) error {
	c := cfg.Clock
	if err := c.Until(ctx, cfg.RegisterAt); err != nil {
		return nil
	}
	regAt := time.Now()
	if err := register(ctx, cfg); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if cfg.OnRegistered != nil {
		cfg.OnRegistered()
	}
	errs := make(chan error, 2)
	cidrLogged := make(chan struct{})
	go func() { errs <- flannel(ctx, cfg) }()
	go kubeletPodCIDRLines(ctx, cfg, cidrLogged)
	go func() { errs <- netpol(ctx, cfg, regAt, cidrLogged) }()
	if err := clock.SleepUntil(ctx, regAt.Add(c.D(annotateAfter))); err == nil {
		_ = retry(ctx, cfg, func() error { return annotate(ctx, cfg) })
		cfg.Log.Infof("Annotations and labels have been set successfully on node: %s", cfg.NodeName)
		if cfg.FlannelBackend != "none" {
			cfg.Log.Infof("Starting flannel with backend %s", cfg.FlannelBackend)
		}
	}
	if err := clock.SleepUntil(ctx, regAt.Add(c.D(readyAfter))); err == nil {
		if retry(ctx, cfg, func() error { return setReady(ctx, cfg) }) == nil {
			go heartbeat(ctx, cfg, time.Now())
		}
		cfg.Log.Klog("kubelet_node_status.go:431", "Fast updating node status as it just became ready")
	}
	if cfg.ControlPlane || cfg.Etcd { // an etcd-only server gets the etcd role alone
		if err := clock.SleepUntil(ctx, regAt.Add(c.D(roleLabelAfter))); err == nil {
			_ = retry(ctx, cfg, func() error { return roleLabels(ctx, cfg) })
			cfg.Log.Infof("Labels and annotations have been set successfully on node: %s", cfg.NodeName)
		}
	}
	for i := 0; i < 2; i++ {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			if err != nil {
				return err
			}
		}
	}
	<-ctx.Done()
	return nil
}

// pollEvery is how often the node side re-reads its Node (0.1 s real, at least 15 ms so a
// heavily scaled run does not spin).
func pollEvery(c clock.Clock) time.Duration {
	d := c.D(0.1)
	if d < 15*time.Millisecond {
		d = 15 * time.Millisecond
	}
	return d
}

// retry runs fn until it succeeds or ctx ends (the API may be briefly unreachable).
func retry(ctx context.Context, cfg Config, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if err := clock.SleepUntil(ctx, time.Now().Add(pollEvery(cfg.Clock)*5)); err != nil {
			return err
		}
	}
}

func register(ctx context.Context, cfg Config) error {
	cfg.Log.Klog("kubelet_node_status.go:75", "Attempting to register node", "node", cfg.NodeName)
	return retry(ctx, cfg, func() error {
		_, err := cfg.API.CreateNode(ctx, buildNode(cfg))
		switch {
		case err == nil:
			cfg.Log.Klog("kubelet_node_status.go:78", "Successfully registered node", "node", cfg.NodeName)
			return nil
		case apierrors.IsAlreadyExists(err):
			// A restart: the Node object survives; the kubelet only refreshes what it owns.
			cfg.Log.Klog("kubelet_node_status.go:124", "Node was previously registered", "node", cfg.NodeName)
			n := buildNode(cfg)
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": n.Labels}})
			if err := cfg.API.PatchNode(ctx, cfg.NodeName, patch); err != nil {
				return err
			}
			st, _ := json.Marshal(map[string]any{"status": map[string]any{"addresses": n.Status.Addresses, "nodeInfo": n.Status.NodeInfo}})
			return cfg.API.PatchNodeStatus(ctx, cfg.NodeName, st)
		default:
			return err
		}
	})
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

func buildNode(cfg Config) *corev1.Node {
	h := cfg.Host
	labels := map[string]string{
		"beta.kubernetes.io/arch": h.Architecture, "beta.kubernetes.io/os": "linux",
		"kubernetes.io/arch": h.Architecture, "kubernetes.io/hostname": cfg.NodeName, "kubernetes.io/os": "linux",
	}
	for _, l := range cfg.Labels {
		k, v, _ := strings.Cut(l, "=")
		labels[k] = v
	}
	ann := map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	if cfg.CloudProviderExternal {
		ann["alpha.kubernetes.io/provided-node-ip"] = cfg.NodeIP
	}
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: cfg.NodeIP}}
	for _, e := range cfg.ExternalIPs {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: e})
	}
	addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: cfg.NodeName})
	capacity := corev1.ResourceList{}
	alloc := corev1.ResourceList{}
	set := func(l corev1.ResourceList, k corev1.ResourceName, v string) { l[k] = mustQuantity(v) }
	for _, l := range []corev1.ResourceList{capacity, alloc} {
		set(l, corev1.ResourceCPU, fmt.Sprint(h.CPUs))
		set(l, "hugepages-1Gi", "0")
		set(l, "hugepages-2Mi", "0")
		set(l, corev1.ResourceMemory, fmt.Sprintf("%dKi", h.MemoryKi))
		set(l, corev1.ResourcePods, "110")
	}
	set(capacity, corev1.ResourceEphemeralStorage, fmt.Sprintf("%dKi", h.DiskKi))
	set(alloc, corev1.ResourceEphemeralStorage, fmt.Sprint(h.DiskKi*1024*95/100))
	t := now()
	cond := func(typ corev1.NodeConditionType, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: corev1.ConditionFalse, Reason: reason, Message: msg,
			LastHeartbeatTime: mustTime(t), LastTransitionTime: mustTime(t)}
	}
	no := false
	return &corev1.Node{
		TypeMeta:   typeMetaNode,
		ObjectMeta: objectMeta(cfg.NodeName, labels, ann),
		Spec:       corev1.NodeSpec{Taints: append([]corev1.Taint{}, cfg.Taints...)},
		Status: corev1.NodeStatus{
			Addresses:   addrs,
			Capacity:    capacity,
			Allocatable: alloc,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, "KubeletNotReady", "[container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized, CSINode is not yet initialized]"),
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			DeclaredFeatures: []string{"ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
				"InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits"},
			Features: &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr(true)},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: h.MachineID, SystemUUID: strings.Repeat("0", 32), BootID: h.BootID,
				KernelVersion: h.KernelVersion, OSImage: h.OSImage, ContainerRuntimeVersion: "containerd://2.3.4",
				KubeletVersion: cfg.Version, OperatingSystem: "linux", Architecture: h.Architecture,
			},
			RuntimeHandlers: []corev1.NodeRuntimeHandler{
				{Name: "", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &no, UserNamespaces: &no}},
				{Name: "runc", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &no, UserNamespaces: &no}},
				{Name: "runhcs-wcow-process", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &no, UserNamespaces: &no}},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// annotate sets K3s's node config annotations (k3s.io/hostname, internal-ip, node-args,
// node-config-hash, node-env; pkg/nodeconfig).
func annotate(ctx context.Context, cfg Config) error {
	ann := map[string]string{
		"k3s.io/node-args":        cfg.NodeArgs,
		"k3s.io/node-env":         cfg.NodeEnv,
		"k3s.io/node-config-hash": ConfigHash(cfg.NodeArgs, cfg.NodeEnv),
	}
	if cfg.EmbeddedCCM {
		ann["k3s.io/hostname"] = cfg.NodeName
		ann["k3s.io/internal-ip"] = cfg.NodeIP
		if len(cfg.ExternalIPs) > 0 {
			ann["k3s.io/external-ip"] = strings.Join(cfg.ExternalIPs, ",")
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	return cfg.API.PatchNode(ctx, cfg.NodeName, patch)
}

func setReady(ctx context.Context, cfg Config) error {
	n, err := cfg.API.GetNode(ctx, cfg.NodeName)
	if err != nil {
		return err
	}
	t := mustTime(now())
	conds := n.Status.Conditions
	for i := range conds {
		conds[i].LastHeartbeatTime = t
		if conds[i].Type == corev1.NodeReady && conds[i].Status != corev1.ConditionTrue {
			conds[i].Status, conds[i].Reason, conds[i].Message = corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"
			conds[i].LastTransitionTime = t
		}
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	return cfg.API.PatchNodeStatus(ctx, cfg.NodeName, patch)
}

// heartbeat renews the node Lease and re-posts the node status (see statusUpdateEvery) until
// ctx ends; lastStatus is when the status was last posted. A failed attempt is simply made
// again at the next tick, as the kubelet does.
func heartbeat(ctx context.Context, cfg Config, lastStatus time.Time) {
	report := cfg.StatusReportEvery
	if report <= 0 {
		report = DefaultStatusReportEvery
	}
	every := cfg.Clock.D(statusUpdateEvery)
	if floor := pollEvery(cfg.Clock); every < floor {
		every = floor
	}
	attempt := func(fn func(context.Context) error) error {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return fn(actx)
	}
	var owner []metav1.OwnerReference
	renew := func(actx context.Context) error {
		if owner == nil {
			n, err := cfg.API.GetNode(actx, cfg.NodeName)
			if err != nil {
				return err
			}
			owner = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
		}
		renewed := metav1.NewMicroTime(time.Now())
		return cfg.API.RenewLease(actx, &coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName, Namespace: corev1.NamespaceNodeLease, OwnerReferences: owner},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(cfg.NodeName), LeaseDurationSeconds: ptr(int32(leaseDurationSeconds)),
				RenewTime: &renewed},
		})
	}
	_ = attempt(renew)
	for {
		if err := clock.SleepUntil(ctx, time.Now().Add(every)); err != nil {
			return
		}
		_ = attempt(renew)
		if time.Since(lastStatus) >= cfg.Clock.D(report) {
			if attempt(func(actx context.Context) error { return setReady(actx, cfg) }) == nil {
				lastStatus = time.Now()
			}
		}
	}
}

func roleLabels(ctx context.Context, cfg Config) error {
	labels := map[string]any{}
	if cfg.ControlPlane {
		labels["node-role.kubernetes.io/control-plane"] = "true"
	}
	md := map[string]any{"labels": labels}
	if cfg.Etcd {
		labels["node-role.kubernetes.io/etcd"] = "true"
		suffix, _ := pki.RandomHex(4)
		md["annotations"] = map[string]any{
			"etcd.k3s.cattle.io/node-name":    cfg.NodeName + "-" + suffix,
			"etcd.k3s.cattle.io/node-address": cfg.NodeIP,
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": md})
	return cfg.API.PatchNode(ctx, cfg.NodeName, patch)
}

// waitNode polls the node until cond holds or ctx ends.
func waitNode(ctx context.Context, cfg Config, cond func(*corev1.Node) bool) (*corev1.Node, error) {
	for {
		n, err := cfg.API.GetNode(ctx, cfg.NodeName)
		if err == nil && cond(n) {
			return n, nil
		}
		if err := clock.SleepUntil(ctx, time.Now().Add(pollEvery(cfg.Clock))); err != nil {
			return nil, err
		}
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// MTU returns flannel's MTU for a backend (vxlan 1450, wireguard-native 1420, host-gw 1500).
func MTU(backend string) int {
	switch backend {
	case "vxlan":
		return 1450
	case "wireguard-native":
		return 1420
	}
	return 1500
}

// SubnetEnv renders /run/flannel/subnet.env for a cluster CIDR and the node's PodCIDR, keys
// in flannel's order (fixture subnet.env).
func SubnetEnv(clusterCIDR, podCIDR, backend string) (string, error) {
	ip, ipn, err := net.ParseCIDR(podCIDR)
	if err != nil {
		return "", err
	}
	ip = ip.Mask(ipn.Mask).To4()
	if ip == nil {
		return "", fmt.Errorf("PodCIDR %s is not IPv4", podCIDR)
	}
	first := net.IPv4(ip[0], ip[1], ip[2], ip[3]+1)
	ones, _ := ipn.Mask.Size()
	return fmt.Sprintf("FLANNEL_NETWORK=%s\nFLANNEL_SUBNET=%s/%d\nFLANNEL_MTU=%d\nFLANNEL_IPMASQ=true\n",
		clusterCIDR, first, ones, MTU(backend)), nil
}

func flannel(ctx context.Context, cfg Config) error {
	if cfg.FlannelBackend == "none" {
		return nil
	}
	n, err := waitNode(ctx, cfg, func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" })
	if err != nil {
		return nil
	}
	if err := cfg.Clock.Sleep(ctx, flannelFound); err != nil {
		return nil
	}
	cfg.Log.Infof("Flannel found PodCIDR assigned for node %s", cfg.NodeName)
	if cfg.SubnetEnvWaitsForTaint {
		if n, err = waitNode(ctx, cfg, func(n *corev1.Node) bool { return !hasTaint(n, sched.TaintUninitialized) }); err != nil {
			return nil
		}
	}
	if cfg.CRDStall {
		if err := cfg.Clock.Until(ctx, crdStallRelease-flannelWrite); err != nil {
			return nil
		}
	}
	if err := cfg.Clock.Sleep(ctx, flannelWrite); err != nil {
		return nil
	}
	mac, _ := pki.RandomHex(5)
	backendData := "null"
	switch cfg.FlannelBackend {
	case "vxlan":
		backendData = fmt.Sprintf(`{"VNI":1,"VtepMAC":"%s"}`, macString("4a"+mac))
	case "wireguard-native":
		key, _ := pki.RandomHex(16)
		backendData = fmt.Sprintf(`{"PublicKey":"%s"}`, key)
	}
	ann := map[string]string{
		"flannel.alpha.coreos.com/backend-data":        backendData,
		"flannel.alpha.coreos.com/backend-type":        cfg.FlannelBackend,
		"flannel.alpha.coreos.com/kube-subnet-manager": "true",
		"flannel.alpha.coreos.com/public-ip":           cfg.NodeIP,
	}
	if err := retry(ctx, cfg, func() error {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		return cfg.API.PatchNode(ctx, cfg.NodeName, patch)
	}); err != nil {
		return nil
	}
	if cur, err := cfg.API.GetNode(ctx, cfg.NodeName); err == nil {
		cfg.Log.KlogText("kube.go:704", fmt.Sprintf("List of node(%s) annotations: %#v", cfg.NodeName, cur.Annotations))
	}
	content, err := SubnetEnv(cfg.ClusterCIDR, n.Spec.PodCIDR, cfg.FlannelBackend)
	if err != nil {
		return err
	}
	if err := pki.WriteFileAtomic(cfg.SubnetEnvPath, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write flannel subnet file: %w", err)
	}
	cfg.Log.Infof("Wrote flannel subnet file to /run/flannel/subnet.env")
	cfg.Log.Infof("Running flannel backend")
	return nil
}

// kubeletPodCIDRLines logs the kubelet's own PodCIDR lines ~6.2 s after the PodCIDR
// (log-lines-default.txt) and then closes done; it never depends on flannel's knobs.
func kubeletPodCIDRLines(ctx context.Context, cfg Config, done chan<- struct{}) {
	defer close(done)
	n, err := waitNode(ctx, cfg, func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" })
	if err != nil {
		return
	}
	if err := clock.SleepUntil(ctx, time.Now().Add(cfg.Clock.D(flannelFound+flannelWrite+kubeletPodCIDR))); err != nil {
		return
	}
	cfg.Log.Klog("kuberuntime_manager.go:2146", "Updating runtime config through cri with podcidr", "CIDR", n.Spec.PodCIDR)
	cfg.Log.Klog("kubelet_network.go:48", "Updating Pod CIDR", "originalPodCIDR", "", "newPodCIDR", n.Spec.PodCIDR)
}

func macString(hex string) string {
	var parts []string
	for i := 0; i+1 < len(hex) && len(parts) < 6; i += 2 {
		parts = append(parts, hex[i:i+2])
	}
	return strings.Join(parts, ":")
}

// netpol is the embedded network policy controller's start: it waits for the uninitialized
// taint to go (log line every 2 s) and gives up 914 s after process start (F1).
func netpol(ctx context.Context, cfg Config, regAt time.Time, cidrLogged <-chan struct{}) error {
	if cfg.DisableNetworkPolicy {
		return nil
	}
	if err := clock.SleepUntil(ctx, regAt.Add(cfg.Clock.D(netpolAfter))); err != nil {
		return nil
	}
	// Keep the fixture's order: with a PodCIDR, the kubelet's PodCIDR lines come first.
	if n, err := cfg.API.GetNode(ctx, cfg.NodeName); err == nil && n.Spec.PodCIDR != "" {
		select {
		case <-cidrLogged:
		case <-ctx.Done():
			return nil
		}
	}
	deadline := cfg.Clock.At(netpolShutdown)
	for {
		n, err := cfg.API.GetNode(ctx, cfg.NodeName)
		if err == nil && !hasTaint(n, sched.TaintUninitialized) {
			cfg.Log.Infof("Starting network policy controller version , built on , %s", goVersion())
			cfg.Log.KlogText("network_policy_controller.go:164", "Starting network policy controller")
			cfg.Log.KlogText("network_policy_controller.go:179", "Starting network policy controller full sync goroutine")
			return nil
		}
		if !time.Now().Before(deadline) {
			cfg.Log.Infof("Network policy controller waiting to get Node %s: Get \"https://%s/api/v1/nodes/%s?timeout=15m0s\": context deadline exceeded",
				cfg.NodeName, cfg.APIHostPort, cfg.NodeName)
			cfg.Log.Errorf("Shutdown request received: \"failed to start networking: network policy controller failed to wait for node.cloudprovider.kubernetes.io/uninitialized taint to be removed from Node %s: context deadline exceeded\"", cfg.NodeName)
			return ErrNetpolTimeout
		}
		cfg.Log.Infof("Network policy controller waiting for removal of node.cloudprovider.kubernetes.io/uninitialized taint")
		next := time.Now().Add(cfg.Clock.D(netpolInterval))
		if next.After(deadline) {
			next = deadline
		}
		if err := clock.SleepUntil(ctx, next); err != nil {
			return nil
		}
	}
}

// ConfigHash is K3s's k3s.io/node-config-hash: base32 of sha256(node-args + node-env)
// (pkg/nodeconfig).
func ConfigHash(args, env string) string { return configHash(args + env) }
