// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sitestatus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// WriteTimeout bounds one Write as a whole.
const WriteTimeout = 30 * time.Second

// Write replaces the status of site's SiteStatus object (namespace k3strap-fleet) with s, as
// the credential in the kubeconfig file at kubeconfig: a site's own credential (`k3strap fleet
// management credential`) or an operator's. It is one JSON patch of the status subresource
// (RFC 6902 "add" of /status: the whole status is replaced, a field left empty is cleared),
// bounded by WriteTimeout and RequestTimeout. It does not set s.LastSeen.
//
// Errors are *Error and name the fix: 403 — this credential may write only its own site's
// status; 401 — the credential expired or was revoked, regenerate it; 404 — the site's object
// does not exist yet. No error carries the credential.
func Write(ctx context.Context, kubeconfig string, site string, s Status) error {
	if errs := validation.IsDNS1123Subdomain(site); len(errs) > 0 {
		return &Error{Op: "writing the status of site " + site, Problem: fmt.Sprintf("%q is not a Kubernetes object name", site),
			Fix: "use the site's metadata.name (a DNS-1123 label)"}
	}
	c, err := connect(kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	patch, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": s}})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(GVR).Namespace(Namespace).Patch(ctx, site, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	return c.explain(err, "writing the status of site "+site, site)
}
