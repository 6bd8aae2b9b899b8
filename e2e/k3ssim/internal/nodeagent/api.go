// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// NodeAPI is what the kubelet, flannel and the network policy controller need from the API
// server. Errors for a missing node satisfy apierrors.IsNotFound.
type NodeAPI interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	CreateNode(ctx context.Context, node *corev1.Node) (*corev1.Node, error)
	// PatchNode applies a JSON merge patch to the node's metadata/spec.
	PatchNode(ctx context.Context, name string, patch []byte) error
	// PatchNodeStatus applies a JSON merge patch to the node's status.
	PatchNodeStatus(ctx context.Context, name string, patch []byte) error
	// RenewLease sets spec.renewTime of the node's Lease (lease.Namespace/lease.Name) to
	// lease.Spec.RenewTime, creating the Lease as given when it does not exist.
	RenewLease(ctx context.Context, lease *coordinationv1.Lease) error
}

// Local is the NodeAPI of the server's own kubelet: it writes the store directly.
type Local struct {
	Store *store.Store
}

// GetNode implements NodeAPI.
func (l Local) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	return store.GetTyped[corev1.Node](l.Store, store.Nodes, "", name)
}

// CreateNode implements NodeAPI.
func (l Local) CreateNode(_ context.Context, node *corev1.Node) (*corev1.Node, error) {
	return store.CreateTyped(l.Store, store.Nodes, "", node)
}

func (l Local) patch(name string, patch []byte) error {
	_, err := l.Store.Mutate(store.Nodes, "", name, func(obj map[string]any) (bool, error) {
		cur, err := json.Marshal(obj)
		if err != nil {
			return false, err
		}
		out, err := jsonpatch.MergePatch(cur, patch)
		if err != nil {
			return false, err
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			return false, err
		}
		for k := range obj {
			delete(obj, k)
		}
		for k, v := range m {
			obj[k] = v
		}
		return true, nil
	})
	return err
}

// PatchNode implements NodeAPI.
func (l Local) PatchNode(_ context.Context, name string, patch []byte) error {
	return l.patch(name, patch)
}

// PatchNodeStatus implements NodeAPI.
func (l Local) PatchNodeStatus(_ context.Context, name string, patch []byte) error {
	return l.patch(name, patch)
}

// RenewLease implements NodeAPI.
func (l Local) RenewLease(_ context.Context, lease *coordinationv1.Lease) error {
	_, err := l.Store.Mutate(store.Leases, lease.Namespace, lease.Name, func(obj map[string]any) (bool, error) {
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			obj["spec"] = spec
		}
		spec["renewTime"] = lease.Spec.RenewTime.UTC().Format(metav1.RFC3339Micro)
		return true, nil
	})
	if apierrors.IsNotFound(err) {
		_, err = store.CreateTyped(l.Store, store.Leases, lease.Namespace, lease)
	}
	return err
}

// Remote is the NodeAPI of an agent or joined server: Kubernetes REST over HTTPS with the
// node's client certificate. After a failed request it drops its idle connections, so the
// next one dials again and resolves the server name anew: when the registration endpoint
// moves to another server (a VIP, or a DNS name changed in /etc/hosts — Go's resolver
// re-reads that file within 5 s), the node follows it. (Real K3s agents also keep a
// client-side load balancer over all servers; the simulator only follows the name.)
type Remote struct {
	base      string
	client    *http.Client
	transport *http.Transport
}

// NewRemote returns a Remote for server (https://HOST:PORT) trusting caPEM and
// authenticating with the PEM client certificate and key.
func NewRemote(server string, caPEM, certPEM, keyPEM []byte) (*Remote, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
		DialContext:     (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 5 * time.Second}).DialContext,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Remote{base: strings.TrimRight(server, "/"), client: &http.Client{Timeout: 15 * time.Second, Transport: tr}, transport: tr}, nil
}

func (r *Remote) do(ctx context.Context, method, path, ctype string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		r.transport.CloseIdleConnections() // reconnect (and re-resolve) next time
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		r.transport.CloseIdleConnections()
		return err
	}
	if resp.StatusCode >= 300 {
		var st metav1.Status
		if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
			return &apierrors.StatusError{ErrStatus: st}
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// GetNode implements NodeAPI.
func (r *Remote) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	return n, r.do(ctx, http.MethodGet, "/api/v1/nodes/"+name, "", nil, n)
}

// CreateNode implements NodeAPI.
func (r *Remote) CreateNode(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	body, err := json.Marshal(node)
	if err != nil {
		return nil, err
	}
	out := &corev1.Node{}
	return out, r.do(ctx, http.MethodPost, "/api/v1/nodes", "application/json", body, out)
}

// PatchNode implements NodeAPI.
func (r *Remote) PatchNode(ctx context.Context, name string, patch []byte) error {
	return r.do(ctx, http.MethodPatch, "/api/v1/nodes/"+name, "application/merge-patch+json", patch, nil)
}

// PatchNodeStatus implements NodeAPI.
func (r *Remote) PatchNodeStatus(ctx context.Context, name string, patch []byte) error {
	return r.do(ctx, http.MethodPatch, "/api/v1/nodes/"+name+"/status", "application/merge-patch+json", patch, nil)
}

// RenewLease implements NodeAPI.
func (r *Remote) RenewLease(ctx context.Context, lease *coordinationv1.Lease) error {
	path := "/apis/coordination.k8s.io/v1/namespaces/" + lease.Namespace + "/leases"
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": lease.Spec.RenewTime.UTC().Format(metav1.RFC3339Micro)}})
	err := r.do(ctx, http.MethodPatch, path+"/"+lease.Name, "application/merge-patch+json", patch, nil)
	if !apierrors.IsNotFound(err) {
		return err
	}
	body, err := json.Marshal(lease)
	if err != nil {
		return err
	}
	return r.do(ctx, http.MethodPost, path, "application/json", body, nil)
}
