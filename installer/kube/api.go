// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kube reads and writes the cluster through client-go, whose connections to the
// API server are SSH direct-tcpip channels from the first server to its own loopback (by
// design: no port but SSH has to be reachable from the workstation, and no process is started
// on the server for an API call). It authenticates with the server's own admin kubeconfig
// (k3s.PathKubeconfig), read once over SSH and kept in memory only.
//
// Errors are client-go's typed ones: test them with k8s.io/apimachinery/pkg/api/errors
// (IsNotFound, IsConflict, ...) and IsAPIDown; every error names the host.
package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// CallTimeout bounds one API request whose context carries no deadline of its own.
const CallTimeout = time.Minute

// FieldManager is the server-side apply field manager of what k3strap applies.
const FieldManager = "k3strap"

// Conn is what the API needs from a connection to a server: its kubeconfig read as root and
// connections opened from the server (remote.Host implements it).
type Conn interface {
	Host() string
	ReadFile(ctx context.Context, path string) ([]byte, error)
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// API is one server's Kubernetes API. It is safe for concurrent use. Typed and Dynamic may be
// used directly; the methods add the host to errors and a CallTimeout to deadline-less calls.
type API struct {
	host    string
	Typed   kubernetes.Interface
	Dynamic dynamic.Interface
	mapper  meta.ResettableRESTMapper
}

// Connect reads the server's admin kubeconfig through conn() once and returns its API. Every
// connection the API opens is dialled through conn() at that moment — pass a function that
// returns the host's current connection, so a reconnect is followed. The kubeconfig's server
// address (K3s writes its loopback and https-listen-port there: https://127.0.0.1:6443, or
// https://[::1]:6443 on an IPv6-only server) is dialled from the server itself; TLS is verified
// against the kubeconfig's CA for that address (K3s's serving certificate carries 127.0.0.1 and
// ::1). The credentials stay in the returned API's memory; no error quotes the file.
func Connect(ctx context.Context, conn func() Conn) (*API, error) {
	return ConnectAs(ctx, conn, k3s.PathKubeconfig)
}

// ConnectAs is Connect with the kubeconfig at path on the host (e.g. the kubelet's,
// k3s.PathKubeletKubeconfig, to act as the node itself). Certificate and key files the
// kubeconfig names are read through conn() too and kept in memory only.
func ConnectAs(ctx context.Context, conn func() Conn, path string) (*API, error) {
	c := conn()
	if c == nil {
		return nil, errors.New("no connection to the server")
	}
	host := c.Host()
	data, err := c.ReadFile(ctx, path)
	if err != nil {
		whose := "the node's"
		if path == k3s.PathKubeconfig {
			whose = "the server's"
		}
		return nil, fmt.Errorf("%s: reading %s kubeconfig %s: %w", host, whose, path, err)
	}
	kc, err := clientcmd.Load(data)
	clear(data)
	if err != nil {
		// The parser's message may quote the file: say only what is wrong where.
		return nil, fmt.Errorf("%s: %s is not a kubeconfig client-go can read (K3s rewrites it on start: restart k3s)", host, path)
	}
	if err := inlineFiles(ctx, c, kc); err != nil {
		return nil, fmt.Errorf("%s: the kubeconfig %s: %w", host, path, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %s is not a kubeconfig client-go can use (K3s rewrites it on start: restart k3s)", host, path)
	}
	cfg.UserAgent = "k3strap"
	// JSON both ways: every API server (and the simulator the end-to-end tests run) speaks
	// it; client-go would otherwise send built-in types as protobuf.
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c := conn()
		if c == nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("no connection to " + host)}
		}
		conn, err := c.DialContext(ctx, network, addr)
		var oc *ssh.OpenChannelError
		if errors.As(err, &oc) && oc.Reason == ssh.Prohibited {
			return nil, fmt.Errorf("the SSH server of %s refuses to open a connection to its Kubernetes API %s (TCP forwarding disabled: sshd_config AllowTcpForwarding/DisableForwarding, Dropbear -j); k3strap reaches the API through SSH only — allow local forwarding for the SSH user (e.g. `Match User root` + `AllowTcpForwarding local`): %w", host, addr, err)
		}
		return conn, err
	}
	// A host that sees or answers API requests itself (a transcript recorder or replay:
	// remote.APITransportWrapper) gets each request, asked at that moment like the dial.
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return hostTransport{conn: conn, rt: rt} })
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: API client: %w", host, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: API client: %w", host, err)
	}
	return New(host, typed, dyn), nil
}

