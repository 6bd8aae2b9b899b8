// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package join is the simulator's version of K3s's supervisor join protocol: a joining
// agent or server fetches the cluster CA from /cacerts (unauthenticated), checks a K10
// token's CA hash against it, then authenticates with the token password (HTTP basic auth,
// user "node" or "server", as K3s does) and receives a client certificate for the API and
// the cluster-wide settings it must follow. Joining servers also receive the CA keys and have
// their critical configuration compared with the first server's.
package join

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/config"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
)

// Path is the join endpoint.
const Path = "/v1-k3s/sim-join"

// Cluster holds the first server's settings every node follows (K3s hands these to agents
// through /v1-k3s/config).
type Cluster struct {
	ClusterCIDR            string `json:"clusterCIDR"`
	ServiceCIDR            string `json:"serviceCIDR"`
	ClusterDNS             string `json:"clusterDNS"`
	ClusterDomain          string `json:"clusterDomain"`
	FlannelBackend         string `json:"flannelBackend"`
	DisableCloudController bool   `json:"disableCloudController"`
	DisableNetworkPolicy   bool   `json:"disableNetworkPolicy"`
	EgressSelectorMode     string `json:"egressSelectorMode"`
	// Etcd is true when the cluster runs embedded etcd (first server had cluster-init).
	Etcd bool `json:"etcd"`
}

// Request is what a joiner sends.
type Request struct {
	Role     string            `json:"role"` // "server" or "agent"
	NodeName string            `json:"nodeName"`
	Critical map[string]string `json:"critical,omitempty"` // servers only
}

// Response is what the first server answers.
type Response struct {
	ClientCert []byte  `json:"clientCert"`
	ClientKey  []byte  `json:"clientKey"`
	Cluster    Cluster `json:"cluster"`
	// Servers only: the cluster CAs (certificate and key) to serve and sign with.
	ServerCACert []byte `json:"serverCACert,omitempty"`
	ServerCAKey  []byte `json:"serverCAKey,omitempty"`
	ClientCACert []byte `json:"clientCACert,omitempty"`
	ClientCAKey  []byte `json:"clientCAKey,omitempty"`
	// ServerURL (servers only) is the answering server's own https://IP:PORT: a joined
	// server replicates the cluster state from there and proxies to it (SIMULATOR
	// behaviour, README "HA"), whatever name the registration endpoint resolves to later.
	ServerURL string `json:"serverURL,omitempty"`
}

type mismatchBody struct {
	Message    string   `json:"message"`
	Mismatched []string `json:"mismatched"`
}

// Handler serves Path on the first server.
type Handler struct {
	// ServerPassword returns the password of the server token (accepted from agents and
	// servers).
	ServerPassword func() string
	// AgentPassword is the agent-token password ("" = none configured); accepted from agents.
	AgentPassword string
	// Critical is the first server's critical configuration.
	Critical map[string]string
	// Cluster is handed to every joiner.
	Cluster Cluster
	// ServerCA and ClientCA sign and are handed to joining servers.
	ServerCA, ClientCA *pki.CA
	// ServerURL is this server's own https://IP:PORT, handed to joining servers.
	ServerURL string
	// OnJoin is called after a successful join (for a log line); may be nil.
	OnJoin func(role, node string)
}

func eq(a, b string) bool { return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// ServeHTTP handles a join request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var req Request
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.NodeName == "" {
		http.Error(w, "bad join request", http.StatusBadRequest)
		return
	}
	user, pw, ok := r.BasicAuth()
	authed := ok && (eq(pw, h.ServerPassword()) || (req.Role == "agent" && eq(pw, h.AgentPassword)))
	if !authed || (user != "node" && user != "server") || (req.Role == "server" && user != "server") {
		w.Header().Set("WWW-Authenticate", `Basic realm="k3s"`)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if req.Role == "server" {
		if mm := config.CriticalMismatch(h.Critical, req.Critical); len(mm) > 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(mismatchBody{Message: "critical configuration value mismatch between servers", Mismatched: mm})
			return
		}
	}
	cn, orgs := "system:node:"+req.NodeName, []string{"system:nodes"}
	if req.Role == "server" {
		cn, orgs = "system:admin", []string{"system:masters"}
	}
	cert, key, err := h.ClientCA.Issue(cn, orgs, nil, true)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp := Response{ClientCert: cert, ClientKey: key, Cluster: h.Cluster}
	if req.Role == "server" {
		resp.ServerCACert, resp.ServerCAKey = h.ServerCA.CertPEM, h.ServerCA.KeyPEM
		resp.ClientCACert, resp.ClientCAKey = h.ClientCA.CertPEM, h.ClientCA.KeyPEM
		resp.ServerURL = h.ServerURL
	}
	if h.OnJoin != nil {
		h.OnJoin(req.Role, req.NodeName)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// ErrUnauthorized means the server rejected the token password.
var ErrUnauthorized = errors.New("401 Unauthorized")

// MismatchError is a refused server join because critical settings differ.
type MismatchError struct {
	Fields []string
}

func (e *MismatchError) Error() string {
	return "critical configuration value mismatch between servers; mismatched: " + strings.Join(e.Fields, ", ")
}

// HashMismatchError is a K10 token whose CA hash does not match the server's CA.
type HashMismatchError struct {
	TokenHash, ServerHash string
}

func (e *HashMismatchError) Error() string {
	return fmt.Sprintf("token CA hash does not match the Cluster CA certificate hash: %s != %s", e.TokenHash, e.ServerHash)
}

// FetchCA downloads the CA bundle from server (https://HOST:PORT) without verifying the
// serving certificate, then verifies the token's CA hash (if the token has one) against it.
// Errors are HashMismatchError or a connection error naming the URL.
func FetchCA(ctx context.Context, server string, tok pki.Token) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec G402 -- like K3s: the CA is pinned by the token hash below
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+"/cacerts", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to get CA certs: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("failed to get CA certs: %s/cacerts: %s", strings.TrimRight(server, "/"), resp.Status)
	}
	if tok.CAHash != "" {
		if h := pki.HashCA(body); h != tok.CAHash {
			return nil, &HashMismatchError{TokenHash: tok.CAHash, ServerHash: h}
		}
	}
	return body, nil
}

// Join authenticates with the token password and returns the server's answer. The server's
// certificate is verified against caPEM. Errors: ErrUnauthorized, *MismatchError, or a
// connection error.
func Join(ctx context.Context, server string, caPEM []byte, tok pki.Token, req Request) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(server, "/")+Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	user := "node"
	if req.Role == "server" {
		user = "server"
	}
	hr.SetBasicAuth(user, tok.Password)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var out Response
		if err := json.Unmarshal(data, &out); err != nil {
			return nil, err
		}
		return &out, nil
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("%s%s: %w", strings.TrimRight(server, "/"), Path, ErrUnauthorized)
	case http.StatusBadRequest:
		var mb mismatchBody
		if json.Unmarshal(data, &mb) == nil && len(mb.Mismatched) > 0 {
			return nil, &MismatchError{Fields: mb.Mismatched}
		}
	}
	return nil, fmt.Errorf("%s%s: %s %s", strings.TrimRight(server, "/"), Path, resp.Status, strings.TrimSpace(string(data)))
}
