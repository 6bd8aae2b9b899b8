// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

var exists = corev1.TolerationOpExists

// addonTolerations are the tolerations of local-path-provisioner, metrics-server and
// traefik in K3s's packaged manifests.
var addonTolerations = []corev1.Toleration{
	{Key: "CriticalAddonsOnly", Operator: exists},
	{Key: "node-role.kubernetes.io/control-plane", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node-role.kubernetes.io/master", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
}

// corednsTolerations are CoreDNS's own tolerations (fixture coredns-describe-f1.txt, before
// the admission plugin adds not-ready/unreachable NoExecute for 300 s).
var corednsTolerations = []corev1.Toleration{
	{Key: "CriticalAddonsOnly", Operator: exists},
	{Key: "node-role.kubernetes.io/control-plane", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
}

func addonDeployment(name string, labels map[string]string, image string, tols []corev1.Toleration, prio string) *appsv1.Deployment {
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}}
	d.Name, d.Namespace = name, "kube-system"
	d.Labels = map[string]string{"objectset.rio.cattle.io/hash": hash10(name)}
	for k, v := range labels {
		d.Labels[k] = v
	}
	d.Annotations = map[string]string{"objectset.rio.cattle.io/applied": "", "objectset.rio.cattle.io/id": "", "objectset.rio.cattle.io/owner-gvk": "k3s.cattle.io/v1, Kind=Addon", "objectset.rio.cattle.io/owner-name": name, "objectset.rio.cattle.io/owner-namespace": "kube-system"}
	one := int32(1)
	d.Spec.Replicas = &one
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	d.Spec.Template.Labels = labels
	d.Spec.Template.Spec = corev1.PodSpec{
		PriorityClassName:  prio,
		ServiceAccountName: name,
		NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
		Tolerations:        tols,
		Containers:         []corev1.Container{{Name: name, Image: image}},
	}
	return d
}

func corednsDeployment() *appsv1.Deployment {
	d := addonDeployment("coredns", map[string]string{"k8s-app": "kube-dns"}, "rancher/mirrored-coredns-coredns:1.14.6",
		corednsTolerations, "system-cluster-critical")
	d.Labels["kubernetes.io/name"] = "CoreDNS"
	ct := &d.Spec.Template.Spec.Containers[0]
	ct.Args = []string{"-conf", "/etc/coredns/Corefile"}
	ct.Ports = []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP}}
	ct.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
	}
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}}},
		{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}}},
	}
	return d
}

// deployAddons is K3s's deploy controller applying its packaged manifests (create if
// missing, never overwrite): CoreDNS, local-path-provisioner, metrics-server, the traefik
// HelmCharts, with an Addon object per manifest, and the default/kubernetes and kube-dns
// services.
func (c *Controller) deployAddons() {
	s := c.cfg.Store
	addon := func(name, file string) {
		a := map[string]any{"apiVersion": "k3s.cattle.io/v1", "kind": "Addon",
			"metadata": map[string]any{"name": name, "namespace": "kube-system"},
			"spec":     map[string]any{"source": "/var/lib/rancher/k3s/server/manifests/" + file, "checksum": hash10(file)}}
		_, _ = s.Create(store.Addons, "kube-system", a)
	}
	addon("ccm", "ccm.yaml")
	addon("rolebindings", "rolebindings.yaml")
	addon("runtimes", "runtimes.yaml")
	c.ensureService("default", "kubernetes", firstServiceIP(c.cfg.ServiceCIDR), 443, nil)
	if !c.disabled("coredns") {
		addon("coredns", "coredns.yaml")
		_, _ = store.CreateTyped(s, store.Deployments, "kube-system", corednsDeployment())
		c.ensureService("kube-system", "kube-dns", c.cfg.ClusterDNS, 53, map[string]string{"k8s-app": "kube-dns"})
	}
	if !c.disabled("local-storage") {
		addon("local-storage", "local-storage.yaml")
		_, _ = store.CreateTyped(s, store.Deployments, "kube-system", addonDeployment("local-path-provisioner",
			map[string]string{"app": "local-path-provisioner"}, "rancher/local-path-provisioner:v0.0.32", addonTolerations, "system-node-critical"))
	}
	if !c.disabled("metrics-server") {
		addon("metrics-server-deployment", "metrics-server/metrics-server-deployment.yaml")
		_, _ = store.CreateTyped(s, store.Deployments, "kube-system", addonDeployment("metrics-server",
			map[string]string{"k8s-app": "metrics-server"}, "rancher/mirrored-metrics-server:v0.8.0", addonTolerations, "system-cluster-critical"))
	}
	if !c.disabled("traefik") {
		addon("traefik", "traefik.yaml")
		for _, name := range []string{"traefik-crd", "traefik"} {
			hc := map[string]any{"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
				"metadata": map[string]any{"name": name, "namespace": "kube-system"},
				"spec": map[string]any{"chart": "https://%{KUBERNETES_API}%/static/charts/" + name + "-37.1.1+up37.1.0.tgz",
					"set": map[string]any{"global.systemDefaultRegistry": ""}}}
			_, _ = s.Create(store.HelmCharts, "kube-system", hc)
		}
	}
}

