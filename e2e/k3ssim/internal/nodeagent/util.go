// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"crypto/sha256"
	"encoding/base32"
	"runtime"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var typeMetaNode = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}

func objectMeta(name string, labels, ann map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: labels, Annotations: ann}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func mustTime(s string) metav1.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return metav1.Now()
	}
	return metav1.NewTime(t)
}

func configHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(h[:])
}

func goVersion() string { return runtime.Version() }
