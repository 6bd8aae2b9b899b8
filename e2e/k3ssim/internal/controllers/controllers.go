// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controllers simulates the control-plane loops of a K3s server that the installer
// observes: the embedded cloud controller (removes node.cloudprovider.kubernetes.io/uninitialized,
// sets providerID), kube-controller-manager's node IPAM (PodCIDR) and node lifecycle
// (not-ready taint), kube-scheduler (taints/tolerations, nodeSelector, affinity), the
// Deployment/DaemonSet/Job controllers, K3s's helm-controller and deploy controller (packaged
// add-ons, <data-dir>/server/manifests), and the detection of an applied external cloud
// controller. Timings are real K3s seconds scaled by the clock (fixtures timeline-*.txt).
package controllers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"time"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/clock"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/knobs"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/simlog"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// Offsets in real seconds relative to the moment a node (or its uninitialized taint) is first
// seen: timeline-default.txt registered 9.25 -> finalizer 10.51, providerID 12.96, PodCIDR
// 13.46, not-ready taint gone 13.48, ttl annotation 14.11.
const (
	finalizerAfter   = 1.2
	ccmInitAfter     = 3.7
	ipamAfter        = 4.2
	ttlAfter         = 4.8
	externalCCMDelay = 3.0  // after a Deployment/DaemonSet *cloud-controller-manager* appears in kube-system
	crdStallRelease  = 70.0 // seconds after process start (knob crdStall)
	addonStartDelay  = 2.0  // packaged add-on pods: scheduled -> Running
	jobStartDelay    = 1.0  // job pods: scheduled -> Running
)

// Config configures the controllers.
type Config struct {
	Store *store.Store
	Log   *simlog.Logger
	Clock clock.Clock
	Knobs knobs.Knobs
	// EmbeddedCCM is true unless disable-cloud-controller.
	EmbeddedCCM bool
	// AllocateNodeCIDRs is false with kube-controller-manager-arg allocate-node-cidrs=false.
	AllocateNodeCIDRs bool
	// ClusterCIDR is the pod network (PodCIDRs are /24s out of it, in registration order).
	ClusterCIDR string
	ServiceCIDR string
	ClusterDNS  string
	// FlannelBackend "none" means every node's network exists without subnet.env.
	FlannelBackend string
	// Disable lists packaged components not to deploy (traefik, servicelb, local-storage,
	// metrics-server, coredns).
	Disable []string
	// DisableHelmController turns the HelmChart handling off.
	DisableHelmController bool
	// ManifestsDir is the physical path of <data-dir>/server/manifests.
	ManifestsDir string
	// AddonsAt is when the deploy controller creates the packaged add-ons (real seconds after
	// process start).
	AddonsAt float64
}

// Controller runs the loops. Its in-memory timers are owned by the single Run goroutine.
type Controller struct {
	cfg Config

	taintSeen    map[string]time.Time // node -> when its uninitialized taint was first seen
	nodeSeen     map[string]time.Time // node -> first seen
	startable    map[string]time.Time // pod uid -> when it could first start
	running      map[string]time.Time // pod uid -> when it started running
	extCCMSeen   map[string]time.Time // "kind/name" -> first seen
	addonsDone   bool
	lastManifest time.Time
	nextWake     time.Time // earliest time-based step found by the last reconcile
	// sucUpgradedAt is when the SUC stand-in "replaced" a node's K3s (suc.go).
	sucUpgradedAt map[string]time.Time
}

// New returns a controller for cfg.
func New(cfg Config) *Controller {
	return &Controller{cfg: cfg,
		taintSeen: map[string]time.Time{}, nodeSeen: map[string]time.Time{},
		startable: map[string]time.Time{}, running: map[string]time.Time{}, extCCMSeen: map[string]time.Time{},
		sucUpgradedAt: map[string]time.Time{}}
}

// Run reconciles on every store change and when the next time-based step is due (with a
// slow safety tick) until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	changes, stop := c.cfg.Store.Changes()
	defer stop()
	for {
		c.reconcile()
		wait := time.Until(c.nextWake)
		if wait < time.Millisecond {
			wait = time.Millisecond
		}
		if wait > time.Second {
			wait = time.Second
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-changes:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// wakeAt asks for a reconcile at t (the earliest request of a pass wins).
func (c *Controller) wakeAt(t time.Time) {
	if c.nextWake.IsZero() || t.Before(c.nextWake) {
		c.nextWake = t
	}
}

// due reports whether t has come; if not, it schedules a reconcile for then.
func (c *Controller) due(now, t time.Time) bool {
	if now.Before(t) {
		c.wakeAt(t)
		return false
	}
	return true
}

func (c *Controller) reconcile() {
	now := time.Now()
	c.nextWake = time.Time{}
	if !c.addonsDone && c.due(now, c.cfg.Clock.At(c.cfg.AddonsAt)) {
		c.addonsDone = true
		c.deployAddons()
	}
	if c.addonsDone && c.due(now, c.lastManifest.Add(c.manifestInterval())) {
		c.lastManifest = now
		c.deployManifests()
		c.wakeAt(now.Add(c.manifestInterval()))
	}
	c.nodes(now)
	if !c.cfg.DisableHelmController {
		c.helmCharts()
	}
	c.tigera()
	c.deployments()
	c.daemonSets()
	c.jobs(now)
	c.pods(now)
	c.suc(now)
}

func (c *Controller) manifestInterval() time.Duration {
	d := c.cfg.Clock.D(5)
	if d < 200*time.Millisecond {
		d = 200 * time.Millisecond
	}
	return d
}

// scaled returns the knob deploymentDelay multiplied by the time scale.
func (c *Controller) deploymentDelay() time.Duration {
	return time.Duration(float64(c.cfg.Knobs.DeploymentDelay) * c.cfg.Clock.Scale)
}

func (c *Controller) disabled(component string) bool {
	for _, d := range c.cfg.Disable {
		if d == component {
			return true
		}
	}
	return false
}

// hash10 returns a 10-character pod-template-hash-like string for v (stable).
func hash10(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return safeEncode(sum[:], 10)
}

// safeEncode maps bytes onto Kubernetes' rand.SafeEncodeString alphabet (no vowels).
func safeEncode(b []byte, n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	out := make([]byte, n)
	for i := 0; i < n; i++ {
		out[i] = alphabet[int(b[i%len(b)])%len(alphabet)]
	}
	return string(out)
}

// suffix5 returns a random 5-character suffix like generateName's.
func suffix5() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return safeEncode(b[:], 5)
}
