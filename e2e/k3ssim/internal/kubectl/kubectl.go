// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubectl is the simulator's `k3s kubectl`: a small kubectl that speaks real
// Kubernetes REST over HTTPS to the API named in the kubeconfig (KUBECONFIG, --kubeconfig,
// default /etc/rancher/k3s/k3s.yaml) with its client certificate, printing output and
// errors the way kubectl does (e2e/k3ssim/README.md, "What it does").
package kubectl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options configures one kubectl invocation.
type Options struct {
	Args   []string
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// DefaultKubeconfig is used when neither --kubeconfig nor KUBECONFIG is set.
	DefaultKubeconfig string
	// Version is printed as the client version.
	Version string
}

// valueFlags take a value ("--flag value" or "--flag=value"); short aliases map to long.
var valueFlags = map[string]string{
	"kubeconfig": "kubeconfig", "namespace": "namespace", "n": "namespace", "output": "output", "o": "output",
	"filename": "filename", "f": "filename", "selector": "selector", "l": "selector", "field-selector": "field-selector",
	"raw": "raw", "request-timeout": "request-timeout", "timeout": "timeout", "for": "for", "container": "container",
	"c": "container", "tail": "tail", "grace-period": "grace-period", "context": "context", "s": "server", "server": "server",
}

// boolFlags take no value (an explicit "=false" is honoured).
var boolFlags = map[string]string{
	"A": "all-namespaces", "all-namespaces": "all-namespaces", "overwrite": "overwrite",
	"ignore-daemonsets": "ignore-daemonsets", "delete-emptydir-data": "delete-emptydir-data",
	"delete-local-data": "delete-emptydir-data", "force": "force", "all": "all", "show-labels": "show-labels",
	"no-headers": "no-headers", "ignore-not-found": "ignore-not-found", "wait": "wait", "insecure-skip-tls-verify": "insecure-skip-tls-verify",
	"show-managed-fields": "show-managed-fields", "watch": "watch", "w": "watch", "validate": "validate",
	"client": "client", "output-watch-events": "output-watch-events", "watch-only": "watch-only",
}

type invocation struct {
	pos   []string
	flags map[string]string
	multi map[string][]string
}

func (in invocation) flag(name string) string { return in.flags[name] }
func (in invocation) bool(name string) bool {
	v, ok := in.flags[name]
	return ok && v != "false"
}

func parseArgs(args []string) (invocation, error) {
	in := invocation{flags: map[string]string{}, multi: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			in.pos = append(in.pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			in.pos = append(in.pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if long, ok := boolFlags[name]; ok {
			if !hasVal {
				val = "true"
			}
			in.flags[long] = val
			continue
		}
		long, ok := valueFlags[name]
		if !ok {
			// Short flags glued to their value: -nkube-system, -ojson.
			if len(name) > 1 && !strings.HasPrefix(a, "--") {
				if l, ok2 := valueFlags[name[:1]]; ok2 {
					long, val, hasVal, ok = l, name[1:], true, true
				}
			}
		}
		if !ok {
			return in, fmt.Errorf("unknown flag: %s", a)
		}
		if !hasVal {
			if i+1 >= len(args) {
				return in, fmt.Errorf("flag needs an argument: %s", a)
			}
			i++
			val = args[i]
		}
		in.flags[long] = val
		in.multi[long] = append(in.multi[long], val)
	}
	return in, nil
}

// exitError carries a message kubectl prints to stderr and exit code 1.
type exitError struct{ msg string }

func (e *exitError) Error() string { return e.msg }

func failf(format string, args ...any) error { return &exitError{fmt.Sprintf(format, args...)} }

// Run executes one kubectl command and returns its exit code.
func Run(ctx context.Context, opts Options) int {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	in, err := parseArgs(opts.Args)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "error: %v\nSee 'kubectl --help' for usage.\n", err)
		return 1
	}
	if len(in.pos) == 0 {
		fmt.Fprintln(opts.Stdout, "kubectl (k3strap K3s SIMULATOR) — supported: get, apply, create, replace, delete, taint, label, annotate, cordon, uncordon, drain, logs, wait, rollout status, version")
		return 0
	}
	k := &kubectl{opts: opts, in: in}
	cmd := in.pos[0]
	in.pos = in.pos[1:]
	k.in = in
	if cmd == "version" && in.flag("client") == "true" {
		fmt.Fprintf(opts.Stdout, "Client Version: %s\n", opts.Version)
		return 0
	}
	if err := k.connect(); err != nil {
		fmt.Fprintln(opts.Stderr, err.Error())
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, k.requestTimeout())
	defer cancel()
	k.ctx = ctx
	switch cmd {
	case "get":
		err = k.get()
	case "apply":
		err = k.apply()
	case "create":
		err = k.create()
	case "replace":
		err = k.replace()
	case "delete":
		err = k.delete()
	case "taint":
		err = k.taint()
	case "label":
		err = k.labelOrAnnotate("labels", "labeled", "unlabeled")
	case "annotate":
		err = k.labelOrAnnotate("annotations", "annotated", "unannotated")
	case "cordon":
		err = k.cordon(true)
	case "uncordon":
		err = k.cordon(false)
	case "drain":
		err = k.drain()
	case "logs":
		err = k.logs()
	case "wait":
		err = k.wait()
	case "rollout":
		err = k.rollout()
	case "version":
		err = k.version()
	default:
		err = failf("error: unknown command %q for \"kubectl\"", cmd)
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(opts.Stderr, ee.msg)
			}
		} else {
			fmt.Fprintf(opts.Stderr, "error: %v\n", err)
		}
		return 1
	}
	return 0
}

