// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// applyRancherIngress creates what the rancher chart exposes besides its Deployment: the
// Service ns/NAME (ports 80 and 443 to the pods) and the Ingress ns/NAME for values.hostname
// with TLS from Secret tls-rancher-ingress (rancher chart templates/service.yaml and
// ingress.yaml). The ingress stand-in (app/ingress.go) answers for that host.
func (c *Controller) applyRancherIngress(hc *helmChart, ns string, vals map[string]any) {
	host, _ := vals["hostname"].(string)
	if host == "" {
		c.cfg.Log.Errorf("k3s simulator: HelmChart %s/%s sets no hostname; the rancher chart would fail: hostname is required", hc.Namespace, hc.Name)
		return
	}
	labels := map[string]string{"app": hc.Name, "app.kubernetes.io/managed-by": "Helm", "release": hc.Name}
	ann := map[string]string{annReleaseName: hc.Name, annReleaseNS: ns}

	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"}}
	svc.Name, svc.Namespace, svc.Labels, svc.Annotations = hc.Name, ns, labels, ann
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	svc.Spec.Selector = map[string]string{"app.kubernetes.io/name": hc.Name, "app.kubernetes.io/instance": hc.Name}
	svc.Spec.Ports = []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)},
		{Name: "https-internal", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(444)},
	}
	if _, err := store.GetTyped[corev1.Service](c.cfg.Store, store.Services, ns, svc.Name); err != nil {
		_, _ = store.CreateTyped(c.cfg.Store, store.Services, ns, svc)
	}

	pt := networkingv1.PathTypeImplementationSpecific
	ing := &networkingv1.Ingress{TypeMeta: metav1.TypeMeta{Kind: "Ingress", APIVersion: "networking.k8s.io/v1"}}
	ing.Name, ing.Namespace, ing.Labels, ing.Annotations = hc.Name, ns, labels, ann
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: "tls-rancher-ingress"}}
	ing.Spec.Rules = []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
		Paths: []networkingv1.HTTPIngressPath{{PathType: &pt, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: hc.Name, Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
	}}}}
	if _, err := store.GetTyped[networkingv1.Ingress](c.cfg.Store, store.Ingresses, ns, ing.Name); err == nil {
		_, err := store.MutateTyped(c.cfg.Store, store.Ingresses, ns, ing.Name, func(x *networkingv1.Ingress) bool {
			x.Labels, x.Annotations, x.Spec = ing.Labels, ing.Annotations, ing.Spec
			return true
		})
		if err != nil {
			c.cfg.Log.Errorf("k3s simulator: updating ingress %s/%s: %v", ns, ing.Name, err)
		}
		return
	}
	if _, err := store.CreateTyped(c.cfg.Store, store.Ingresses, ns, ing); err != nil {
		c.cfg.Log.Errorf("%s", fmt.Sprintf("k3s simulator: creating ingress %s/%s: %v", ns, ing.Name, err))
	}
}
