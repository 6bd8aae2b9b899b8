// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/apiserver"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/controllers"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/join"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/nodeagent"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/replica"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// proxy serves a joined server's port by forwarding to the first server (the cluster state
// lives there). Kubernetes paths need a client certificate of the cluster here too; the
// upstream call uses the joined server's admin identity.
type proxy struct {
	rp    *httputil.ReverseProxy
	ready *atomic.Bool
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	anon := path == "/cacerts" || path == "/ping" || path == "/version" || path == "/readyz" || path == "/livez" ||
		path == "/healthz" || strings.HasPrefix(path, "/v1-k3s/")
	if !anon && !apiserver.Authenticated(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
		return
	}
	if !p.ready.Load() && !anon {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"apiserver not ready","reason":%q,"code":503}`, metav1.StatusReasonServiceUnavailable)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// takeoverAfter is how long the first server must have been silent (no line on the
// replication stream, whose keepalives come every second) before a joined server serves the
// API from its replica. SIMULATOR behaviour: a real K3s server with embedded etcd serves
// from its own member all along and only needs etcd quorum (2 of 3 members); here the joined
// server proxies while the first server lives and takes over after this grace (not scaled).
const takeoverAfter = 3 * time.Second

// haServer serves a joined server's port (SIMULATOR behaviour, README "HA"). While the first
// server answers, requests are proxied to it and its state is replicated into the replica
// store. Once it has been silent for takeoverAfter (and the replica had synced), this server
// serves the API from the replica and runs the server controllers on it, so heartbeats of
// nodes that reach it land and can be read. When the first server answers again, it steps
// down: proxying resumes and the replica re-syncs from the first server (writes accepted
// here meanwhile are dropped — real etcd would keep them). There is no election: with two
// joined servers each takes over on its own.
type haServer struct {
	e           *runtimeEnv
	firstURL    string
	proxy       http.Handler
	local       http.Handler
	controllers controllers.Config
	follower    *replica.Follower
	leading     atomic.Bool

	mu       sync.Mutex // serialises takeOver and stepDown
	stopCtrl func()     // ends the controllers of the current takeover (nil when not leading)
}

func (h *haServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.leading.Load() {
		h.local.ServeHTTP(w, r)
		return
	}
	h.proxy.ServeHTTP(w, r)
}

// monitor takes over once the first server has been silent for takeoverAfter.
func (h *haServer) monitor(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !h.leading.Load() && h.follower.Synced() && time.Since(h.follower.LastContact()) >= takeoverAfter {
			h.takeOver(ctx)
		}
	}
}

func (h *haServer) takeOver(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leading.Load() || ctx.Err() != nil || time.Since(h.follower.LastContact()) < takeoverAfter {
		return
	}
	silent := time.Since(h.follower.LastContact()).Round(100 * time.Millisecond)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	cfg := h.controllers
	cfg.AddonsAt = 0 // the add-ons exist already; the deploy controller only re-checks them
	go func() { defer close(done); controllers.New(cfg).Run(cctx) }()
	h.stopCtrl = func() { cancel(); <-done }
	h.leading.Store(true)
	h.e.log.Infof("k3s simulator: first server %s silent for %s; serving the API from this server's replica (simulated etcd failover)", h.firstURL, silent)
}

// stepDown hands the API back to the first server (it answers again: logged) or ends a
// takeover because this server stops.
func (h *haServer) stepDown(firstBack bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.leading.Load() {
		return
	}
	h.leading.Store(false)
	h.stopCtrl()
	h.stopCtrl = nil
	if firstBack {
		h.e.log.Infof("k3s simulator: first server %s answers again; proxying to it and re-syncing the replica (writes made here since the takeover are dropped)", h.firstURL)
	}
}

func runJoiningServer(parent context.Context, e *runtimeEnv) int {
	s := e.s
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	resp, ca, ok := e.joinCluster(ctx, "server")
	if !ok {
		if parent.Err() != nil {
			return exitOK
		}
		return exitFatal
	}
	tok, _ := pki.ParseToken(s.Token)
	// Dedicated roles (docs.k3s.io "Managing Server Roles"): disable-etcd keeps the server out
	// of etcd; disable-apiserver (with the controller manager and scheduler) makes it etcd only.
	noEtcd, _ := e.cfg.Get("disable-etcd")
	noAPI, _ := e.cfg.Get("disable-apiserver")
	etcd, controlPlane := resp.Cluster.Etcd && noEtcd != "true", noAPI != "true"
	if etcd {
		markEtcd(e.dataDir, e.nodeName) // day2.go
	}
	tlsDir := filepath.Join(e.dataDir, "server", "tls")
	if err := pki.WriteCA(tlsDir, "server-ca", resp.ServerCACert, resp.ServerCAKey); err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	if err := pki.WriteCA(tlsDir, "client-ca", resp.ClientCACert, resp.ClientCAKey); err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	serverCA, err1 := pki.ParseCA(resp.ServerCACert, resp.ServerCAKey)
	clientCA, err2 := pki.ParseCA(resp.ClientCACert, resp.ClientCAKey)
	if err1 != nil || err2 != nil {
		e.log.Fatalf("Error: invalid cluster CA from %s", s.Server)
		return exitFatal
	}
	if err := writeTokenFiles(filepath.Join(e.dataDir, "server"), resp.ServerCACert, tok.Password, s.AgentToken); err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	adminCert, adminKey, err := loadOrIssueClient(tlsDir, "client-admin", clientCA, "system:admin", []string{"system:masters"})
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	// Replicate and proxy from the first server's own address (as etcd peers talk to each
	// other directly), not through the registration endpoint, which may name this server
	// once it moved.
	firstURL := resp.ServerURL
	if firstURL == "" {
		firstURL = s.Server
	}
	upstream, err := url.Parse(strings.TrimRight(firstURL, "/"))
	if err != nil {
		e.log.Fatalf("Error: invalid server %s", firstURL)
		return exitFatal
	}
	pair, err := tls.X509KeyPair(resp.ClientCert, resp.ClientKey)
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	transport := func() *http.Transport {
		return &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{pair}},
			DialContext:     (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 5 * time.Second}).DialContext,
		}
	}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.Transport = transport()
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // a gone first server answers 502; no stdlib log line per request
	var ready atomic.Bool
	copyStore, err := store.Open("") // in memory: the first server's state file stays the only datastore on disk
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	c := resp.Cluster
	agentPW := ""
	if t, err := pki.ParseToken(s.AgentToken); s.AgentToken != "" && err == nil {
		agentPW = t.Password
	}
	ha := &haServer{
		e: e, firstURL: upstream.String(),
		proxy: &proxy{rp: rp, ready: &ready},
		local: apiserver.New(apiserver.Config{
			Store: copyStore, Version: e.opts.Version, Ready: ready.Load, CACert: serverCA.CertPEM,
			Join: &join.Mux{Join: &join.Handler{ServerPassword: func() string { return tok.Password }, AgentPassword: agentPW,
				Critical: s.Critical(), Cluster: c, ServerCA: serverCA, ClientCA: clientCA, ServerURL: e.ownURL()}},
			ServerAddress: fmt.Sprintf("%s:%d", e.nodeIP, s.HTTPSListenPort),
		}),
		controllers: controllers.Config{
			Store: copyStore, Log: e.log, Clock: e.clock, Knobs: e.knobs, EmbeddedCCM: !c.DisableCloudController,
			AllocateNodeCIDRs: s.AllocateNodeCIDRs(), ClusterCIDR: c.ClusterCIDR, ServiceCIDR: c.ServiceCIDR,
			ClusterDNS: c.ClusterDNS, FlannelBackend: c.FlannelBackend, Disable: s.Disable,
			DisableHelmController: s.DisableHelmController,
			ManifestsDir:          filepath.Join(e.dataDir, "server", "manifests"),
		},
	}
	ha.follower = &replica.Follower{URL: upstream.String(), Client: &http.Client{Transport: transport()}, Store: copyStore,
		BeforeRestore: func() { ha.stepDown(true) }}
	stop, err := e.serve(ctx, ha, serverCA, clientCA)
	if err != nil {
		e.log.Fatalf("Error: starting kubernetes: preparing server: %v", err)
		return exitFatal
	}
	defer stop()
	defer ha.stepDown(false) // stop the controllers of a takeover before the server goes

	embeddedCCM := !c.DisableCloudController
	cloudExternal := kubeletCloudExternal(s, c.DisableCloudController)
	taints, err := e.registrationTaints(cloudExternal)
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	spawn := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	spawn(func() { ha.follower.Run(ctx) })
	spawn(func() { ha.monitor(ctx) })
	// The joined server uses the first server's cluster-wide settings for its components.
	s.ClusterCIDR, s.ServiceCIDR = c.ClusterCIDR, c.ServiceCIDR
	e.spawnStartup(ctx, spawn, serverStartup{embeddedCCM: embeddedCCM, cloudExternal: cloudExternal, ready: &ready,
		caPEM: serverCA.CertPEM, adminCert: adminCert, adminKey: adminKey})
	if s.DisableAgent {
		<-ctx.Done()
		return exitOK
	}
	// The kubelet of a server talks to its own API (proxied to the first server, or served
	// from the replica after a takeover).
	api, err := nodeagent.NewRemote("https://127.0.0.1:"+strconv.Itoa(s.HTTPSListenPort), ca, resp.ClientCert, resp.ClientKey)
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	err = nodeagent.Run(ctx, e.nodeConfig(api, tRegister, taints, cloudExternal, controlPlane, etcd,
		c, "127.0.0.1:"+strconv.Itoa(s.HTTPSListenPort), nil))
	if err == nil {
		return exitOK
	}
	return e.finish(err)
}
