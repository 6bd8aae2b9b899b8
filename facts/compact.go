// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"crypto/sha256"
	"reflect"
	"strings"
	"sync"
)

// Memory at fleet scale: Parse works on one string holding the whole document
// (tens of kB, most of it the kernel config), and every field cut from it would keep all of it
// alive for the whole run — at 500 hosts that was most of k3strap's heap. compact copies the
// strings a Host keeps, and kernel configs, identical across a fleet that runs one kernel
// build, are shared: one read-only map per distinct config.

// kernelConfigs holds the distinct kernel configs parsed so far, by digest (bounded).
var kernelConfigs = struct {
	sync.Mutex
	m map[[32]byte]map[string]string
}{m: map[[32]byte]map[string]string{}}

const maxKernelConfigs = 64

// sharedKernelConfig returns the shared map of a kernel config section (the one parsed
// earlier from identical lines, else the one build returns, copied). Callers must not modify
// the map.
func sharedKernelConfig(body []docLine, build func() (map[string]string, error)) (map[string]string, error) {
	h := sha256.New()
	for _, l := range body {
		h.Write([]byte(l.text))
		h.Write([]byte{'\n'})
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	kernelConfigs.Lock()
	m, ok := kernelConfigs.m[sum]
	kernelConfigs.Unlock()
	if ok {
		return m, nil
	}
	cfg, err := build()
	if err != nil {
		return nil, err
	}
	m = make(map[string]string, len(cfg))
	for k, v := range cfg {
		m[strings.Clone(k)] = strings.Clone(v)
	}
	kernelConfigs.Lock()
	defer kernelConfigs.Unlock()
	if prev, ok := kernelConfigs.m[sum]; ok {
		return prev, nil
	}
	if len(kernelConfigs.m) < maxKernelConfigs {
		kernelConfigs.m[sum] = m
	}
	return m, nil
}

// compact replaces every string h holds by a copy (so that the parsed document can be freed)
// and shares its kernel config. A short string that repeats within the host (an address's
// scope, an interface or unit name, a state) is copied once: at hundreds of addresses per
// host the scopes alone were 16 bytes each (docs/preflight.md "Cost at scale").
func compact(h *Host) {
	cfg := h.Kernel.Config
	h.Kernel.Config = nil
	c := cloner{seen: map[string]string{}}
	c.strings(reflect.ValueOf(h).Elem())
	h.Kernel.Config = cfg // shared and already copied (sharedKernelConfig)
}

// cloner copies the strings of one Host; seen holds the short ones copied so far.
type cloner struct{ seen map[string]string }

// shortString is the longest string cloner shares within a host (bytes).
const shortString = 32

func (c cloner) clone(s string) string {
	if len(s) > shortString {
		return strings.Clone(s)
	}
	if t, ok := c.seen[s]; ok {
		return t
	}
	t := strings.Clone(s)
	c.seen[t] = t
	return t
}

func (c cloner) strings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() && v.Len() > 0 {
			v.SetString(c.clone(v.String()))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			c.strings(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				c.strings(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			c.strings(v.Index(i))
		}
	case reflect.Map:
		if v.Len() == 0 {
			return
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			k := reflect.New(v.Type().Key()).Elem()
			k.Set(it.Key())
			c.strings(k)
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(it.Value())
			c.strings(val)
			out.SetMapIndex(k, val)
		}
		if v.CanSet() {
			v.Set(out)
		}
	}
}
