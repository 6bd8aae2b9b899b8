// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"fmt"
	"slices"
	"strings"
)

// Feature is one kernel capability K3s or a CNI needs, with every way it can show up
// (docs/k3s.md#kernel-requirements).
type Feature struct {
	// Name is what messages call it, e.g. "ip_set" or "vxlan".
	Name string
	// Config are CONFIG_* option names; any one of them set to y (or m with the module
	// available) is enough.
	Config []string
	// Modules are module names (with '_' or '-'); any one of them loaded, built in or loadable
	// is enough. Empty for options that cannot be modules (CONFIG_NAMESPACES, ...).
	Modules []string
	// Namespace is a namespace type (net, pid, ipc, uts, ...) whose presence in /proc/self/ns
	// proves the option when the kernel config is unreadable. Optional.
	Namespace string
}

// Readable reports whether any evidence source was readable: the kernel config, /proc/modules,
// /sys/module, modules.builtin or modules.dep.
func (k Kernel) Readable() bool {
	return k.ConfigSource != "" || k.ModuleSupport || k.SysModuleRead || k.BuiltinSource != "" || k.DepSource != ""
}

// Conclusive reports whether Find's "absent" answer for f can be trusted: the kernel config
// was read, or f is a module and every place a module can be (modules.builtin and, on a kernel
// with module support, modules.dep) was read. When false, absent means "not proven".
func (k Kernel) Conclusive(f Feature) bool {
	if k.ConfigSource != "" {
		return true
	}
	if len(f.Modules) == 0 {
		return false
	}
	return k.BuiltinSource != "" && (!k.ModuleSupport || k.DepSource != "")
}

// Find reports whether the kernel has f and says what proved it or, when absent, where it was
// looked for. The rule (docs/k3s.md): present when the kernel config says =y; or =m and the
// module is loaded (/proc/modules, /sys/module) or loadable (modules.dep); or the module is
// built in (modules.builtin) or shows in /sys/module. A kernel without module support
// (no /proc/modules) only has built-ins, which count as present. Without a kernel config, a
// namespace in /proc/self/ns proves a namespace option.
//
// Absent example: "not in /proc/config.gz (CONFIG_IP_SET not set), not in /sys/module, no
// modules.builtin".
func (k Kernel) Find(f Feature) (present bool, where string) {
	var notes []string
	modOK, modWhere, modNotes := k.findModule(f.Modules)

	if k.ConfigSource != "" {
		var unset []string
		for _, c := range f.Config {
			switch v := k.Config[c]; v {
			case "y":
				return true, fmt.Sprintf("%s=y in %s", c, k.ConfigSource)
			case "m":
				if modOK {
					return true, fmt.Sprintf("%s=m in %s, %s", c, k.ConfigSource, modWhere)
				}
				notes = append(notes, fmt.Sprintf("%s=m in %s but the module is not available", c, k.ConfigSource))
			case "":
				unset = append(unset, c+" not set")
			default:
				unset = append(unset, c+"="+v)
			}
		}
		if len(unset) > 0 {
			notes = append(notes, fmt.Sprintf("not in %s (%s)", k.ConfigSource, strings.Join(unset, ", ")))
		}
	} else if len(f.Config) > 0 {
		notes = append(notes, "no kernel config (/proc/config.gz, /boot/config-<release>)")
	}
	if modOK {
		return true, modWhere
	}
	if f.Namespace != "" && k.ConfigSource == "" {
		if slices.Contains(k.Namespaces, f.Namespace) {
			return true, fmt.Sprintf("/proc/self/ns/%s exists", f.Namespace)
		}
		if len(k.Namespaces) > 0 {
			notes = append(notes, fmt.Sprintf("no /proc/self/ns/%s", f.Namespace))
		}
	}
	notes = append(notes, modNotes...)
	if len(notes) == 0 {
		notes = append(notes, "no evidence source names it")
	}
	return false, strings.Join(notes, ", ")
}

// findModule looks for any of names in the module lists.
func (k Kernel) findModule(names []string) (bool, string, []string) {
	if len(names) == 0 {
		return false, "", nil
	}
	norm := make([]string, len(names))
	for i, n := range names {
		norm[i] = moduleName(n)
	}
	in := func(list []string) string {
		for _, n := range norm {
			if slices.Contains(list, n) {
				return n
			}
		}
		return ""
	}
	if n := in(k.Loaded); n != "" {
		return true, fmt.Sprintf("module %s loaded (/proc/modules)", n), nil
	}
	if n := in(k.SysModule); n != "" {
		return true, fmt.Sprintf("/sys/module/%s exists", n), nil
	}
	if n := in(k.Builtin); n != "" {
		return true, fmt.Sprintf("%s built in (%s)", n, k.BuiltinSource), nil
	}
	if k.ModuleSupport {
		if n := in(k.Loadable); n != "" {
			return true, fmt.Sprintf("module %s loadable (%s)", n, k.DepSource), nil
		}
	}
	var notes []string
	if k.ModuleSupport {
		notes = append(notes, "not in /proc/modules")
	} else {
		notes = append(notes, "no module support (no /proc/modules)")
	}
	if k.SysModuleRead {
		notes = append(notes, "not in /sys/module")
	} else {
		notes = append(notes, "no /sys/module")
	}
	if k.BuiltinSource != "" {
		notes = append(notes, "not in "+k.BuiltinSource)
	} else {
		notes = append(notes, "no modules.builtin")
	}
	if k.ModuleSupport {
		if k.DepSource != "" {
			notes = append(notes, "not in "+k.DepSource)
		} else {
			notes = append(notes, "no modules.dep")
		}
	}
	return false, "", notes
}
