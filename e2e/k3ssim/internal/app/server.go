// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/apiserver"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/config"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/controllers"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/flags"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/join"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/knobs"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/nodeagent"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// StateFile is the store's file under <data-dir>/server/db/.
const StateFile = "k3ssim-state.json"

func runServer(ctx context.Context, opts Options, args []string) int {
	env, ok := prepare(opts, flags.Server, args)
	if !ok {
		return exitFatal
	}
	if v, _ := env.cfg.Get("cluster-reset"); v == "true" {
		return env.clusterReset() // day2.go
	}
	if env.s.Server != "" {
		return runJoiningServer(ctx, env)
	}
	return env.runFirstServer(ctx)
}

// firstServerDeps are the pieces the first server builds before its timeline starts.
type firstServerDeps struct {
	serverCA, clientCA *pki.CA
	password           string
	adminCert, adminKy []byte
	st                 *store.Store
}

func (e *runtimeEnv) setupFirstServer() (*firstServerDeps, error) {
	tlsDir := filepath.Join(e.dataDir, "server", "tls")
	serverCA, err := pki.LoadOrCreateCA(tlsDir, "server-ca", "k3s-server-ca")
	if err != nil {
		return nil, fmt.Errorf("server CA: %w", err)
	}
	clientCA, err := pki.LoadOrCreateCA(tlsDir, "client-ca", "k3s-client-ca")
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	pw, err := e.ensureToken(serverCA.CertPEM)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	cert, key, err := loadOrIssueClient(tlsDir, "client-admin", clientCA, "system:admin", []string{"system:masters"})
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	st, err := store.Open(filepath.Join(e.dataDir, "server", "db", StateFile))
	if err != nil {
		return nil, err
	}
	return &firstServerDeps{serverCA: serverCA, clientCA: clientCA, password: pw, adminCert: cert, adminKy: key, st: st}, nil
}

func ensureNamespaces(st *store.Store) {
	for _, n := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}}
		ns.Name = n
		ns.Labels = map[string]string{"kubernetes.io/metadata.name": n}
		ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
		ns.Status.Phase = corev1.NamespaceActive
		_, _ = store.CreateTyped(st, store.Namespaces, "", ns)
	}
}

// ConcurrentWriteAnnotation counts the concurrent writes the conflictOnNextReplace knob made
// to a node (each one bumps its resourceVersion, so the PUT that follows gets 409 Conflict).
const ConcurrentWriteAnnotation = "k3ssim.k3strap.io/concurrent-writes"

// conflictHook implements the conflictOnNextReplace knob for PUTs on nodes.
func (e *runtimeEnv) conflictHook(st *store.Store) func(string) {
	src := knobs.ConflictSource{Path: e.opts.Root.Path(paths.KnobsFile), Getenv: e.opts.Getenv}
	return func(name string) {
		var state knobs.EnvConflictState
		take := false
		err := st.UpdateAux("knobs/conflictOnNextReplace", &state, func() error {
			var err error
			take, err = src.Take(&state)
			return err
		})
		if err != nil {
			e.log.Warnf("k3s simulator: %v", err)
			return
		}
		if take {
			// A concurrent writer: it changes the node (an annotation counting such writes),
			// so a client that retries without re-reading loses that change.
			_, _ = st.Mutate(store.Nodes, "", name, func(obj map[string]any) (bool, error) {
				md, _ := obj["metadata"].(map[string]any)
				if md == nil {
					return false, nil
				}
				ann, _ := md["annotations"].(map[string]any)
				if ann == nil {
					ann = map[string]any{}
					md["annotations"] = ann
				}
				n, _ := strconv.Atoi(fmt.Sprint(ann[ConcurrentWriteAnnotation]))
				ann[ConcurrentWriteAnnotation] = strconv.Itoa(n + 1)
				return true, nil
			})
		}
	}
}

// ownURL is how other servers reach this one directly: https://ADDRESS:PORT with the
// bind-address when it names one, else the node IP (both are in the serving certificate).
func (e *runtimeEnv) ownURL() string {
	host := e.nodeIP
	if ip := net.ParseIP(e.s.BindAddress); ip != nil && !ip.IsUnspecified() {
		host = e.s.BindAddress
	}
	return "https://" + net.JoinHostPort(host, strconv.Itoa(e.s.HTTPSListenPort))
}

func (e *runtimeEnv) writeKubeconfig(caPEM, cert, key []byte) error {
	server := "https://127.0.0.1:" + strconv.Itoa(e.s.HTTPSListenPort)
	if err := pki.WriteKubeconfig(e.opts.Root.Path(e.s.WriteKubeconfig), osMode(e.s.WriteKubeconfigMode), pki.Kubeconfig(server, caPEM, cert, key)); err != nil {
		return err
	}
	e.log.Infof("Wrote kubeconfig %s", e.s.WriteKubeconfig)
	return nil
}

