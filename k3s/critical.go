// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Critical config keys. K3s refuses a joining server whose value of one of these differs from
// the cluster's with "critical configuration value mismatch". Source: k3s-io/k3s
// pkg/daemons/config/types.go, CriticalControlArgs (v1.36), whose `cli` tags are these flag
// names; docs/k3s.md.
const (
	KeyClusterCIDR               = "cluster-cidr"
	KeyServiceCIDR               = "service-cidr"
	KeyClusterDNS                = "cluster-dns"
	KeyClusterDomain             = "cluster-domain"
	KeyDisableCloudController    = "disable-cloud-controller"
	KeyDisableHelmController     = "disable-helm-controller"
	KeyDisableNetworkPolicy      = "disable-network-policy"
	KeyDisable                   = "disable"
	KeySecretsEncryption         = "secrets-encryption"
	KeySecretsEncryptionProvider = "secrets-encryption-provider"
	KeyEmbeddedRegistry          = "embedded-registry"
	KeyFlannelBackend            = "flannel-backend"
	KeyFlannelIPv6Masq           = "flannel-ipv6-masq"
	KeyFlannelExternalIP         = "flannel-external-ip"
	KeyEgressSelectorMode        = "egress-selector-mode"
	KeySupervisorMetrics         = "supervisor-metrics"
)

// ServiceLB is the entry of the disable list that is critical: K3s compares only whether
// servicelb is disabled (CriticalControlArgs.DisableServiceLB, `cli:"disable=servicelb"`), not
// the rest of the list.
const ServiceLB = "servicelb"

// Defaults of the critical keys that are not false/empty, as K3s v1.36 applies them when a key
// is absent (k3s-io/k3s pkg/cli/cmds/server.go flag defaults; pkg/cli/server/server.go derives
// cluster-dns as the 10th address of the first service CIDR). docs/k3s.md.
const (
	DefaultClusterCIDR               = "10.42.0.0/16"
	DefaultServiceCIDR               = "10.43.0.0/16"
	DefaultClusterDomain             = "cluster.local"
	DefaultFlannelBackend            = "vxlan"
	DefaultEgressSelectorMode        = "agent"
	DefaultSecretsEncryptionProvider = "aescbc"
)

// CriticalKeys returns the config keys of K3s's CriticalControlArgs, in K3s's order: a new
// slice on every call. For KeyDisable only the ServiceLB entry is critical (see
// CriticalMismatches).
func CriticalKeys() []string {
	return []string{
		KeyClusterDNS, KeyClusterCIDR, KeyClusterDomain, KeyDisableCloudController,
		KeyDisableHelmController, KeyDisableNetworkPolicy, KeyDisable, KeySecretsEncryption,
		KeySecretsEncryptionProvider, KeyEmbeddedRegistry, KeyFlannelBackend, KeyFlannelIPv6Masq,
		KeyFlannelExternalIP, KeyEgressSelectorMode, KeyServiceCIDR, KeySupervisorMetrics,
	}
}

// IsCriticalKey reports whether config key name (a trailing "+" of K3s's append rule is
// ignored) is one of CriticalKeys. For "disable" it is true although only the servicelb entry
// matters.
func IsCriticalKey(name string) bool {
	name = strings.TrimSuffix(name, "+")
	for _, k := range CriticalKeys() {
		if k == name {
			return true
		}
	}
	return false
}

// Mismatch is one critical key whose effective value differs between two servers.
type Mismatch struct {
	// Key is the config key; for the disable list it is "disable" and the values say whether
	// servicelb is disabled ("servicelb disabled" / "servicelb enabled").
	Key string
	// A and B are the effective values (defaults applied) of the two configs, rendered as text:
	// lists comma-joined, booleans "true"/"false".
	A, B string
	// DefaultA and DefaultB are true when that side did not set the key and K3s's default
	// applies.
	DefaultA, DefaultB bool
}

// String renders "key: A vs B".
func (m Mismatch) String() string { return fmt.Sprintf("%s: %q vs %q", m.Key, m.A, m.B) }

// CriticalMismatches compares the critical keys of two servers' rendered K3s configs (config
// key → value, as in config.yaml: string, bool, number, a list of those, or a pointer to one;
// a nil value or pointer counts as absent) and returns the keys whose effective values
// differ, in CriticalKeys order. An absent key takes K3s's default (DefaultClusterCIDR, ...;
// false for the booleans; cluster-dns the 10th address of the first service CIDR). List values
// may hold comma-separated items, as K3s accepts them. Booleans compare by value, so "true"
// equals true. A key ending in "+" is taken as appended to the plain one.
func CriticalMismatches(a, b map[string]any) []Mismatch {
	va, vb := CriticalValues(a), CriticalValues(b)
	var out []Mismatch
	for _, k := range CriticalKeys() {
		x, y := va[k], vb[k]
		if x.Value != y.Value {
			out = append(out, Mismatch{Key: k, A: x.Value, B: y.Value, DefaultA: x.Default, DefaultB: y.Default})
		}
	}
	return out
}