type kubectl struct {
	opts   Options
	in     invocation
	ctx    context.Context
	host   string // host:port for the connection-refused message
	base   string
	client *http.Client
	res    []resInfo // discovery cache
}

func (k *kubectl) requestTimeout() time.Duration {
	if d, err := time.ParseDuration(k.in.flag("request-timeout")); err == nil && d > 0 {
		return d
	}
	if d, err := time.ParseDuration(k.in.flag("timeout")); err == nil && d > 0 {
		return d + 30*time.Second
	}
	return 10 * time.Minute
}

func (k *kubectl) connect() error {
	path := k.in.flag("kubeconfig")
	if path == "" {
		path = k.opts.Getenv("KUBECONFIG")
	}
	if path == "" {
		path = k.opts.DefaultKubeconfig
	}
	if i := strings.Index(path, string(os.PathListSeparator)); i >= 0 {
		path = path[:i]
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("error: error loading config file %q: open %s: no such file or directory", path, path)
	}
	cfg, err := clientcmd.BuildConfigFromFlags(k.in.flag("server"), path)
	if err != nil {
		return fmt.Errorf("error: error loading config file %q: %v", path, err)
	}
	if k.in.bool("insecure-skip-tls-verify") {
		cfg.Insecure, cfg.CAData, cfg.CAFile = true, nil, ""
	}
	cl, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("error: %v", err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return fmt.Errorf("error: invalid server %q in %s", cfg.Host, path)
	}
	k.base = strings.TrimRight(cfg.Host, "/")
	k.host = u.Host
	k.client = cl
	return nil
}

// apiError is a non-2xx answer.
type apiError struct {
	code   int
	status *metav1.Status
	body   string
}

func (e *apiError) Error() string { return e.message("") }

// message renders the error as kubectl does, with an optional "error when ...: " prefix
// inside the server message.
func (e *apiError) message(prefix string) string {
	if e.status != nil {
		if e.code == http.StatusUnauthorized {
			return "error: You must be logged in to the server (Unauthorized)"
		}
		reason := string(e.status.Reason)
		if reason == "" {
			reason = "Unknown"
		}
		return fmt.Sprintf("Error from server (%s): %s%s", reason, prefix, e.status.Message)
	}
	switch e.code {
	case http.StatusNotFound:
		return "Error from server (NotFound): " + prefix + "the server could not find the requested resource"
	case http.StatusServiceUnavailable:
		return "Error from server (ServiceUnavailable): " + prefix + "the server is currently unable to handle the request"
	}
	return fmt.Sprintf("Error from server (InternalError): %san error on the server (%q) has prevented the request from succeeding", prefix, strings.TrimSpace(e.body))
}

func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.code == http.StatusNotFound
}

func isConflict(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.code == http.StatusConflict
}

// do sends a request; a connection failure becomes kubectl's connection message.
func (k *kubectl) do(method, path, ctype string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(k.ctx, method, k.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json, */*")
	resp, err := k.client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, failf("The connection to the server %s was refused - did you specify the right host or port?", k.host)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, failf("Unable to connect to the server: %v", err)
		}
		return nil, failf("Unable to connect to the server: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{code: resp.StatusCode, body: string(data)}
		var st metav1.Status
		if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
			ae.status = &st
		}
		return nil, ae
	}
	return data, nil
}

// serverErr turns an apiError into an exitError (kubectl prints it and exits 1).
func serverErr(err error, prefix string) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return &exitError{ae.message(prefix)}
	}
	return err
}

func (k *kubectl) namespace() string {
	if ns := k.in.flag("namespace"); ns != "" {
		return ns
	}
	return "default"
}

func (k *kubectl) readFiles() ([]namedObject, error) {
	files := k.in.multi["filename"]
	if len(files) == 0 {
		return nil, failf("error: must specify one of -f and -k")
	}
	var out []namedObject
	for _, f := range files {
		var data []byte
		var err error
		source := f
		if f == "-" {
			data, err = io.ReadAll(k.opts.Stdin)
			source = "STDIN"
		} else {
			data, err = os.ReadFile(f)
		}
		if err != nil {
			return nil, failf("error: the path %q does not exist", f)
		}
		objs, err := splitObjects(data)
		if err != nil {
			return nil, failf("error: error parsing %s: %v", source, err)
		}
		for _, o := range objs {
			out = append(out, namedObject{source: source, obj: o})
		}
	}
	return out, nil
}

type namedObject struct {
	source string
	obj    map[string]any
}
