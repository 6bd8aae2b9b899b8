// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sitestatus

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReadTimeout bounds one Read as a whole.
const ReadTimeout = 30 * time.Second

// Read lists every SiteStatus object of the management cluster the kubeconfig file names,
// sorted by site name. The credential must be allowed to list sitestatuses in k3strap-fleet
// (an operator's; a site's credential is refused with 403). Bounded by ReadTimeout.
//
// Errors are *Error with the fix (404: the CRD is not installed; 403, 401 as Write's); an
// object whose status does not decode is an error naming it.
func Read(ctx context.Context, kubeconfig string) ([]Site, error) {
	c, err := connect(kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	list, err := c.dyn.Resource(GVR).Namespace(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, c.explain(err, "listing the sites' status", "")
	}
	var out []Site
	for _, it := range list.Items {
		s := Site{Name: it.GetName(), Created: it.GetCreationTimestamp().Time}
		if raw, ok := it.Object["status"].(map[string]any); ok && len(raw) > 0 {
			b, err := json.Marshal(raw)
			if err == nil {
				err = json.Unmarshal(b, &s.Status)
			}
			if err != nil {
				return nil, &Error{Op: "reading the status of site " + s.Name, Server: c.server, Problem: "the object's status does not decode: " + c.redact(err.Error()),
					Fix: "let the site write it again (its next run or report replaces the whole status)"}
			}
			s.Reported = true
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
