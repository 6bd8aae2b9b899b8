package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/apiserver"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/nodeagent"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
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
	upstream, err := url.Parse(strings.TrimRight(s.Server, "/"))
	if err != nil {
		e.log.Fatalf("Error: invalid server %s", s.Server)
		return exitFatal
	}
	pair, err := tls.X509KeyPair(resp.ClientCert, resp.ClientKey)
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{pair}}}
	rp.FlushInterval = -1
	var ready atomic.Bool
	stop, err := e.serve(ctx, &proxy{rp: rp, ready: &ready}, serverCA, clientCA)
	if err != nil {
		e.log.Fatalf("Error: starting kubernetes: preparing server: %v", err)
		return exitFatal
	}
	defer stop()

	c := resp.Cluster
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
	// The joined server uses the first server's cluster-wide settings for its components.
	s.ClusterCIDR, s.ServiceCIDR = c.ClusterCIDR, c.ServiceCIDR
	e.spawnStartup(ctx, spawn, serverStartup{embeddedCCM: embeddedCCM, cloudExternal: cloudExternal, ready: &ready,
		caPEM: serverCA.CertPEM, adminCert: adminCert, adminKey: adminKey})
	if s.DisableAgent {
		<-ctx.Done()
		return exitOK
	}
	api, err := nodeagent.NewRemote(s.Server, ca, resp.ClientCert, resp.ClientKey)
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