func (e *runtimeEnv) runFirstServer(parent context.Context) int {
	s := e.s
	deps, err := e.setupFirstServer()
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	st := deps.st
	if s.ClusterInit {
		markEtcd(e.dataDir, e.nodeName) // day2.go
	}
	var pwMu sync.Mutex
	password := func() string { pwMu.Lock(); defer pwMu.Unlock(); return deps.password }
	rotate := func(pw string) error {
		pwMu.Lock()
		defer pwMu.Unlock()
		if err := writeTokenFiles(filepath.Join(e.dataDir, "server"), deps.serverCA.CertPEM, pw, s.AgentToken); err != nil {
			return err
		}
		deps.password = pw
		e.log.Infof("Server token rotated")
		return nil
	}
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		if err := st.Flush(); err != nil {
			e.log.Errorf("k3s simulator: saving state: %v", err)
		}
	}()
	wg.Add(1)
	go func() { defer wg.Done(); st.RunFlusher(ctx, 100*time.Millisecond, nil) }()
	ensureNamespaces(st)

	embeddedCCM := !s.DisableCloudController
	cloudExternal := kubeletCloudExternal(s, s.DisableCloudController)
	taints, err := e.registrationTaints(cloudExternal)
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	agentPW := ""
	if s.AgentToken != "" {
		if t, err := pki.ParseToken(s.AgentToken); err == nil {
			agentPW = t.Password
		}
	}
	cluster := join.Cluster{ClusterCIDR: s.ClusterCIDR, ServiceCIDR: s.ServiceCIDR, ClusterDNS: s.ClusterDNS,
		ClusterDomain: s.ClusterDomain, FlannelBackend: s.FlannelBackend, DisableCloudController: s.DisableCloudController,
		DisableNetworkPolicy: s.DisableNetworkPolicy, EgressSelectorMode: s.EgressSelectorMode, Etcd: s.ClusterInit}
	var ready atomic.Bool
	api := apiserver.New(apiserver.Config{
		Store: st, Version: e.opts.Version, Ready: ready.Load, CACert: deps.serverCA.CertPEM,
		Join: &join.Mux{Rotate: rotate, Join: &join.Handler{ServerPassword: password, AgentPassword: agentPW,
			Critical: s.Critical(), Cluster: cluster, ServerCA: deps.serverCA, ClientCA: deps.clientCA,
			ServerURL: e.ownURL()}},
		BeforeNodeReplace: e.conflictHook(st),
		ServerAddress:     fmt.Sprintf("%s:%d", e.nodeIP, s.HTTPSListenPort),
	})

	if err := e.clock.Until(ctx, tListen); err != nil {
		return exitOK
	}
	stop, err := e.serve(ctx, api, deps.serverCA, deps.clientCA)
	if err != nil {
		e.log.Fatalf("Error: starting kubernetes: preparing server: %v", err)
		return exitFatal
	}
	defer stop()

	spawn := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	e.spawnStartup(ctx, spawn, serverStartup{embeddedCCM: embeddedCCM, cloudExternal: cloudExternal, ready: &ready,
		caPEM: deps.serverCA.CertPEM, adminCert: deps.adminCert, adminKey: deps.adminKy, waitUntainted: embeddedCCM})
	if !embeddedCCM {
		spawn(func() {
			e.logAt(ctx, tSkipCCM1, func() {
				e.log.Klog("controller_descriptor.go:107", "Skipping a cloud provider controller", "controller", "cloud-node-lifecycle-controller")
			})
			e.logAt(ctx, tSkipCCM2, func() {
				e.log.Klog("controller_descriptor.go:107", "Skipping a cloud provider controller", "controller", "service-lb-controller")
				e.log.Klog("controller_descriptor.go:107", "Skipping a cloud provider controller", "controller", "node-route-controller")
			})
		})
	}
	addonsAt := tAddons
	if e.knobs.CRDStall {
		addonsAt = tCRDStallEnd
		spawn(func() { e.crdStallLines(ctx) })
	}
	ctrl := controllers.New(controllers.Config{
		Store: st, Log: e.log, Clock: e.clock, Knobs: e.knobs, EmbeddedCCM: embeddedCCM,
		AllocateNodeCIDRs: s.AllocateNodeCIDRs(), ClusterCIDR: s.ClusterCIDR, ServiceCIDR: s.ServiceCIDR,
		ClusterDNS: s.ClusterDNS, FlannelBackend: s.FlannelBackend, Disable: s.Disable,
		DisableHelmController: s.DisableHelmController, AddonsAt: addonsAt,
		ManifestsDir: filepath.Join(e.dataDir, "server", "manifests"),
	})
	spawn(func() {
		if e.clock.Until(ctx, tReady) == nil {
			ctrl.Run(ctx)
		}
	})
	if !disabled(s.Disable, "traefik") && !disabled(s.Disable, "servicelb") && embeddedCCM {
		spawn(func() { e.runIngress(ctx, st, deps.serverCA) }) // ingress.go
	}

	nodeErr := make(chan error, 1)
	if !s.DisableAgent {
		spawn(func() {
			nodeErr <- nodeagent.Run(ctx, e.nodeConfig(nodeagent.Local{Store: st}, tRegister, taints, cloudExternal,
				true, s.ClusterInit, cluster, "127.0.0.1:"+strconv.Itoa(s.HTTPSListenPort), nil))
		})
	}
	select {
	case <-ctx.Done():
		return exitOK
	case err := <-nodeErr:
		if err == nil {
			<-ctx.Done()
			return exitOK
		}
		return e.finish(err)
	}
}

