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
	"time"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/hostinfo"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
)

// servingHosts are the names and addresses the serving certificate is valid for.
func (e *runtimeEnv) servingHosts() []string {
	h := []string{"127.0.0.1", "localhost", "::1", e.nodeIP, e.nodeName, e.opts.Hostname,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + e.s.ClusterDomain}
	h = append(h, hostinfo.Hostname())
	h = append(h, e.s.NodeIPs...)
	h = append(h, e.s.ExternalIPs...)
	h = append(h, e.s.TLSSANs...)
	if e.s.BindAddress != "" {
		h = append(h, e.s.BindAddress)
	}
	return append(h, firstIP(e.s.ServiceCIDR))
}

func firstIP(cidr string) string {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil || ip.To4() == nil {
		return "10.43.0.1"
	}
	ip = ip.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String()
}

// listenAddr is bind-address:https-listen-port (all addresses by default).
func (e *runtimeEnv) listenAddr() string {
	return net.JoinHostPort(e.s.BindAddress, strconv.Itoa(e.s.HTTPSListenPort))
}

// serve starts the HTTPS listener with client-certificate verification against clientCA
// (optional at the TLS layer; the handler decides which paths need it). It returns a stop
// function. Request contexts end with ctx (so watches stop on shutdown).
func (e *runtimeEnv) serve(ctx context.Context, handler http.Handler, serverCA, clientCA *pki.CA) (func(), error) {
	cert, err := serverCA.ServingCert(e.servingHosts())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", e.listenAddr())
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    clientCA.Pool(),
			MinVersion:   tls.VersionTLS12,
		},
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}, nil
}
