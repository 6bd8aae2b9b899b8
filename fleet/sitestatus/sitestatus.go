// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sitestatus keeps every site's status in a management cluster: one SiteStatus
// object (a CRD of group fleet.k3strap.io, namespaced in k3strap-fleet, named after the site)
// per site, written by the site's own identity — a ServiceAccount whose Role lets it get,
// update and patch that one object only — and read by `k3strap fleet status`. The management
// cluster's API is the collector: `kubectl get sitestatuses -n k3strap-fleet` shows the same.
// See docs/fleet.md "Status in a management cluster".
package sitestatus

import (
	"time"
)

// The SiteStatus API (crd.go holds its CustomResourceDefinition).
const (
	// Group and Version are the API group and version of SiteStatus.
	Group   = "fleet.k3strap.io"
	Version = "v1alpha1"
	// Kind is the object's kind; Resource and Singular its plural and singular resource names.
	Kind     = "SiteStatus"
	Resource = "sitestatuses"
	Singular = "sitestatus"
	// Namespace holds every SiteStatus object, its sites' ServiceAccounts, Roles and
	// RoleBindings.
	Namespace = "k3strap-fleet"
	// SiteLabel labels every object k3strap makes for a site with the site's name.
	SiteLabel = Group + "/site"
)

// Sources of a status: who wrote it.
const (
	// SourcePush is a site k3strap rolls out over SSH (`k3strap fleet apply`): the
	// operator's machine writes its status after each run.
	SourcePush = "push"
	// SourcePull is a site that converges itself from a pulled source and reports itself.
	SourcePull = "pull"
)

// Status is a site's status as its SiteStatus object's status holds it (the JSON names are
// the object's fields). The writer fills every field it knows; Write replaces the whole
// status, so a field left empty is cleared.
type Status struct {
	// Source is who reports the site: SourcePush or SourcePull.
	Source string `json:"source"`
	// Version is the K3s version the site's nodes run ("v1.36.3+k3s1"; several, comma
	// separated, while an upgrade is under way).
	Version string `json:"version,omitempty"`
	// NodesReady and NodesTotal count the site's nodes whose Ready condition is True, and all.
	NodesReady int `json:"nodesReady"`
	NodesTotal int `json:"nodesTotal"`
	// LastResult is the outcome of the last command run on the site (nil: none yet).
	LastResult *Result `json:"lastResult,omitempty"`
	// DoctorVerdict is doctor's last verdict: healthy, warnings, errors, failed ("" never run).
	DoctorVerdict string `json:"doctorVerdict,omitempty"`
	// DesiredRevision is what the site is asked to be (a Git commit for pull sites, the site's
	// inventory digest "sha256:HEX" for push sites); AppliedRevision what it last converged
	// to. They differ while a change is pending or failed.
	DesiredRevision string `json:"desiredRevision,omitempty"`
	AppliedRevision string `json:"appliedRevision,omitempty"`
	// SourceReachable says whether the site could fetch its desired state the last time it
	// tried (pull sites; nil: not applicable), SourceMessage why not.
	SourceReachable *bool  `json:"sourceReachable,omitempty"`
	SourceMessage   string `json:"sourceMessage,omitempty"`
	// LastSeen is when the site was last known alive: for a pull site the time of its report,
	// for a push site when one of its hosts last answered k3strap. The writer sets it (Write
	// does not): a site whose LastSeen is older than `fleet status --stale-after` is stale.
	LastSeen time.Time `json:"lastSeen,omitzero"`
}

// Result is one command's outcome on a site.
type Result struct {
	// Command is what ran: apply, upgrade, check, doctor, preflight, pull.
	Command string `json:"command"`
	// ExitCode is the exit code k3strap ended with, ExitMeaning its meaning (docs/cli.md,
	// exit codes: "success", "a host step failed", ...).
	ExitCode    int    `json:"exitCode"`
	ExitMeaning string `json:"exitMeaning,omitempty"`
	// Message says what happened or what failed (never a secret: it is an event's message).
	Message string `json:"message,omitempty"`
	// Time is when the command finished.
	Time time.Time `json:"time,omitzero"`
}

// Site is one SiteStatus object as Read returns it.
type Site struct {
	// Name is the site's name (the object's name).
	Name string `json:"name"`
	// Reported says the site wrote its status at least once; Status is empty otherwise.
	Reported bool   `json:"reported"`
	Status   Status `json:"status"`
	// Created is when the object was made (`k3strap fleet management credential`).
	Created time.Time `json:"created"`
}

// Stale reports whether the site was not seen within after before now: never seen (LastSeen
// zero) or last seen longer ago than after.
func (s Site) Stale(now time.Time, after time.Duration) bool {
	return IsStale(s.Status.LastSeen, now, after)
}

// IsStale reports whether lastSeen is zero or older than after before now.
func IsStale(lastSeen, now time.Time, after time.Duration) bool {
	return lastSeen.IsZero() || now.Sub(lastSeen) > after
}
