// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package apiserver serves the simulated server's HTTPS endpoints: the Kubernetes REST paths
// (/api/v1/..., /apis/GROUP/VERSION/..., discovery, watch, /version, /readyz, /livez) backed by
// the store with real metav1.Status errors, so client-go or a real kubectl with the written
// kubeconfig work; plus K3s's unauthenticated /cacerts and /ping and the token-authenticated
// join endpoints under /v1-k3s/ (delegated to another handler).
package apiserver

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// Config wires the API server.
type Config struct {
	// Store holds the objects.
	Store *store.Store
	// Version is the K3s version (e.g. v1.36.3+k3s1), reported by /version.
	Version string
	// Ready reports whether the simulated kube-apiserver is up (before that, Kubernetes paths
	// answer 503 "apiserver not ready" and /readyz fails, as K3s's supervisor does).
	Ready func() bool
	// CACert is served at /cacerts (the server CA bundle; its sha256 is in the K10 token).
	CACert []byte
	// Join handles /v1-k3s/... (token-authenticated joins); nil answers 404.
	Join http.Handler
	// BeforeNodeReplace runs before every PUT on /api/v1/nodes/NAME (not /status); the
	// conflictOnNextReplace knob uses it to bump the stored node first. May be nil.
	BeforeNodeReplace func(name string)
	// ServerAddress is reported in /api discovery (host:port).
	ServerAddress string
}

// Server is the HTTP handler.
type Server struct {
	cfg Config
}

// New returns the handler for cfg.
func New(cfg Config) *Server { return &Server{cfg: cfg} }

// anonymous paths need no client certificate (kube-apiserver's system:public-info-viewer
// plus K3s's supervisor endpoints).
func anonymous(path string) bool {
	switch path {
	case "/cacerts", "/ping", "/version", "/readyz", "/livez", "/healthz":
		return true
	}
	return strings.HasPrefix(path, "/v1-k3s/")
}

// Authenticated reports whether the request carries a client certificate that verified
// against the client CA (TLS config ClientAuth VerifyClientCertIfGiven).
func Authenticated(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// ServeHTTP routes the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if !anonymous(p) && !Authenticated(r) {
		writeStatus(w, metav1.Status{Code: http.StatusUnauthorized, Reason: metav1.StatusReasonUnauthorized, Message: "Unauthorized"})
		return
	}
	switch {
	case p == "/cacerts":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(s.cfg.CACert)
		return
	case p == "/ping":
		_, _ = w.Write([]byte("pong"))
		return
	case p == ReplicatePath:
		s.replicate(w, r)
		return
	case strings.HasPrefix(p, "/v1-k3s/"):
		if s.cfg.Join == nil {
			http.NotFound(w, r)
			return
		}
		s.cfg.Join.ServeHTTP(w, r)
		return
	}
	ready := s.cfg.Ready == nil || s.cfg.Ready()
	switch p {
	case "/readyz", "/livez", "/healthz":
		s.health(w, r, ready)
		return
	}
	if !ready {
		writeStatus(w, metav1.Status{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable, Message: "apiserver not ready"})
		return
	}
	switch {
	case p == "/version":
		s.version(w)
	case p == "/api" || p == "/api/":
		s.apiVersions(w)
	case p == "/apis" || p == "/apis/":
		s.apiGroupList(w)
	case strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/apis/"):
		s.resource(w, r)
	default:
		notFoundPath(w)
	}
}

// readyzChecks are the check names of a real v1.36.3 /readyz?verbose (fixture
// readyz-verbose-default.txt).
var readyzChecks = []string{"ping", "log", "etcd", "etcd-readiness", "informer-sync",
	"poststarthook/start-apiserver-admission-initializer", "poststarthook/generic-apiserver-start-informers",
	"poststarthook/priority-and-fairness-config-consumer", "poststarthook/priority-and-fairness-filter",
	"poststarthook/storage-object-count-tracker-hook", "poststarthook/start-apiextensions-informers",
	"poststarthook/start-apiextensions-controllers", "poststarthook/crd-informer-synced",
	"poststarthook/start-system-namespaces-controller", "poststarthook/peer-endpoint-reconciler-controller",
	"poststarthook/start-cluster-authentication-info-controller",
	"poststarthook/start-kube-apiserver-identity-lease-controller",
	"poststarthook/start-kube-apiserver-identity-lease-garbage-collector", "poststarthook/storage-readiness",
	"poststarthook/start-legacy-token-tracking-controller", "poststarthook/start-service-ip-repair-controllers",
	"poststarthook/rbac/bootstrap-roles", "poststarthook/scheduling/bootstrap-system-priority-classes",
	"poststarthook/priority-and-fairness-config-producer", "poststarthook/bootstrap-controller",
	"poststarthook/start-kubernetes-service-cidr-controller", "poststarthook/aggregator-reload-proxy-client-cert",
	"poststarthook/start-kube-aggregator-informers", "poststarthook/apiservice-status-local-available-controller",
	"poststarthook/apiservice-status-remote-available-controller", "poststarthook/apiservice-registration-controller",
	"poststarthook/apiservice-discovery-controller", "poststarthook/kube-apiserver-autoregistration",
	"autoregister-completion", "poststarthook/apiservice-openapi-controller",
	"poststarthook/apiservice-openapiv3-controller", "shutdown"}

func (s *Server) health(w http.ResponseWriter, r *http.Request, ready bool) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, verbose := r.URL.Query()["verbose"]
	if !ready {
		// kube-apiserver lists the checks on failure even without ?verbose.
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, "[+]ping ok\n[-]etcd failed: reason withheld\n%s check failed\n", name)
		return
	}
	if !verbose {
		_, _ = w.Write([]byte("ok"))
		return
	}
	var b strings.Builder
	for _, c := range readyzChecks {
		if name != "readyz" && (c == "informer-sync" || c == "shutdown" || c == "etcd-readiness") {
			continue
		}
		fmt.Fprintf(&b, "[+]%s ok\n", c)
	}
	fmt.Fprintf(&b, "%s check passed\n", name)
	_, _ = w.Write([]byte(b.String()))
}

func (s *Server) version(w http.ResponseWriter) {
	v := s.cfg.Version
	major, minor := "1", ""
	if parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	writeJSON(w, http.StatusOK, version.Info{
		Major: major, Minor: minor, GitVersion: v, GitCommit: "k3strap-simulator", GitTreeState: "clean",
		BuildDate: "2026-01-01T00:00:00Z", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	})
}
