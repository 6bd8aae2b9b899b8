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
// and shares its kernel config.
func compact(h *Host) {
	cfg := h.Kernel.Config
	h.Kernel.Config = nil
	cloneStrings(reflect.ValueOf(h).Elem())
	h.Kernel.Config = cfg // shared and already copied (sharedKernelConfig)
}

func cloneStrings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() && v.Len() > 0 {
			v.SetString(strings.Clone(v.String()))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			cloneStrings(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				cloneStrings(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			cloneStrings(v.Index(i))
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
			cloneStrings(k)
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(it.Value())
			cloneStrings(val)
			out.SetMapIndex(k, val)
		}
		if v.CanSet() {
			v.Set(out)
		}
	}
}