// CriticalValue is the effective value of one critical key.
type CriticalValue struct {
	// Value is the normalised text: lists comma-joined in order, booleans "true"/"false", the
	// disable list as "servicelb disabled" or "servicelb enabled".
	Value string
	// Default is true when the key was absent and K3s's default applies.
	Default bool
}

// CriticalValues returns the effective value of every critical key of cfg (see
// CriticalMismatches for the accepted value shapes and the defaults).
func CriticalValues(cfg map[string]any) map[string]CriticalValue {
	get := func(k string) ([]string, bool) {
		v, ok := values(cfg[k])
		if more, ok2 := values(cfg[k+"+"]); ok2 {
			v, ok = append(v, more...), true
		}
		return v, ok
	}
	out := map[string]CriticalValue{}
	list := func(k, def string) {
		v, ok := get(k)
		v = splitItems(v)
		if !ok || len(v) == 0 {
			out[k] = CriticalValue{Value: def, Default: true}
			return
		}
		out[k] = CriticalValue{Value: strings.Join(v, ",")}
	}
	scalar := func(k, def string) {
		v, ok := get(k)
		if !ok || len(v) == 0 || v[len(v)-1] == "" {
			out[k] = CriticalValue{Value: def, Default: true}
			return
		}
		out[k] = CriticalValue{Value: v[len(v)-1]}
	}
	boolean := func(k string) {
		v, ok := get(k)
		if !ok || len(v) == 0 {
			out[k] = CriticalValue{Value: "false", Default: true}
			return
		}
		b, err := strconv.ParseBool(v[len(v)-1])
		if err != nil {
			out[k] = CriticalValue{Value: v[len(v)-1]}
			return
		}
		out[k] = CriticalValue{Value: strconv.FormatBool(b)}
	}
	list(KeyClusterCIDR, DefaultClusterCIDR)
	list(KeyServiceCIDR, DefaultServiceCIDR)
	list(KeyClusterDNS, clusterDNSDefault(out[KeyServiceCIDR].Value))
	scalar(KeyClusterDomain, DefaultClusterDomain)
	scalar(KeyFlannelBackend, DefaultFlannelBackend)
	scalar(KeyEgressSelectorMode, DefaultEgressSelectorMode)
	scalar(KeySecretsEncryptionProvider, DefaultSecretsEncryptionProvider)
	for _, k := range []string{KeyDisableCloudController, KeyDisableHelmController, KeyDisableNetworkPolicy,
		KeySecretsEncryption, KeyEmbeddedRegistry, KeyFlannelIPv6Masq, KeyFlannelExternalIP, KeySupervisorMetrics} {
		boolean(k)
	}
	d, set := get(KeyDisable)
	if Disables(d, ServiceLB) {
		out[KeyDisable] = CriticalValue{Value: "servicelb disabled"}
	} else {
		out[KeyDisable] = CriticalValue{Value: "servicelb enabled", Default: !set}
	}
	return out
}

// Disables reports whether a K3s disable list (entries may themselves be comma-separated, as
// K3s accepts them) names component, e.g. ServiceLB.
func Disables(list []string, component string) bool {
	for _, e := range splitItems(list) {
		if e == component {
			return true
		}
	}
	return false
}

// clusterDNSDefault is K3s's default cluster-dns: the 10th address of the first service CIDR
// ("" when it does not parse).
func clusterDNSDefault(serviceCIDRs string) string {
	first, _, _ := strings.Cut(serviceCIDRs, ",")
	p, err := netip.ParsePrefix(strings.TrimSpace(first))
	if err != nil {
		return ""
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String()
}

// splitItems splits comma-separated entries and trims blanks, dropping empty items.
func splitItems(in []string) []string {
	var out []string
	for _, e := range in {
		for _, p := range strings.Split(e, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// values renders a config value as text items: a scalar is one item, a list its items. ok is
// false for nil (an absent key).
func values(v any) ([]string, bool) {
	if v == nil {
		return nil, false
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil, false
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]string, 0, rv.Len())
		for i := range rv.Len() {
			if s, ok := values(rv.Index(i).Interface()); ok {
				out = append(out, s...)
			}
		}
		return out, true
	case reflect.Map:
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, fmt.Sprint(k.Interface()))
		}
		sort.Strings(keys)
		return []string{"{" + strings.Join(keys, ",") + "}"}, true
	}
	return []string{fmt.Sprint(rv.Interface())}, true
}