// crdStallLines reproduces the manifest deployer's CRD wait of docs/k3s.md#bring-up-timeline.
// serverStartup is what a server — the first or a joined one — shows and does while it
// starts: the controller-manager lines, the kubeconfig, the kubelet line, READY=1 and
// "k3s is up and running" at the real K3s v1.36.3 moments (fixtures log-lines-*.txt).
type serverStartup struct {
	embeddedCCM, cloudExternal bool
	ready                      *atomic.Bool
	caPEM, adminCert, adminKey []byte
	// waitUntainted adds "Waiting for untainted node" after "up and running" (the first
	// server with the embedded cloud controller and a node of its own).
	waitUntainted bool
}

// spawnStartup runs the start-up sequence of st in goroutines started through spawn.
func (e *runtimeEnv) spawnStartup(ctx context.Context, spawn func(func()), st serverStartup) {
	s := e.s
	spawn(func() {
		e.logAt(ctx, tControllerLog, func() {
			e.log.Infof("%s", kcmLine(s, st.embeddedCCM))
			if st.embeddedCCM {
				e.log.Infof("%s", ccmLine(s))
			}
		})
	})
	spawn(func() {
		e.logAt(ctx, tKubeconfig, func() {
			if err := e.writeKubeconfig(st.caPEM, st.adminCert, st.adminKey); err != nil {
				e.log.Errorf("Failed to write kubeconfig: %v", err)
			}
		})
	})
	if !s.DisableAgent {
		spawn(func() { e.logImages(ctx) })
		spawn(func() {
			e.logAt(ctx, tKubeletLog, func() { e.log.Infof("%s", kubeletLine(s, e.nodeName, e.nodeIP, st.cloudExternal)) })
		})
	}
	spawn(func() {
		e.logAt(ctx, tReady, func() { st.ready.Store(true) })
		e.logAt(ctx, tUpAndRunning, func() {
			e.log.Infof("k3s is up and running")
			e.opts.Notify("READY=1")
			if st.waitUntainted && !s.DisableAgent {
				e.log.Infof("Waiting for untainted node")
			}
		})
	})
}

func (e *runtimeEnv) crdStallLines(ctx context.Context) {
	for at := tAddons; at < tCRDStallEnd; at += 5 {
		if e.clock.Until(ctx, at) != nil {
			return
		}
		e.log.Infof("Waiting for CRD addons.k3s.cattle.io to become available")
	}
	e.logAt(ctx, tCRDStallEnd, func() { e.log.Infof("Done waiting for CRD addons.k3s.cattle.io to become available") })
}

func (e *runtimeEnv) nodeConfig(api nodeagent.NodeAPI, registerAt float64, taints []corev1.Taint, cloudExternal, controlPlane, etcd bool,
	c join.Cluster, apiHostPort string, onRegistered func()) nodeagent.Config {
	return nodeagent.Config{
		Log: e.log, Clock: e.clock, API: api, RegisterAt: registerAt,
		NodeName: e.nodeName, NodeIP: e.nodeIP, ExternalIPs: e.s.ExternalIPs, Labels: e.s.NodeLabels, Taints: taints,
		CloudProviderExternal: cloudExternal, EmbeddedCCM: !c.DisableCloudController, ControlPlane: controlPlane, Etcd: etcd,
		NodeArgs: e.cfg.NodeArgs, NodeEnv: e.cfg.NodeEnv,
		FlannelBackend: c.FlannelBackend, ClusterCIDR: c.ClusterCIDR, SubnetEnvPath: e.opts.Root.Path(paths.SubnetEnv),
		DisableNetworkPolicy: c.DisableNetworkPolicy, SubnetEnvWaitsForTaint: e.knobs.SubnetEnvWaitsForTaint, CRDStall: e.knobs.CRDStall,
		APIHostPort: apiHostPort, Version: e.opts.Version, Host: e.host(), OnRegistered: onRegistered,
		StatusReportEvery: e.statusReportEvery(),
	}
}

// statusReportEvery is the kubelet's nodeStatusReportFrequency in seconds from
// kubelet-arg node-status-report-frequency (0: the kubelet default; an invalid value is
// reported and ignored).
func (e *runtimeEnv) statusReportEvery() float64 {
	v, ok := config.ArgValue(e.s.KubeletArgs, "node-status-report-frequency")
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.log.Warnf("k3s simulator: ignoring kubelet-arg node-status-report-frequency=%s: not a positive duration", v)
		return 0
	}
	return d.Seconds()
}
