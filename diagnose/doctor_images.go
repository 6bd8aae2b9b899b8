// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// Images pods cannot pull (an airgap images archive missing).

// pulledImageRE finds the image a pull error names: the kubelet's `failed to pull image
// "REF"` / `Failed to pull image "REF"` and its ErrImagePull message `image "REF"`.
var pulledImageRE = regexp.MustCompile(`(?i)(?:pull(?:ing)? image|image) \\?"([^"\\]+)\\?"`)

// checkImagePull: pods on a node that cannot start because their images (or the sandbox's
// pause image) cannot be pulled — on an airgap site, usually the images archive was never put in
// /var/lib/rancher/k3s/agent/images/ (docs/k3s.md "Airgap"). It judges the present: a pod that
// runs is fine, and only events after the node's unit last started count.
func checkImagePull(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		var since time.Time
		if ne := in.evidenceOf(n.Name); ne != nil && ne.Facts != nil {
			since = ne.Facts.StartedAt
		}
		images := map[string]bool{}
		var stuck []string
		var ev []finding.Evidence
		for _, p := range podsOn(in.View.Pods, n.Name) {
			if running(p) {
				continue
			}
			msgs := append([]string{podReason(p)}, in.podEventsSince(p.Namespace, p.Name, since)...)
			hit := ""
			for _, m := range msgs {
				if !imagePullRE.MatchString(m) {
					continue
				}
				hit = m
				for _, g := range pulledImageRE.FindAllStringSubmatch(m, -1) {
					ref := strings.TrimPrefix(strings.TrimPrefix(g[1], "docker.io/"), "library/")
					images[ref] = true
				}
			}
			if hit != "" {
				stuck = append(stuck, p.Namespace+"/"+p.Name)
				ev = append(ev, finding.Evidence{Text: p.Namespace + "/" + p.Name + ": " + trimLine(hit), Source: "kubectl get pods,events -A"})
			}
		}
		if len(stuck) == 0 {
			continue
		}
		refs := slices.Sorted(maps.Keys(images))
		f := finding.Finding{ID: checkid.ImagePull, Severity: finding.Error, Host: n.Name,
			Title: fmt.Sprintf("pods on %s cannot pull their images", n.Name),
			Message: fmt.Sprintf("%s: the container runtime on %s cannot pull %s, so these pods never start: %s.",
				plural(len(stuck), "pod waits", "pods wait"), n.Name, orList(refs, "their images"), strings.Join(stuck, ", ")),
			Evidence: ev,
			Fixes: []string{
				"on an airgap host: put the release's k3s-airgap-images-<arch>.tar.zst in " + k3s.DirImages + "/ (spec.k3s.airgap.<arch>.images) and restart K3s there",
				"otherwise: let the node reach the registry, or configure a mirror (spec.registries, /etc/rancher/k3s/registries.yaml)",
			}}
		out = append(out, f)
	}
	return out
}

// orList joins items with ", ", or says def when there are none.
func orList(items []string, def string) string {
	if len(items) == 0 {
		return def
	}
	return strings.Join(items, ", ")
}
