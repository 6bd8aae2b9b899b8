// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
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
	"strings"
	"syscall"
	"time"
)

// probeIdentity is what netprobe answers on /: who served the request and who asked.
type probeIdentity struct {
	Standin   string   `json:"standin"`
	Hostname  string   `json:"hostname"`
	Node      string   `json:"node,omitempty"`
	Addresses []string `json:"addresses"`
	// Remote is the caller's address as this pod saw it: a pod IP when pod-to-pod traffic is
	// not masqueraded.
	Remote string `json:"remote"`
}

// probeFetch is the outcome of /fetch.
type probeFetch struct {
	URL    string `json:"url"`
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	Error  string `json:"error,omitempty"`
	Millis int64  `json:"ms"`
}

// probeResolve is the outcome of /resolve.
type probeResolve struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// netprobeMain is the test workload (no real component stands behind it):
//
//	netprobe [-listen :8080]            serve HTTP (README.md, "netprobe")
//	netprobe get [-timeout 5s] URL      fetch URL, print the body; exit 1 unless 2xx
//	netprobe resolve [-timeout 5s] NAME resolve NAME with the pod's resolv.conf; exit 1 on failure
func netprobeMain(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "get", "resolve":
			return netprobeCLI(args[0], args[1:])
		case "serve":
			args = args[1:]
		}
	}
	fs := flag.NewFlagSet("netprobe", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "HTTP listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := log.New(os.Stderr, "[netprobe k3strap test stand-in] ", log.LstdFlags)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hs := &http.Server{Addr: *listen, Handler: netprobeHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); hs.Close() }()
	logger.Printf("serving on %s", *listen)
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Print(err)
		return 1
	}
	return 0
}

// netprobeHandler serves /, /healthz, /fetch?url=U[&timeout=D] and /resolve?name=N[&timeout=D].
// /fetch and /resolve answer 200 with the outcome when it worked and 502 with the error when
// it did not, so a caller can tell "the probe ran and the target failed" from "no probe".
func netprobeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/fetch", probeEndpoint("url", func(r *http.Request, u string) (any, bool) {
		res := fetch(r.Context(), u, queryTimeout(r))
		return res, res.Error == ""
	}))
	mux.HandleFunc("/resolve", probeEndpoint("name", func(r *http.Request, n string) (any, bool) {
		res := resolve(r.Context(), n, queryTimeout(r))
		return res, res.Error == ""
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, identity(r.RemoteAddr))
	})
	return mux
}

// probeEndpoint answers with run's outcome for the query parameter param: 200 when it worked,
// 502 when it did not, 400 without the parameter.
func probeEndpoint(param string, run func(r *http.Request, arg string) (outcome any, ok bool)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		arg := r.URL.Query().Get(param)
		if arg == "" {
			http.Error(w, r.URL.Path+" needs ?"+param+"=", http.StatusBadRequest)
			return
		}
		res, ok := run(r, arg)
		code := http.StatusOK
		if !ok {
			code = http.StatusBadGateway
		}
		writeJSON(w, code, res)
	}
}

func queryTimeout(r *http.Request) time.Duration {
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 && d <= time.Minute {
		return d
	}
	return 5 * time.Second
}

func identity(remote string) probeIdentity {
	host, _ := os.Hostname()
	id := probeIdentity{Standin: "k3strap netprobe (test stand-in)", Hostname: host, Node: os.Getenv("NODE_NAME"), Remote: remote, Addresses: []string{}}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			id.Addresses = append(id.Addresses, n.IP.String())
		}
	}
	return id
}

// fetch GETs u within timeout, keeping up to 64 KiB of the body.
func fetch(ctx context.Context, u string, timeout time.Duration) probeFetch {
	start := time.Now()
	res := probeFetch{URL: u}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err == nil {
		var resp *http.Response
		client := &http.Transport{DisableKeepAlives: true, Proxy: nil}
		if resp, err = client.RoundTrip(req); err == nil {
			var b []byte
			b, err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			res.Status, res.Body = resp.StatusCode, string(b)
		}
	}
	if err != nil {
		res.Error = err.Error()
	}
	res.Millis = time.Since(start).Milliseconds()
	return res
}

// resolve looks name up with the Go resolver, which reads the pod's /etc/resolv.conf (search
// domains, ndots) as glibc does.
func resolve(ctx context.Context, name string, timeout time.Duration) probeResolve {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := probeResolve{Name: name}
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		res.Error = err.Error()
	}
	res.Addresses = addrs
	return res
}

func netprobeCLI(cmd string, args []string) int {
	fs := flag.NewFlagSet("netprobe "+cmd, flag.ContinueOnError)
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintf(os.Stderr, "usage: netprobe %s [-timeout D] %s\n", cmd, map[string]string{"get": "URL", "resolve": "NAME"}[cmd])
		return 2
	}
	if cmd == "resolve" {
		res := resolve(context.Background(), fs.Arg(0), *timeout)
		if res.Error != "" {
			fmt.Fprintln(os.Stderr, "netprobe:", res.Error)
			return 1
		}
		fmt.Println(strings.Join(res.Addresses, "\n"))
		return 0
	}
	res := fetch(context.Background(), fs.Arg(0), *timeout)
	if res.Error != "" {
		fmt.Fprintln(os.Stderr, "netprobe:", res.Error)
		return 1
	}
	fmt.Print(res.Body)
	if res.Status < 200 || res.Status > 299 {
		fmt.Fprintf(os.Stderr, "netprobe: %s: HTTP %d\n", fs.Arg(0), res.Status)
		return 1
	}
	return 0
}