// hostTransport passes each request to the current connection's APITransportWrapper when it
// has one, else to rt (client-go's TLS transport over conn's DialContext).
type hostTransport struct {
	conn func() Conn
	rt   http.RoundTripper
}

func (t hostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if w, ok := t.conn().(remote.APITransportWrapper); ok {
		return w.WrapAPITransport(t.rt).RoundTrip(req)
	}
	return t.rt.RoundTrip(req)
}

// inlineFiles reads the certificate and key files kc names on the host and puts their
// contents in kc (the files are the host's, not the workstation's).
func inlineFiles(ctx context.Context, c Conn, kc *clientcmdapi.Config) error {
	read := func(path string, into *[]byte) error {
		if path == "" || len(*into) > 0 {
			return nil
		}
		b, err := c.ReadFile(ctx, path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		*into = b
		return nil
	}
	for _, cl := range kc.Clusters {
		if err := read(cl.CertificateAuthority, &cl.CertificateAuthorityData); err != nil {
			return err
		}
		cl.CertificateAuthority = ""
	}
	for _, ai := range kc.AuthInfos {
		if err := read(ai.ClientCertificate, &ai.ClientCertificateData); err != nil {
			return err
		}
		if err := read(ai.ClientKey, &ai.ClientKeyData); err != nil {
			return err
		}
		ai.ClientCertificate, ai.ClientKey = "", ""
	}
	return nil
}

// New returns the API of host over the given clients (tests pass client-go's fakes).
func New(host string, typed kubernetes.Interface, dyn dynamic.Interface) *API {
	return &API{host: host, Typed: typed, Dynamic: dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(typed.Discovery()))}
}

// NewWithMapper is New with a fixed REST mapper (tests: the fake clientset's discovery
// carries no resources).
func NewWithMapper(host string, typed kubernetes.Interface, dyn dynamic.Interface, m meta.RESTMapper) *API {
	return &API{host: host, Typed: typed, Dynamic: dyn, mapper: resettable{m}}
}

type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

// Host is the server's inventory name.
func (a *API) Host() string { return a.host }

// call returns ctx with CallTimeout when it has no deadline.
func call(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, CallTimeout)
}

// wrap names the host and what was done; the typed error stays reachable (errors.As).
func (a *API) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", a.host, what, err)
}

// IsAPIDown reports whether err says the API server did not answer: the connection to it was
// refused or broke (K3s not running or restarting, the SSH connection lost), or it answered 503
// or a timeout (starting up, etcd not ready).
func IsAPIDown(err error) bool {
	if err == nil {
		return false
	}
	var oc *ssh.OpenChannelError
	if errors.As(err, &oc) {
		return oc.Reason == ssh.ConnectionFailed
	}
	var ue *url.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, net.ErrClosed), errors.As(err, &oe):
		return true
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err):
		return true
	case errors.As(err, &ue):
		var cv *tls.CertificateVerificationError
		return !errors.Is(err, context.Canceled) && !errors.As(err, &cv)
	}
	return false
}

// discoveryOf returns the discovery client (for /readyz and the like).
func (a *API) discoveryOf() discovery.DiscoveryInterface { return a.Typed.Discovery() }

// Ready asks the API server's /readyz; an error says why it is not ready or not reachable.
func (a *API) Ready(ctx context.Context) error {
	ctx, cancel := call(ctx)
	defer cancel()
	rc := a.discoveryOf().RESTClient()
	if rc == nil || isNilRESTClient(rc) {
		return nil // the fake clientset has none
	}
	_, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
	return a.wrap("GET /readyz", err)
}

func isNilRESTClient(rc rest.Interface) bool {
	c, ok := rc.(*rest.RESTClient)
	return ok && c == nil
}
