// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// patch applies a JSON merge patch (RFC 7386), a strategic merge patch (treated as a merge
// patch: lists are replaced, which is what Kubernetes does for lists without a patch merge
// key such as spec.taints — docs/failure-modes.md F5) or a JSON patch (RFC 6902). A resourceVersion
// carried by the patch is a precondition (409 Conflict when stale).
func (s *Server) patch(w http.ResponseWriter, r *http.Request, t target) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	cur, err := s.cfg.Store.Get(t.gr(), t.ns, t.name)
	if err != nil {
		writeError(w, err)
		return
	}
	ct := r.Header.Get("Content-Type")
	if i := strings.Index(ct, ";"); i >= 0 {
		ct = ct[:i]
	}
	var patched []byte
	switch strings.TrimSpace(ct) {
	case "application/merge-patch+json", "application/strategic-merge-patch+json":
		patched, err = jsonpatch.MergePatch(cur, body)
	case "application/json-patch+json":
		var p jsonpatch.Patch
		p, err = jsonpatch.DecodePatch(body)
		if err == nil {
			patched, err = p.Apply(cur)
		}
	default:
		writeStatus(w, metav1.Status{Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json; got %q", ct)})
		return
	}
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	var obj map[string]any
	if err := json.Unmarshal(patched, &obj); err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	// The stored resourceVersion stays in the patched object unless the patch changed it, so
	// only a resourceVersion sent by the client can conflict.
	b, err := s.cfg.Store.Update(t.gr(), t.ns, t.name, obj, store.UpdateOptions{Status: t.sub == "status", CheckResourceVersion: true})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}
