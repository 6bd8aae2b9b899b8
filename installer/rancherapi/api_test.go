// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package rancherapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/inventory"
)

// standIn is a Rancher v3 API stand-in (httptest TLS server) for the API client tests.
type standIn struct {
	mu       sync.Mutex
	clusters []map[string]any
	tokens   int
	posted   map[string]any
}

func (s *standIn) handler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer token-abc:secret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"type":"error","code":"Unauthorized","message":"must authenticate"}`))
			return
		}
		write := func(v any) { _ = json.NewEncoder(w).Encode(v) }
		switch {
		case r.Method == "GET" && r.URL.Path == "/v3/settings/server-version":
			write(map[string]any{"value": "v2.11.3"})
		case r.Method == "GET" && r.URL.Path == "/v3/clusters":
			var out []map[string]any
			for _, c := range s.clusters {
				if c["name"] == r.URL.Query().Get("name") {
					out = append(out, c)
				}
			}
			write(map[string]any{"data": out})
		case r.Method == "POST" && r.URL.Path == "/v3/clusters":
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			s.posted = body
			body["id"] = "c-abcde"
			s.clusters = append(s.clusters, body)
			write(body)
		case r.Method == "PUT" && r.URL.Path == "/v3/clusters/c-abcde":
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			for k, v := range body {
				s.clusters[0][k] = v
			}
			write(s.clusters[0])
		case r.Method == "GET" && r.URL.Path == "/v3/clusterregistrationtokens":
			var data []map[string]any
			if s.tokens > 0 {
				s.tokens++
				url := ""
				if s.tokens > 2 { // Rancher fills manifestUrl a moment later
					url = "https://" + r.Host + "/v3/import/tok_c-abcde.yaml"
				}
				data = append(data, map[string]any{"clusterId": "c-abcde", "manifestUrl": url})
			}
			write(map[string]any{"data": data})
		case r.Method == "POST" && r.URL.Path == "/v3/clusterregistrationtokens":
			s.tokens = 1
			write(map[string]any{})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(http.StatusNotFound)
		}
	})
}

func TestRancherAPI(t *testing.T) {
	s := &standIn{}
	srv := httptest.NewTLSServer(s.handler(t))
	defer srv.Close()
	hc, err := HTTPClient(true, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := &Client{Base: srv.URL, Token: "token-abc:secret", HTTP: hc, TokenWait: 10 * time.Second}
	if v, err := api.ServerVersion(ctx); err != nil || v != "v2.11.3" {
		t.Fatalf("serverVersion %q %v", v, err)
	}
	tols := []inventory.Toleration{{Key: "dedicated", Operator: "Equal", Value: "edge", Effect: "NoExecute"}}
	c, created, _, err := api.EnsureCluster(ctx, "lab", tols, tols)
	if err != nil || !created || c.ID != "c-abcde" {
		t.Fatalf("ensureCluster: %+v created %v: %v", c, created, err)
	}
	cad := s.posted["clusterAgentDeploymentCustomization"].(map[string]any)["appendTolerations"].([]any)[0].(map[string]any)
	if cad["key"] != "dedicated" || cad["effect"] != "NoExecute" || s.posted["fleetAgentDeploymentCustomization"] == nil {
		t.Errorf("posted %v", s.posted)
	}
	// Again: found, nothing to change. With one more toleration: updated, the old one kept.
	if _, created, updated, err := api.EnsureCluster(ctx, "lab", tols, tols); err != nil || created || updated {
		t.Errorf("second ensureCluster created %v updated %v: %v", created, updated, err)
	}
	more := append(tols, inventory.Toleration{Key: "CriticalAddonsOnly", Operator: "Exists"})
	c, _, updated, err := api.EnsureCluster(ctx, "lab", more, tols)
	if err != nil || !updated || len(c.ClusterAgentDeploymentCustomization.tolerations()) != 2 {
		t.Errorf("update: %+v %v %v", c, updated, err)
	}
	u, err := api.ImportManifestURL(ctx, "c-abcde")
	if err != nil || !strings.HasSuffix(u, "/v3/import/tok_c-abcde.yaml") {
		t.Fatalf("importManifestURL %q %v", u, err)
	}
	// A refused token: the error explains, and never shows the token.
	bad := &Client{Base: srv.URL, Token: "token-wrong:verysecret", HTTP: hc}
	_, err = bad.ServerVersion(ctx)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "API token was refused") || strings.Contains(err.Error(), "verysecret") {
		t.Errorf("refused token: %v", err)
	}
	// Verification without insecure fails against the test server's self-signed certificate.
	strict, _ := HTTPClient(false, "")
	if _, err := (&Client{Base: srv.URL, Token: "token-abc:secret", HTTP: strict}).ServerVersion(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("self-signed certificate accepted without insecure: %v", err)
	}
}

func TestFetchImportManifestRedactsToken(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v3/import/good_c-1.yaml" {
			_, _ = w.Write([]byte("kind: Namespace\n"))
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	hc, _ := HTTPClient(true, "")
	ctx := context.Background()
	if b, err := FetchImportManifest(ctx, hc, srv.URL+"/v3/import/good_c-1.yaml"); err != nil || string(b) != "kind: Namespace\n" {
		t.Fatalf("%q %v", b, err)
	}
	_, err := FetchImportManifest(ctx, hc, srv.URL+"/v3/import/SECRETTOKEN_c-1.yaml")
	if err == nil || strings.Contains(err.Error(), "SECRETTOKEN") || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("error %v", err)
	}
	_, err = FetchImportManifest(ctx, hc, "https://127.0.0.1:1/v3/import/SECRETTOKEN_c-1.yaml")
	if err == nil || strings.Contains(err.Error(), "SECRETTOKEN") {
		t.Errorf("connection error shows the token: %v", err)
	}
	if got := Origin("https://rancher.example.com:8443/v3/import/x_c-1.yaml"); got != "https://rancher.example.com:8443" {
		t.Errorf("Origin %q", got)
	}
}

func TestAgentMissingTolerations(t *testing.T) {
	manifest := `apiVersion: v1
kind: Namespace
metadata: {name: cattle-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cattle-cluster-agent, namespace: cattle-system}
spec:
  selector: {matchLabels: {app: cattle-cluster-agent}}
  template:
    metadata: {labels: {app: cattle-cluster-agent}}
    spec:
      tolerations:
      - {effect: NoSchedule, key: node-role.kubernetes.io/control-plane, operator: Exists}
      - {effect: NoExecute, key: dedicated, operator: Equal, value: edge}
      containers: [{name: cluster-register, image: rancher/rancher-agent:v2.11.3}]
`
	edge := inventory.Taint{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoExecute}
	gpu := inventory.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}
	missing, err := AgentMissingTolerations([]byte(manifest), []inventory.Taint{edge, gpu})
	if err != nil || len(missing) != 1 || missing[0] != gpu {
		t.Errorf("missing %v, %v", missing, err)
	}
	if _, err := AgentMissingTolerations([]byte("kind: Namespace\n"), nil); err == nil {
		t.Error("a manifest without the agent was accepted")
	}
}
