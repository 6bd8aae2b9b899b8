// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// metricsGroupVersion is the API the stand-in serves for the APIService
// v1beta1.metrics.k8s.io that K3s's metrics-server manifests register.
const metricsGroupVersion = "metrics.k8s.io/v1beta1"

// metricsServerMain plays metrics-server as K3s deploys it
// (server/manifests/metrics-server/): HTTPS on --secure-port with a self-signed certificate
// written to --cert-dir (the APIService skips verification, as with the real one), /livez,
// /readyz and /healthz, and the discovery of metrics.k8s.io/v1beta1 with empty NodeMetrics and
// PodMetrics lists, which is what the API aggregator needs to call the APIService Available.
// It does not scrape kubelets, authenticate or authorize; other flags are accepted and ignored.
func metricsServerMain(args []string) int {
	logger := log.New(os.Stderr, "[metrics-server k3strap test stand-in] ", log.LstdFlags)
	port, certDir := "10250", ""
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch k {
		case "secure-port":
			port = v
		case "cert-dir":
			certDir = v
		}
	}
	cert, err := selfSignedCert(certDir)
	if err != nil {
		logger.Print(err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hs := &http.Server{
		Addr:              ":" + port,
		Handler:           metricsHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:          log.New(discardTLSHandshakes{logger}, "", 0),
	}
	go func() { <-ctx.Done(); hs.Close() }()
	logger.Printf("serving %s on :%s (empty metrics)", metricsGroupVersion, port)
	if err := hs.ListenAndServeTLS("", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Print(err)
		return 1
	}
	return 0
}

// discardTLSHandshakes drops the "TLS handshake error" lines of probes that close early.
type discardTLSHandshakes struct{ l *log.Logger }

func (d discardTLSHandshakes) Write(p []byte) (int, error) {
	if !strings.Contains(string(p), "TLS handshake error") {
		d.l.Print(string(p))
	}
	return len(p), nil
}

// metricsHandler serves the health paths and the metrics.k8s.io discovery and lists.
func metricsHandler() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	}
	mux.HandleFunc("/apis", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{metricsGroup()}})
	})
	mux.HandleFunc("/apis/metrics.k8s.io", func(w http.ResponseWriter, r *http.Request) {
		g := metricsGroup()
		g["kind"], g["apiVersion"] = "APIGroup", "v1"
		writeJSON(w, http.StatusOK, g)
	})
	mux.HandleFunc("/apis/"+metricsGroupVersion, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": metricsGroupVersion,
			"resources": []any{
				map[string]any{"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": []string{"get", "list"}},
				map[string]any{"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": []string{"get", "list"}},
			},
		})
	})
	mux.HandleFunc("/apis/"+metricsGroupVersion+"/", func(w http.ResponseWriter, r *http.Request) {
		rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/apis/"+metricsGroupVersion+"/"), "/")
		parts := strings.Split(rest, "/")
		switch {
		case rest == "nodes":
			writeJSON(w, http.StatusOK, metricsList("NodeMetricsList"))
		case rest == "pods", len(parts) == 3 && parts[0] == "namespaces" && parts[2] == "pods":
			writeJSON(w, http.StatusOK, metricsList("PodMetricsList"))
		case len(parts) == 2 && parts[0] == "nodes", len(parts) == 4 && parts[0] == "namespaces" && parts[2] == "pods":
			kind := "nodes"
			if len(parts) == 4 {
				kind = "pods"
			}
			writeJSON(w, http.StatusNotFound, map[string]any{
				"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": http.StatusNotFound,
				"message": fmt.Sprintf("%s.metrics.k8s.io %q not found", kind, parts[len(parts)-1]),
			})
		default:
			http.NotFound(w, r)
		}
	})
	return mux
}

func metricsGroup() map[string]any {
	v := map[string]any{"groupVersion": metricsGroupVersion, "version": "v1beta1"}
	return map[string]any{"name": "metrics.k8s.io", "versions": []any{v}, "preferredVersion": v}
}

func metricsList(kind string) map[string]any {
	return map[string]any{"kind": kind, "apiVersion": metricsGroupVersion, "metadata": map[string]any{}, "items": []any{}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// selfSignedCert makes the serving certificate, as metrics-server does without --tls-cert-file,
// and writes it to dir (apiserver.crt/.key) when dir is writable.
func selfSignedCert(dir string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "metrics-server k3strap test stand-in"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", host, "metrics-server.kube-system.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	if dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "apiserver.crt"), certPEM, 0o644); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "apiserver.key"), keyPEM, 0o600)
		}
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