func (c *Controller) ensureService(ns, name, ip string, port int32, selector map[string]string) {
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"}}
	svc.Name, svc.Namespace = name, ns
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, Selector: selector,
		Ports: []corev1.ServicePort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port)}}}
	if name == "kube-dns" {
		svc.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)}}
	}
	_, _ = store.CreateTyped(c.cfg.Store, store.Services, ns, svc)
}

// ensureSvclb creates ServiceLB's DaemonSet for the traefik LoadBalancer service (ServiceLB
// runs inside K3s's embedded cloud controller).
func (c *Controller) ensureSvclb(ns string) {
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"}}
	svc.Name, svc.Namespace = "traefik", ns
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app.kubernetes.io/name": "traefik"},
		Ports: []corev1.ServicePort{{Name: "web", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "websecure", Port: 443, Protocol: corev1.ProtocolTCP}}}
	created, err := store.CreateTyped(c.cfg.Store, store.Services, ns, svc)
	uid := "00000000"
	if err == nil {
		uid = string(created.UID)[:8]
	} else if cur, err := store.GetTyped[corev1.Service](c.cfg.Store, store.Services, ns, "traefik"); err == nil {
		uid = string(cur.UID)[:8]
	}
	name := fmt.Sprintf("svclb-traefik-%s", uid)
	ds := &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{Kind: "DaemonSet", APIVersion: "apps/v1"}}
	ds.Name, ds.Namespace = name, "kube-system"
	labels := map[string]string{"app": name, "svccontroller.k3s.cattle.io/svcname": "traefik", "svccontroller.k3s.cattle.io/svcnamespace": ns}
	ds.Labels = labels
	ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	ds.Spec.Template.Labels = labels
	ds.Spec.Template.Spec = corev1.PodSpec{
		PriorityClassName: "system-node-critical",
		Tolerations: []corev1.Toleration{
			{Key: "node-role.kubernetes.io/master", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "node-role.kubernetes.io/control-plane", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "CriticalAddonsOnly", Operator: exists},
		},
		Containers: []corev1.Container{{Name: "lb-tcp-80", Image: "rancher/klipper-lb:v0.4.13"}, {Name: "lb-tcp-443", Image: "rancher/klipper-lb:v0.4.13"}},
	}
	_, _ = store.CreateTyped(c.cfg.Store, store.DaemonSets, "kube-system", ds)
}

func firstServiceIP(cidr string) string {
	var a, b, cc, d, bits int
	if _, err := fmt.Sscanf(cidr, "%d.%d.%d.%d/%d", &a, &b, &cc, &d, &bits); err != nil {
		return "10.43.0.1"
	}
	return fmt.Sprintf("%d.%d.%d.%d", a, b, cc, d+1)
}
