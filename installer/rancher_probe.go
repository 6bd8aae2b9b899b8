// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"
)

// probeURL asks https://host/ping (Rancher answers "pong") through the cluster's ingress on
// the first server's port 443. The connection goes through the first server's SSH connection
// (direct-tcpip: no port but SSH has to be reachable from the workstation); when
// the server refuses TCP forwarding it is made directly. The TLS certificate is not verified:
// it may come from Rancher's own CA or a Let's Encrypt order still in progress, and nothing
// secret is sent.
func (w *rancherWatch) probeURL(ctx context.Context, host string) (string, error) {
	target := net.JoinHostPort(w.first.host.Address, "443")
	via := "through " + w.first.host.Name + "'s SSH connection"
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		if c := w.first.c(); c != nil {
			if conn, err := c.DialContext(ctx, "tcp", target); err == nil {
				return conn, nil
			}
		}
		via = "directly"
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	}
	tr := &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true}, //nolint:gosec // liveness probe, see above
		DisableKeepAlives: true, TLSHandshakeTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/ping", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "pong" {
		return "", fmt.Errorf("HTTP %d %q", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return fmt.Sprintf("GET https://%s/ping answered pong (via %s:443, %s)", host, w.first.host.Address, via), nil
}
