package nodeagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
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

// Remote is the NodeAPI of an agent or joined server: Kubernetes REST over HTTPS with the
// node's client certificate.
type Remote struct {
	base   string
	client *http.Client
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
	return &Remote{
		base: strings.TrimRight(server, "/"),
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
		}},
	}, nil
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
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
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
