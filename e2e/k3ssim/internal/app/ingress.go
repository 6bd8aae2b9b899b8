// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// Ingress stand-in (SIMULATOR ONLY, documented in e2e/k3ssim/README.md): on a real K3s,
// Traefik (a packaged HelmChart) behind ServiceLB's svclb pods answers on every node's ports 80
// and 443 and routes by host to the backends of Ingress objects. No pod runs here, so the
// simulator answers in Traefik's place on the first server's knob ingressPort (default 443,
// HTTPS, certificate for the requested name from the server CA), once an Ingress exists:
//
//   - a Host matching an Ingress rule whose backend Service has a Deployment of the same name
//     with available replicas: GET /ping answers "pong" and /healthz "ok" (what Rancher
//     answers), any other path 200 with a line naming the backend;
//   - the same, but no available replica: 503 "no available server" (Traefik's answer);
//   - any other Host: 404 "404 page not found" (Traefik's default router).
//
// It runs only when K3s would run Traefik and ServiceLB (traefik and servicelb not disabled,
// embedded cloud controller on).
func (e *runtimeEnv) runIngress(ctx context.Context, st *store.Store, ca *pki.CA) {
	port := e.knobs.IngressPort
	if port <= 0 {
		return
	}
	changes, stop := st.Changes()
	defer stop()
	for {
		if ings, _ := store.ListTyped[networkingv1.Ingress](st, store.Ingresses, ""); len(ings) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-time.After(time.Second):
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		e.log.Warnf("k3s simulator: ingress stand-in cannot listen on port %d: %v", port, err)
		return
	}
	e.log.Infof("k3s simulator: ingress stand-in (in place of Traefik/ServiceLB) listening on :%d", port)
	var mu sync.Mutex
	certs := map[string]*tls.Certificate{}
	getCert := func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := hi.ServerName
		if name == "" {
			name = "localhost"
		}
		mu.Lock()
		defer mu.Unlock()
		if c, ok := certs[name]; ok {
			return c, nil
		}
		c, err := ca.ServingCert([]string{name})
		if err != nil {
			return nil, err
		}
		certs[name] = &c
		return &c, nil
	}
	srv := &http.Server{
		Handler:           ingressHandler(st),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		TLSConfig:         &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	_ = srv.Close()
}

// ingressHandler routes by Host to the stored Ingress rules (see runIngress).
func ingressHandler(st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		ings, _ := store.ListTyped[networkingv1.Ingress](st, store.Ingresses, "")
		for _, ing := range ings {
			for _, rule := range ing.Spec.Rules {
				if !strings.EqualFold(rule.Host, host) || rule.HTTP == nil || len(rule.HTTP.Paths) == 0 || rule.HTTP.Paths[0].Backend.Service == nil {
					continue
				}
				svc := rule.HTTP.Paths[0].Backend.Service.Name
				d, err := store.GetTyped[appsv1.Deployment](st, store.Deployments, ing.Namespace, svc)
				if err != nil || d.Status.AvailableReplicas == 0 {
					http.Error(w, "no available server", http.StatusServiceUnavailable)
					return
				}
				switch r.URL.Path {
				case "/ping":
					_, _ = io.WriteString(w, "pong")
				case "/healthz":
					_, _ = io.WriteString(w, "ok")
				default:
					_, _ = io.WriteString(w, "k3s simulator ingress stand-in: backend "+ing.Namespace+"/"+svc+"\n")
				}
				return
			}
		}
		http.Error(w, "404 page not found", http.StatusNotFound)
	})
}

// disabled reports whether the packaged component is in K3s's disable list.
func disabled(list []string, component string) bool {
	for _, d := range list {
		if d == component {
			return true
		}
	}
	return false
}
