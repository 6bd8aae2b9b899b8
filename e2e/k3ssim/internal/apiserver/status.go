// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package apiserver

import (
	"encoding/json"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeStatus writes a real metav1.Status error body with its HTTP code.
func writeStatus(w http.ResponseWriter, st metav1.Status) {
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
		st.Code = int32(code)
	}
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeError turns any error into a Status response (apierrors keep their reason and code,
// anything else is an InternalError).
func writeError(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		writeStatus(w, se.Status())
		return
	}
	writeStatus(w, apierrors.NewInternalError(err).ErrStatus)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var b []byte
	switch x := v.(type) {
	case []byte:
		b = x
	default:
		b, _ = json.Marshal(v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func notFoundPath(w http.ResponseWriter) {
	writeStatus(w, metav1.Status{Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{}})
}
