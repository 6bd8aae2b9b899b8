// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sitestatus

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// CRDName is the SiteStatus CustomResourceDefinition's name.
const CRDName = Resource + "." + Group

// crdManifest is the SiteStatus CustomResourceDefinition (apiextensions.k8s.io/v1,
// https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/):
// a status subresource (a site writes only status: its Role grants sitestatuses/status) and
// printer columns for `kubectl get sitestatuses`. The schema is Status's fields.
const crdManifest = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sitestatuses.fleet.k3strap.io
  labels:
    app.kubernetes.io/managed-by: k3strap
spec:
  group: fleet.k3strap.io
  scope: Namespaced
  names:
    kind: SiteStatus
    listKind: SiteStatusList
    plural: sitestatuses
    singular: sitestatus
    shortNames: [sst]
    categories: [k3strap]
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources:
        status: {}
      additionalPrinterColumns:
        - {name: Source, type: string, jsonPath: .status.source}
        - {name: Version, type: string, jsonPath: .status.version}
        - {name: Ready, type: integer, jsonPath: .status.nodesReady}
        - {name: Nodes, type: integer, jsonPath: .status.nodesTotal}
        - {name: Result, type: string, jsonPath: .status.lastResult.exitMeaning}
        - {name: Verdict, type: string, jsonPath: .status.doctorVerdict}
        - {name: Last seen, type: date, jsonPath: .status.lastSeen}
        - {name: Applied, type: string, jsonPath: .status.appliedRevision, priority: 1}
        - {name: Desired, type: string, jsonPath: .status.desiredRevision, priority: 1}
      schema:
        openAPIV3Schema:
          type: object
          description: One site's status, written by the site's own identity (docs/fleet.md).
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              properties:
                site: {type: string, description: The site's name.}
            status:
              type: object
              properties:
                source: {type: string, enum: [push, pull]}
                version: {type: string}
                nodesReady: {type: integer, minimum: 0}
                nodesTotal: {type: integer, minimum: 0}
                lastResult:
                  type: object
                  properties:
                    command: {type: string}
                    exitCode: {type: integer}
                    exitMeaning: {type: string}
                    message: {type: string}
                    time: {type: string, format: date-time}
                doctorVerdict: {type: string}
                desiredRevision: {type: string}
                appliedRevision: {type: string}
                sourceReachable: {type: boolean}
                sourceMessage: {type: string}
                lastSeen: {type: string, format: date-time}
`

// CRD returns the SiteStatus CustomResourceDefinition as an object to apply. An error is a
// defect of this build (the manifest is a constant; the package's tests parse it).
func CRD() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(crdManifest), &u.Object); err != nil {
		return nil, fmt.Errorf("the built-in SiteStatus CRD manifest does not parse: %w", err)
	}
	return u, nil
}

var (
	crdGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	// GVR is the SiteStatus resource.
	GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}
)

// establishTimeout bounds the wait for the API server to serve a new CRD.
const establishTimeout = time.Minute

// Install applies the namespace k3strap-fleet and the SiteStatus CRD to the management
// cluster kubeconfig names (server-side apply, field manager "k3strap": re-running changes
// nothing, a newer k3strap updates its CRD), then waits up to a minute for the CRD to be
// Established. The credential needs cluster-admin rights (it creates a CRD).
//
// Errors are *Error: what failed, the fix, never the credential.
func Install(ctx context.Context, kubeconfig string) error {
	c, err := connect(kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, establishTimeout+2*RequestTimeout)
	defer cancel()
	if err := c.apply(ctx, namespaceGVR, "", namespaceObject()); err != nil {
		return c.explain(err, "applying the namespace "+Namespace, "")
	}
	crd, err := CRD()
	if err != nil {
		return err
	}
	if err := c.apply(ctx, crdGVR, "", crd); err != nil {
		return c.explain(err, "applying the CustomResourceDefinition "+CRDName, "")
	}
	return c.waitEstablished(ctx)
}

// waitEstablished polls the CRD until its Established condition is True.
func (c *client) waitEstablished(ctx context.Context) error {
	deadline := time.Now().Add(establishTimeout)
	for {
		u, err := c.dyn.Resource(crdGVR).Get(ctx, CRDName, getOptions)
		if err != nil {
			return c.explain(err, "reading the CustomResourceDefinition "+CRDName, "")
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cd := range conds {
			m, _ := cd.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return &Error{Op: "waiting for the CustomResourceDefinition " + CRDName, Server: c.server,
				Problem: fmt.Sprintf("not Established after %s", establishTimeout),
				Fix:     "look at `kubectl describe crd " + CRDName + "` on the management cluster"}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func namespaceObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": Namespace, "labels": map[string]any{"app.kubernetes.io/managed-by": "k3strap"}},
	}}
}
