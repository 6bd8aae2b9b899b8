// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/k3strap/k3strap/inventory"
)

// problems collects a fleet file's problems, each with its position.
type problems struct {
	f    *Fleet
	errs inventory.ErrorList
}

// add records a problem about the value (or, with key, the key) at path.
func (p *problems) add(path string, key bool, msg, fix string) {
	pos := p.f.positionOf(path)
	if key {
		if kp, ok := p.f.KeyPositions[path]; ok {
			pos = kp
		}
	}
	p.errs = append(p.errs, &inventory.FieldError{File: p.f.Source, Line: pos.Line, Column: pos.Column, Path: path, Message: msg, Fix: fix})
}

// validate checks what the fleet file itself declares (the sites' inventories are validated
// when they load):
//   - apiVersion k3strap.io/v1alpha1, kind Fleet, metadata.name a DNS-1123 label;
//   - at least one site; every entry has a path; labels are Kubernetes label keys and values;
//   - rollout: canary ≥ 0; batch a number ≥ 1 or a percentage 1%–100%; maxFailedSites a
//     number ≥ 0 or a percentage; concurrency ≥ 0 (0: the default); siteTimeout ≥ 0;
//     orderBy and groupBy label keys; unreachable: attempts 0–100 (0: the default),
//     retryAfter and maxWait 0–24h, retryAfter at most maxWait (unreachable.go);
//   - defaults: an install mode online or airgap, not both version and channel; the rest is
//     judged in each site that takes it, by the inventory's rules, and reported at the
//     defaults' line (load.go).
func (f *Fleet) validate() inventory.ErrorList {
	p := &problems{f: f}
	switch f.APIVersion {
	case inventory.APIVersion:
	case "":
		p.add("apiVersion", false, "apiVersion is missing", "add apiVersion: "+inventory.APIVersion+" at the top")
	default:
		p.add("apiVersion", false, fmt.Sprintf("apiVersion %q is not supported", f.APIVersion), "write apiVersion: "+inventory.APIVersion)
	}
	if f.Kind != Kind {
		p.add("kind", false, fmt.Sprintf("kind %q is not a fleet", f.Kind), "write kind: "+Kind)
	}
	switch name := f.Metadata.Name; {
	case name == "":
		p.add("metadata.name", false, "metadata.name is missing", "add metadata: {name: my-fleet}")
	case len(validation.IsDNS1123Label(name)) > 0:
		p.add("metadata.name", false, fmt.Sprintf("fleet name %q is not a DNS-1123 label", name),
			"use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit")
	}
	if len(f.Spec.Sites) == 0 {
		p.add("spec.sites", true, "the fleet lists no sites", "add spec.sites with one '- path: site.yaml' (or a glob such as sites/*.yaml) per site inventory")
	}
	for i, s := range f.Spec.Sites {
		base := fmt.Sprintf("spec.sites[%d]", i)
		if strings.TrimSpace(s.Path) == "" {
			p.add(base, false, base+" has no path", "give path: the site's inventory file (kind Cluster), or a glob such as sites/*.yaml")
		}
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lp := base + ".labels." + k
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				p.add(lp, true, fmt.Sprintf("label key %q: %s", k, strings.Join(errs, "; ")), "use a Kubernetes label key such as region or example.com/tier")
			}
			if errs := validation.IsValidLabelValue(s.Labels[k]); len(errs) > 0 {
				p.add(lp, false, fmt.Sprintf("label %s=%q: %s", k, s.Labels[k], strings.Join(errs, "; ")), "use at most 63 letters, digits, '-', '_' and '.'")
			}
		}
	}
	r := f.Spec.Rollout
	if r.Canary != nil && *r.Canary < 0 {
		p.add("spec.rollout.canary", false, fmt.Sprintf("rollout.canary %d is negative", *r.Canary), "give the number of canary sites (0: no canary)")
	}
	if r.Batch != "" {
		if n, _, err := r.Batch.parse(); err != nil || n == 0 {
			msg := "rollout.batch must be at least one site"
			if err != nil {
				msg = "rollout.batch " + err.Error()
			}
			p.add("spec.rollout.batch", false, msg, "write a number of sites per wave (batch: 5) or a percentage of the sites (batch: 25%)")
		}
	}
	if r.MaxFailedSites != "" {
		if _, _, err := r.MaxFailedSites.parse(); err != nil {
			p.add("spec.rollout.maxFailedSites", false, "rollout.maxFailedSites "+err.Error(), "write how many sites may fail before the rollout stops (maxFailedSites: 2) or a percentage (maxFailedSites: 5%)")
		}
	}
	if r.Concurrency < 0 {
		p.add("spec.rollout.concurrency", false, fmt.Sprintf("rollout.concurrency %d is negative", r.Concurrency), "give how many sites run at once")
	}
	if r.Concurrency > MaxConcurrency {
		p.add("spec.rollout.concurrency", false, fmt.Sprintf("rollout.concurrency %d is more than %d", r.Concurrency, MaxConcurrency), fmt.Sprintf("give how many sites run at once, at most %d", MaxConcurrency))
	}
	if r.SiteTimeout < 0 {
		p.add("spec.rollout.siteTimeout", false, "rollout.siteTimeout is negative", "give a duration such as 30m")
	}
	r.Unreachable.validate(p)
	for _, l := range []struct{ path, key string }{{"spec.rollout.orderBy", r.OrderBy}, {"spec.rollout.groupBy", r.GroupBy}} {
		if l.key == "" {
			continue
		}
		if errs := validation.IsQualifiedName(l.key); len(errs) > 0 {
			p.add(l.path, false, fmt.Sprintf("%q is not a label key: %s", l.key, strings.Join(errs, "; ")), "name a label of spec.sites[].labels, e.g. region")
		}
	}
	k := f.Spec.Defaults.K3s
	switch k.Install {
	case "", inventory.Online, inventory.Airgap:
	default:
		p.add("spec.defaults.k3s.install", false, fmt.Sprintf("install %q is neither online nor airgap", k.Install), "write install: online or install: airgap")
	}
	if k.Version != "" && k.Channel != "" {
		p.add("spec.defaults.k3s.channel", true, "defaults.k3s.version and defaults.k3s.channel are both set", "keep version (a fixed release) or channel, not both")
	}
	return p.errs
}
