// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// corefile is what the CoreDNS stand-in takes from a Corefile: the server block's port, the
// kubernetes plugin's zones, the hosts plugin's file and the health, ready and prometheus
// addresses (CoreDNS's defaults when the directive names none).
type corefile struct {
	Port       int
	Zones      []string // fully qualified, lower case: "cluster.local.", "in-addr.arpa."
	HostsFile  string
	Health     string
	Ready      string
	Prometheus string
	// Ignored are the directives the stand-in does not play (forward, cache, ...).
	Ignored []string
}

// parseCorefile reads the first server block of a Corefile (coredns.io/manual/configuration):
// `ZONE:PORT {` ... `}` with one directive a line, nested blocks skipped.
func parseCorefile(r io.Reader) (corefile, error) {
	cf := corefile{Port: 53}
	sc := bufio.NewScanner(r)
	depth, line := 0, 0
	inServer, seenServer := false, false
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if i := strings.Index(text, "#"); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		if text == "" {
			continue
		}
		fields := strings.Fields(strings.TrimSuffix(text, "{"))
		opens := strings.HasSuffix(text, "{")
		switch {
		case text == "}":
			depth--
			if depth == 0 {
				inServer = false
			}
			continue
		case depth == 0:
			if opens && !seenServer {
				seenServer, inServer = true, true
				if _, port, ok := strings.Cut(fields[0], ":"); ok {
					p, err := strconv.Atoi(port)
					if err != nil {
						return cf, fmt.Errorf("Corefile line %d: bad port in %q", line, fields[0])
					}
					cf.Port = p
				}
			}
		case depth == 1 && inServer && len(fields) > 0:
			switch fields[0] {
			case "kubernetes":
				for _, z := range fields[1:] {
					cf.Zones = append(cf.Zones, fqdn(z))
				}
			case "hosts":
				if len(fields) > 1 {
					cf.HostsFile = fields[1]
				}
			case "health":
				cf.Health = argOr(fields, ":8080")
			case "ready":
				cf.Ready = argOr(fields, ":8181")
			case "prometheus":
				cf.Prometheus = argOr(fields, ":9153")
			default:
				cf.Ignored = append(cf.Ignored, fields[0])
			}
		}
		if opens {
			depth++
		}
	}
	if err := sc.Err(); err != nil {
		return cf, err
	}
	if !seenServer {
		return cf, errors.New("Corefile has no server block")
	}
	return cf, nil
}

func argOr(fields []string, def string) string {
	if len(fields) > 1 {
		return fields[1]
	}
	return def
}

func fqdn(s string) string {
	s = strings.ToLower(s)
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// corednsMain plays CoreDNS as K3s deploys it (server/manifests/coredns.yaml): `-conf FILE`,
// DNS on the Corefile's port over UDP and TCP for the cluster domain (Services read through the
// API as the coredns service account, pods as `a-b-c-d.NS.pod.ZONE`) and the hosts file (K3s's
// NodeHosts), /health and /ready (ready once the API has been read, like the kubernetes
// plugin's first sync), /metrics. It forwards nothing: other names are REFUSED.
func corednsMain(args []string) int {
	fs := flag.NewFlagSet("coredns", flag.ContinueOnError)
	conf := fs.String("conf", "/etc/coredns/Corefile", "Corefile to load")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := log.New(os.Stderr, "[coredns k3strap test stand-in] ", log.LstdFlags)
	f, err := os.Open(*conf)
	if err != nil {
		logger.Print(err)
		return 1
	}
	cf, err := parseCorefile(f)
	f.Close()
	if err != nil {
		logger.Printf("%s: %v", *conf, err)
		return 1
	}
	if len(cf.Zones) == 0 {
		logger.Printf("%s: no kubernetes plugin: nothing to serve", *conf)
		return 1
	}
	api, err := inCluster()
	if err != nil {
		logger.Print(err)
		return 1
	}
	logger.Printf("zones %v, hosts %q, port %d; not played: %v (nothing is forwarded)", cf.Zones, cf.HostsFile, cf.Port, cf.Ignored)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv := &dnsServer{zone: cf.Zones[0], hostsFile: cf.HostsFile, lookup: apiLookup{api}, log: logger}
	go srv.syncLoop(ctx, api)
	addr := fmt.Sprintf(":%d", cf.Port)
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		logger.Print(err)
		return 1
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Print(err)
		return 1
	}
	errc := make(chan error, 5)
	go func() { errc <- srv.serveUDP(ctx, pc) }()
	go func() { errc <- srv.serveTCP(ctx, ln) }()
	if cf.Health != "" {
		go func() { errc <- serveHTTP(ctx, cf.Health, "/health", func() bool { return true }) }()
	}
	if cf.Ready != "" {
		go func() { errc <- serveHTTP(ctx, cf.Ready, "/ready", srv.ready.Load) }()
	}
	if cf.Prometheus != "" {
		go func() { errc <- serveHTTP(ctx, cf.Prometheus, "/metrics", func() bool { return true }) }()
	}
	select {
	case <-ctx.Done():
		logger.Print("shutting down")
		return 0
	case err := <-errc:
		logger.Print(err)
		return 1
	}
}

// syncLoop marks the server ready once a Service list through the API has worked (CoreDNS's
// kubernetes plugin is ready after its first sync), retrying every second until then.
func (s *dnsServer) syncLoop(ctx context.Context, api *kubeAPI) {
	for ctx.Err() == nil {
		var l serviceList
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := api.get(cctx, "/api/v1/services", map[string][]string{"limit": {"1"}}, &l)
		cancel()
		if err == nil {
			s.ready.Store(true)
			s.log.Print("Kubernetes API read: ready")
			return
		}
		s.log.Printf("waiting for the Kubernetes API: %v", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// serveHTTP answers path on addr with 200 OK while ok() holds and 503 otherwise.
func serveHTTP(ctx context.Context, addr, path string, ok func() bool) error {
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if !ok() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if path == "/metrics" {
			fmt.Fprintln(w, "# k3strap test stand-in: no metrics")
			return
		}
		fmt.Fprintln(w, "OK")
	})
	hs := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); hs.Close() }()
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// dnsServer answers DNS queries for one cluster zone.
type dnsServer struct {
	zone      string
	hostsFile string
	lookup    clusterLookup
	ready     atomic.Bool
	log       *log.Logger
}

// serveUDP answers the queries arriving on pc until ctx ends (then it closes pc).
func (s *dnsServer) serveUDP(ctx context.Context, pc net.PacketConn) error {
	go func() { <-ctx.Done(); pc.Close() }()
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		q := append([]byte(nil), buf[:n]...)
		go func() {
			qctx, cancel := context.WithTimeout(ctx, 4*time.Second)
			defer cancel()
			if resp := s.answer(qctx, q, 512); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}()
	}
}

// serveTCP answers the connections arriving on ln until ctx ends (then it closes ln).
func (s *dnsServer) serveTCP(ctx context.Context, ln net.Listener) error {
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go s.serveConn(ctx, c)
	}
}

// serveConn answers length-prefixed queries (RFC 1035 4.2.2) until the client is idle for 10 s.
func (s *dnsServer) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	for {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, int(l[0])<<8|int(l[1]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		qctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		resp := s.answer(qctx, q, 65535)
		cancel()
		if resp == nil {
			return
		}
		if _, err := c.Write(append([]byte{byte(len(resp) >> 8), byte(len(resp))}, resp...)); err != nil {
			return
		}
	}
}
