// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rancherapi talks to an existing Rancher for `apply` with spec.rancher.register
// (docs/rancher.md): the part of Rancher's v3 API that creates an imported cluster with the agent
// tolerations a tainted first server needs (F3), the import manifest and what it tolerates.
// Tokens travel in headers only and never appear in an error.
package rancherapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/inventory"
)

// maxImportManifest bounds the import manifest k3strap downloads (bytes).
const maxImportManifest = 16 << 20

// HTTPClient returns the HTTP client for a Rancher server: certificate verified against
// the system roots or caFile (PEM), or not at all with insecure (a self-signed Rancher, as
// Rancher's own `curl --insecure` import command). Every request is bounded by 30 s.
func HTTPClient(insecure bool, caFile string) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case insecure:
		cfg.InsecureSkipVerify = true //nolint:gosec // the user's explicit choice (rancher.register.insecure)
	case caFile != "":
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("rancher.register.caCertFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("rancher.register.caCertFile %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// RedactURL returns u's scheme and host and, for an import URL (which embeds the registration
// token), "/v3/import/…" instead of its path: safe for messages.
func RedactURL(u string) string {
	p, err := neturl.Parse(u)
	if err != nil || p.Host == "" {
		return "(an unparsable URL)"
	}
	out := p.Scheme + "://" + p.Host
	if strings.HasPrefix(p.Path, "/v3/import/") {
		return out + "/v3/import/…"
	}
	return out + p.Path
}

// plainHTTPError strips the URL from a *url.Error (it may embed a token).
func plainHTTPError(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// FetchImportManifest downloads Rancher's import manifest (YAML) from u.
func FetchImportManifest(ctx context.Context, hc *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("import URL %s: %v", RedactURL(u), plainHTTPError(err))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the import manifest from %s: %v", RedactURL(u), plainHTTPError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxImportManifest+1))
	if err != nil {
		return nil, fmt.Errorf("fetching the import manifest from %s: %v", RedactURL(u), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the import manifest from %s: HTTP %d (an expired or deleted registration token answers 404 or 401: copy a fresh import URL from Rancher)", RedactURL(u), resp.StatusCode)
	}
	if len(body) > maxImportManifest {
		return nil, fmt.Errorf("the import manifest from %s is larger than %d bytes", RedactURL(u), maxImportManifest)
	}
	return body, nil
}

// Client is the part of Rancher's v3 API k3strap uses to create an imported cluster
// (docs/rancher.md): /v3/settings/server-version, /v3/clusters, /v3/clusterregistrationtokens.
// The token goes in the Authorization header only; errors never carry it.
type Client struct {
	Base  string // https://rancher.example.com (no trailing slash)
	Token inventory.Secret
	HTTP  *http.Client
	// tokenWait bounds waiting for Rancher to fill a registration token's manifestUrl.
	TokenWait time.Duration
}

// apiError is a non-2xx answer of the Rancher API.
type apiError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("Rancher API %s %s: HTTP %d", e.Method, e.Path, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		msg += " (the API token was refused: create a key in Rancher under account > API Keys, scope: no scope)"
	}
	return msg
}

func (a *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.Base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token.Reveal())
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("Rancher API %s %s%s: %v", method, a.Base, path, plainHTTPError(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("Rancher API %s %s: %v", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		}
		_ = json.Unmarshal(b, &e)
		return &apiError{Method: method, Path: path, Status: resp.StatusCode, Message: strings.TrimSpace(e.Code + " " + e.Message)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("Rancher API %s %s: decoding the answer: %v", method, path, err)
		}
	}
	return nil
}

// serverVersion returns Rancher's version (setting server-version, e.g. "v2.11.3").
func (a *Client) ServerVersion(ctx context.Context) (string, error) {
	var s struct {
		Value string `json:"value"`
	}
	if err := a.do(ctx, http.MethodGet, "/v3/settings/server-version", nil, &s); err != nil {
		return "", err
	}
	return s.Value, nil
}

// agentCustomization is a cluster's clusterAgentDeploymentCustomization or
// fleetAgentDeploymentCustomization (Rancher ≥ 2.7.5, rancher/rancher#41035); other fields
// (overrideAffinity, overrideResourceRequirements, ...) are kept as they are.
type agentCustomization map[string]any

func (c agentCustomization) tolerations() []inventory.Toleration {
	var out []inventory.Toleration
	b, _ := json.Marshal(c["appendTolerations"])
	_ = json.Unmarshal(b, &out)
	return out
}

// apiToleration is a toleration in the v3 API's JSON form.
type apiToleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

func apiTolerations(ts []inventory.Toleration) []apiToleration {
	out := []apiToleration{}
	for _, t := range ts {
		out = append(out, apiToleration(t))
	}
	return out
}

// Cluster is the part of a v3 cluster k3strap reads.
type Cluster struct {
	ID                                  string             `json:"id"`
	Name                                string             `json:"name"`
	State                               string             `json:"state"`
	ClusterAgentDeploymentCustomization agentCustomization `json:"clusterAgentDeploymentCustomization"`
	FleetAgentDeploymentCustomization   agentCustomization `json:"fleetAgentDeploymentCustomization"`
}

// ensureCluster finds the cluster named name or creates it (an imported cluster), so that its
// clusterAgentDeploymentCustomization and fleetAgentDeploymentCustomization appendTolerations
// include clusterTols and fleetTols (docs/failure-modes.md F3). It reports whether the cluster was created
// and whether an existing one was updated.
func (a *Client) EnsureCluster(ctx context.Context, name string, clusterTols, fleetTols []inventory.Toleration) (c Cluster, created, updated bool, err error) {
	var list struct {
		Data []Cluster `json:"data"`
	}
	if err = a.do(ctx, http.MethodGet, "/v3/clusters?name="+neturl.QueryEscape(name), nil, &list); err != nil {
		return c, false, false, err
	}
	for _, x := range list.Data {
		if x.Name != name {
			continue
		}
		c = x
		wantC := inventory.AppendTolerations(c.ClusterAgentDeploymentCustomization.tolerations(), clusterTols...)
		wantF := inventory.AppendTolerations(c.FleetAgentDeploymentCustomization.tolerations(), fleetTols...)
		if len(wantC) == len(c.ClusterAgentDeploymentCustomization.tolerations()) && len(wantF) == len(c.FleetAgentDeploymentCustomization.tolerations()) {
			return c, false, false, nil
		}
		upd := map[string]any{
			"clusterAgentDeploymentCustomization": withTolerations(c.ClusterAgentDeploymentCustomization, wantC),
			"fleetAgentDeploymentCustomization":   withTolerations(c.FleetAgentDeploymentCustomization, wantF),
		}
		var out Cluster
		if err = a.do(ctx, http.MethodPut, "/v3/clusters/"+neturl.PathEscape(c.ID), upd, &out); err != nil {
			return c, false, false, err
		}
		return out, false, true, nil
	}
	req := map[string]any{
		"type": "cluster", "name": name,
		"description":                         "registered by k3strap",
		"clusterAgentDeploymentCustomization": map[string]any{"appendTolerations": apiTolerations(clusterTols)},
		"fleetAgentDeploymentCustomization":   map[string]any{"appendTolerations": apiTolerations(fleetTols)},
	}
	if err = a.do(ctx, http.MethodPost, "/v3/clusters", req, &c); err != nil {
		return c, false, false, err
	}
	if c.ID == "" {
		return c, false, false, fmt.Errorf("Rancher API POST /v3/clusters answered without a cluster id")
	}
	return c, true, false, nil
}

func withTolerations(c agentCustomization, ts []inventory.Toleration) map[string]any {
	out := map[string]any{}
	for k, v := range c {
		out[k] = v
	}
	out["appendTolerations"] = apiTolerations(ts)
	return out
}

// importManifestURL returns the import manifest URL of the cluster's registration token,
// creating the token when there is none and waiting (up to tokenWait) for Rancher to fill it.
// The URL embeds the token: callers treat it as a secret.
func (a *Client) ImportManifestURL(ctx context.Context, clusterID string) (string, error) {
	type token struct {
		ClusterID   string `json:"clusterId"`
		ManifestURL string `json:"manifestUrl"`
	}
	wait := a.TokenWait
	if wait <= 0 {
		wait = time.Minute
	}
	deadline := time.Now().Add(wait)
	created := false
	for {
		var list struct {
			Data []token `json:"data"`
		}
		if err := a.do(ctx, http.MethodGet, "/v3/clusterregistrationtokens?clusterId="+neturl.QueryEscape(clusterID), nil, &list); err != nil {
			return "", err
		}
		found := false
		for _, t := range list.Data {
			if t.ClusterID != clusterID {
				continue
			}
			found = true
			if t.ManifestURL != "" {
				return t.ManifestURL, nil
			}
		}
		if !found && !created {
			if err := a.do(ctx, http.MethodPost, "/v3/clusterregistrationtokens", map[string]any{"type": "clusterRegistrationToken", "clusterId": clusterID}, nil); err != nil {
				return "", err
			}
			created = true
			continue
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("Rancher did not provide an import manifest for cluster %s within %s", clusterID, wait)
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// ClusterAgent is the Deployment Rancher's import manifest runs (cattle-system).
const ClusterAgent = "cattle-cluster-agent"

// Origin returns scheme://host of u.
func Origin(u string) string {
	s := RedactURL(u)
	if i := strings.Index(s, "/v3/"); i >= 0 {
		return s[:i]
	}
	return s
}

func JoinTaints(ts []inventory.Taint) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}

func CountLines(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// AgentMissingTolerations finds the cattle-cluster-agent Deployment in an import manifest
// (multi-document YAML) and returns the taints of ts its pod template does not tolerate. A
// manifest without that Deployment is an error.
func AgentMissingTolerations(manifest []byte, ts []inventory.Taint) ([]inventory.Taint, error) {
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("it has no Deployment %s", ClusterAgent)
		}
		if err != nil {
			return nil, fmt.Errorf("it is not YAML: %v", err)
		}
		md, _ := doc["metadata"].(map[string]any)
		if doc["kind"] != "Deployment" || md == nil || md["name"] != ClusterAgent {
			continue
		}
		b, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		var d appsv1.Deployment
		if err := sigsyaml.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("its Deployment %s does not decode: %v", ClusterAgent, err)
		}
		var missing []inventory.Taint
		for _, t := range ts {
			if !t.ToleratedBy(d.Spec.Template.Spec.Tolerations) {
				missing = append(missing, t)
			}
		}
		return missing, nil
	}
}

// TolerationsFor returns the tolerations that tolerate exactly the taints ts.
func TolerationsFor(ts []inventory.Taint) []inventory.Toleration {
	var out []inventory.Toleration
	for _, t := range ts {
		out = append(out, inventory.TolerationFor(t))
	}
	return out
}
