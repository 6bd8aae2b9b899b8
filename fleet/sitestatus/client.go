// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sitestatus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RequestTimeout bounds every request to the management cluster (rest.Config.Timeout); the
// calls of this package bound their whole work as well (WriteTimeout, establishTimeout).
const RequestTimeout = 20 * time.Second

// fieldManager owns the fields k3strap applies (server-side apply).
const fieldManager = "k3strap"

var getOptions = metav1.GetOptions{}

// client is a connection to the management cluster made from a kubeconfig file.
type client struct {
	dyn    dynamic.Interface
	core   kubernetes.Interface
	cfg    *rest.Config
	path   string // the kubeconfig file
	server string // the API server's URL, for messages
	// secrets are the credential's values that no message may carry (the bearer token,
	// a password).
	secrets []string
}

// connect loads the kubeconfig file at path (its current context) with RequestTimeout.
func connect(path string) (*client, error) {
	if strings.TrimSpace(path) == "" {
		return nil, &Error{Op: "loading the management cluster's kubeconfig", Problem: "no kubeconfig file given",
			Fix: "give the management cluster's kubeconfig (spec.management.kubeconfig in the fleet file, or --management-kubeconfig)"}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		// clientcmd's errors name the file and the YAML line; they carry no credential.
		return nil, &Error{Op: "loading the kubeconfig " + path, Problem: err.Error(),
			Fix: "give a kubeconfig file of the management cluster (for a site: the file `k3strap fleet management credential` wrote)"}
	}
	cfg.Timeout = RequestTimeout
	cfg.UserAgent = "k3strap"
	c := &client{cfg: cfg, path: path, server: cfg.Host}
	for _, s := range []string{cfg.BearerToken, cfg.Password} {
		if s != "" {
			c.secrets = append(c.secrets, s)
		}
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, c.explain(err, "connecting to the management cluster", "")
	}
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType = "application/json" // one wire format for every call (and the tests' fake API)
	if c.core, err = kubernetes.NewForConfig(jsonCfg); err != nil {
		return nil, c.explain(err, "connecting to the management cluster", "")
	}
	return c, nil
}

// apply applies obj (server-side apply, k3strap's field manager, conflicts forced).
func (c *client) apply(ctx context.Context, gvr schema.GroupVersionResource, ns string, obj *unstructured.Unstructured) error {
	b, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = c.dyn.Resource(gvr).Namespace(ns).Patch(ctx, obj.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	return err
}

// Error is a failed call to the management cluster: what was done (Op), on which server,
// what went wrong and the fix. It never carries the credential's token or password.
type Error struct {
	Op, Server, Problem, Fix string
	// Code is the API's HTTP status (403, 401, 404...), 0 when no answer came.
	Code int
	err  error
}

// Error formats "OP on the management cluster SERVER: PROBLEM — fix: FIX".
func (e *Error) Error() string {
	s := e.Op
	if e.Server != "" {
		s += " on the management cluster " + e.Server
	}
	s += ": " + e.Problem
	if e.Fix != "" {
		s += " — fix: " + e.Fix
	}
	return s
}

// Unwrap returns the underlying error (an API status error, a network error), whose text
// was checked to hold no secret.
func (e *Error) Unwrap() error { return e.err }

// regenerate is the command that makes a site's credential anew.
func regenerate(site string) string {
	if site == "" {
		site = "SITE"
	}
	return "k3strap fleet management credential --kubeconfig MANAGEMENT.kubeconfig --site " + site + " --out " + site + ".kubeconfig"
}

// explain turns err of op into an *Error with the fix for its cause: 403 (the credential may
// not do this: a site's may write only its own status), 401 (expired or revoked), 404, no
// answer. site is the site the call concerned ("" for none). The message holds no secret.
func (c *client) explain(err error, op, site string) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	e := &Error{Op: op, Server: c.server, err: err}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		e.Code = int(st.Status().Code)
	}
	switch {
	case apierrors.IsForbidden(err):
		e.Problem = "403 Forbidden: " + c.redact(err.Error())
		if site != "" {
			e.Fix = fmt.Sprintf("this credential may write only its own site's status; site %s's status is written with site %s's credential (%s), and `fleet status` reads with an operator's kubeconfig", site, site, regenerate(site))
		} else {
			e.Fix = "use an operator's kubeconfig of the management cluster (a site's credential may only write its own site's status)"
		}
	case apierrors.IsUnauthorized(err):
		e.Problem = "401 Unauthorized: the credential was refused (expired, revoked, or of another cluster)"
		e.Fix = "regenerate the credential with an operator's kubeconfig: " + regenerate(site)
	case apierrors.IsNotFound(err) && site != "":
		e.Problem = fmt.Sprintf("the SiteStatus object %s/%s does not exist (404)", Namespace, site)
		e.Fix = "create it and the site's credential: " + regenerate(site) + " (after `k3strap fleet management install`)"
	case apierrors.IsNotFound(err):
		e.Problem = "404 Not Found: " + c.redact(err.Error())
		e.Fix = "install the SiteStatus CRD first: k3strap fleet management install --kubeconfig MANAGEMENT.kubeconfig"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		e.Problem = "no answer in time: " + c.redact(err.Error())
		e.Fix = "check that the management cluster's API server (the kubeconfig's server) is up and reachable from here"
	case errors.Is(err, context.Canceled):
		e.Problem = "cancelled"
	default:
		e.Problem = c.redact(err.Error())
		var ne net.Error
		var oe *net.OpError
		if errors.As(err, &ne) || errors.As(err, &oe) {
			e.Fix = "check that the management cluster's API server (the kubeconfig's server) is up and reachable from here"
		}
	}
	return e
}

func isTimeout(err error) bool {
	var ne net.Error
	return (errors.As(err, &ne) && ne.Timeout()) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// redact replaces every secret of the credential in msg.
func (c *client) redact(msg string) string {
	for _, s := range c.secrets {
		msg = strings.ReplaceAll(msg, s, "[redacted]")
	}
	return msg
}

// Server returns the API server URL of the kubeconfig file's current context ("" when the
// file does not load: the call that uses it says why).
func Server(kubeconfig string) string {
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return ""
	}
	return c.Host
}
