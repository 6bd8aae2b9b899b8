// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/inventory"
)

// LoadOptions tune Load.
type LoadOptions struct {
	// Override is the command layer's override layer (K3STRAP_* variables and flags; see
	// inventory.LoadOptions.Override). It applies to every site after the fleet defaults, so
	// flag > environment > site file > fleet defaults.
	Override func(c *inventory.Cluster) inventory.ErrorList
	// SkipFileChecks skips checking that the files the inventories name exist (tests,
	// examples); never for a run.
	SkipFileChecks bool
}

// fleetDocument names a fleet file in messages about the file as a whole.
var fleetDocument = inventory.DocumentKind{Noun: "fleet file", Example: "examples/fleet.yaml"}

// IsFleet reports whether data, a document already read, is a fleet document (kind: Fleet
// at the top). Malformed documents are not: the inventory loader reports what is wrong with
// them. The command layer reads its -f input once and asks IsFleet of the bytes (a FIFO or
// stdin cannot be read twice).
func IsFleet(data []byte) bool {
	var head struct {
		Kind string `yaml:"kind"`
	}
	return yaml.Unmarshal(data, &head) == nil && head.Kind == Kind
}

// IsFleetFile reports whether the file at path is a fleet document (IsFleet of its content).
// Unreadable files are not. It reads the file: for input that can be read only once (a FIFO,
// stdin) read it once and use IsFleet and Parse.
func IsFleetFile(path string) bool {
	data, err := os.ReadFile(path)
	return err == nil && IsFleet(data)
}

// Load reads the fleet file at path and every site inventory it names, and validates them
// (Parse).
//
// Errors: a fleet file that cannot be read gives the os error wrapped; the content's problems
// as Parse.
func Load(path string, opts LoadOptions) (*Fleet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fleet file: %w", err)
	}
	return Parse(path, data, opts)
}

// Parse is Load for a fleet file already read: data is the content of the file at path (its
// directory is the base of the site paths and the fleet defaults' local paths).
//
// Errors: every problem in the fleet file or a site inventory is collected into one
// inventory.ErrorList whose entries carry file, line, column and fix — the site's file for its
// own fields, the fleet file's line for a default the site took (reported once, naming how
// many sites it concerns). A site named twice (the same file, or two files with the same
// metadata.name) is a problem. No message quotes a file's content. On any error the fleet is
// nil.
func Parse(path string, data []byte, opts LoadOptions) (*Fleet, error) {
	f := &Fleet{}
	dec, errs := inventory.DecodeDocument(path, data, f, fleetDocument)
	f.Source, f.Positions, f.KeyPositions = path, dec.Positions, dec.KeyPositions
	if len(errs) == 0 {
		errs = f.validate()
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	f.resolveDefaults()
	if errs := f.loadSites(opts); len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

// resolveDefaults makes every local path of spec.defaults absolute, relative to the fleet
// file's directory, so that it means the same file in every site.
func (f *Fleet) resolveDefaults() {
	at := &inventory.Cluster{Source: f.Source}
	r := func(p *string) { *p = at.ResolvePath(*p) }
	if m := f.Spec.Management; m != nil {
		r(&m.Kubeconfig)
	}
	d := &f.Spec.Defaults
	r(&d.SSH.KeyPath)
	r(&d.SSH.KnownHosts)
	r(&d.SSH.SudoPasswordFile)
	if d.SSH.Bastion != nil {
		b := *d.SSH.Bastion
		r(&b.KeyPath)
		d.SSH.Bastion = &b
	}
	for arch, a := range d.K3s.Airgap {
		r(&a.Binary)
		r(&a.Images)
		r(&a.Checksums)
		d.K3s.Airgap[arch] = a
	}
	r(&d.K3s.AirgapBundle)
	r(&d.K3s.AirgapInstallScript)
	for dist, p := range d.K3s.SELinuxRPMs {
		r(&p)
		d.K3s.SELinuxRPMs[dist] = p
	}
	if reg := d.Registries; reg != nil {
		for host, c := range reg.Configs {
			if c.Auth != nil {
				a := *c.Auth
				r(&a.PasswordFile)
				c.Auth = &a
			}
			if c.TLS != nil {
				t := *c.TLS
				r(&t.CertFile)
				r(&t.KeyFile)
				r(&t.CAFile)
				c.TLS = &t
			}
			reg.Configs[host] = c
		}
	}
}

// siteFile is one file a spec.sites entry names.
type siteFile struct {
	path  string
	entry int
}

// siteFiles expands spec.sites: each path relative to the fleet file's directory, each glob to
// its matches in lexical order. A glob matching nothing, a missing file and a file named
// twice are problems at the entry's position.
func (f *Fleet) siteFiles(p *problems) []siteFile {
	at := &inventory.Cluster{Source: f.Source}
	self := at.ResolvePath(f.Source)
	seen := map[string]int{}
	var out []siteFile
	for i, ref := range f.Spec.Sites {
		base := fmt.Sprintf("spec.sites[%d].path", i)
		pattern := at.ResolvePath(ref.Path)
		var files []string
		if strings.ContainsAny(ref.Path, "*?[") {
			m, err := filepath.Glob(pattern)
			if err != nil {
				p.add(base, false, fmt.Sprintf("%q is not a valid glob: %v", ref.Path, err), "write a glob such as sites/*.yaml (* ? [...]), relative to the fleet file")
				continue
			}
			// A glob next to the fleet file may match it: it is no site.
			m = slices.DeleteFunc(m, func(p string) bool { return p == self })
			if len(m) == 0 {
				p.add(base, false, fmt.Sprintf("%q matches no file", ref.Path), "correct the glob (relative to the fleet file's directory "+filepath.Dir(pattern)+")")
				continue
			}
			sort.Strings(m)
			files = m
		} else {
			if st, err := os.Stat(pattern); err != nil || !st.Mode().IsRegular() {
				why := "does not exist"
				if err == nil && st.IsDir() {
					why = "is a directory"
				} else if err == nil {
					why = "is not a regular file (a FIFO or a device would block the load)"
				} else if !errors.Is(err, fs.ErrNotExist) {
					why = "cannot be read: " + err.Error()
				}
				p.add(base, false, fmt.Sprintf("site inventory %s %s", pattern, why), "correct the path (relative to the fleet file's directory), or remove the entry")
				continue
			}
			files = []string{pattern}
		}
		for _, file := range files {
			if prev, dup := seen[file]; dup {
				p.add(base, false, fmt.Sprintf("%s is already a site (spec.sites[%d])", file, prev), "name each site inventory once")
				continue
			}
			seen[file] = i
			out = append(out, siteFile{path: file, entry: i})
		}
	}
	return out
}

// loadSites loads every site inventory with the fleet defaults and opts.Override, and checks
// that site names are unique.
func (f *Fleet) loadSites(opts LoadOptions) inventory.ErrorList {
	p := &problems{f: f}
	files := f.siteFiles(p)
	var siteErrs []siteProblem
	byName := map[string]*Site{}
	for _, sf := range files {
		s, errs := f.loadSite(sf, opts)
		for _, e := range errs {
			siteErrs = append(siteErrs, siteProblem{file: sf.path, err: e})
		}
		if s == nil {
			continue
		}
		if prev, dup := byName[s.Name]; dup {
			p.add(fmt.Sprintf("spec.sites[%d].path", sf.entry), false,
				fmt.Sprintf("site %s (metadata.name of %s) is also the name of %s", s.Name, sf.path, prev.Path),
				"give every site inventory its own metadata.name: it names the site in events, the state file and --shard")
			continue
		}
		byName[s.Name] = s
		f.Sites = append(f.Sites, s)
	}
	errs := append(p.errs, f.mergeSiteProblems(siteErrs)...)
	errs.Sort()
	return errs
}

// loadSite reads and loads one site inventory: the fleet defaults first, then opts.Override.
// The problems of the defaults it took are returned located at the fleet file (fleetLocated).
func (f *Fleet) loadSite(sf siteFile, opts LoadOptions) (*Site, inventory.ErrorList) {
	// A glob's match may be a FIFO or a device: reading it would block the load, unbounded.
	if st, err := os.Stat(sf.path); err == nil && !st.Mode().IsRegular() {
		return nil, inventory.ErrorList{{File: sf.path, Message: "the site inventory is not a regular file", Fix: "name regular files only in spec.sites"}}
	}
	data, err := os.ReadFile(sf.path)
	if err != nil {
		return nil, inventory.ErrorList{{File: sf.path, Message: "cannot read the site inventory: " + err.Error(), Fix: "check the file's permissions"}}
	}
	var (
		taken []appliedGroup
		seen  *inventory.Cluster
	)
	override := func(c *inventory.Cluster) inventory.ErrorList {
		seen = c
		taken = f.applyDefaults(c)
		if opts.Override != nil {
			return opts.Override(c)
		}
		return nil
	}
	c, err := inventory.Parse(sf.path, data, inventory.LoadOptions{Override: override, SkipFileChecks: opts.SkipFileChecks})
	if err != nil {
		var il inventory.ErrorList
		if !errors.As(err, &il) {
			il = inventory.ErrorList{{File: sf.path, Message: err.Error()}}
		}
		return nil, f.fleetLocated(il, seen)
	}
	ref := f.Spec.Sites[sf.entry]
	return &Site{Name: c.Metadata.Name, Path: sf.path, Labels: ref.Labels, Entry: sf.entry, Cluster: c,
		Digest: siteDigest(data, c, taken)}, nil
}

// fleetLocated moves the problems of a site's fields that came from the fleet defaults to the
// fleet file's line (the site file does not hold them).
func (f *Fleet) fleetLocated(errs inventory.ErrorList, c *inventory.Cluster) inventory.ErrorList {
	if c == nil {
		return errs
	}
	fleetPath := map[string]string{}
	for _, g := range defaultGroups() {
		for i, sp := range g.site {
			fleetPath[sp] = "spec.defaults." + g.fleet[min(i, len(g.fleet)-1)]
		}
	}
	for _, e := range errs {
		// The field, or the group field it lies in (spec.k3s.airgap.amd64.binary is in
		// spec.k3s.airgap): its fleet path with the rest of the site path appended.
		for p := e.Path; p != ""; p = p[:max(lastSep(p), 0)] {
			fp, ok := fleetPath[p]
			if !ok || c.Overridden[p] != f.where(fp) {
				continue
			}
			pos := f.positionOf(fp + e.Path[len(p):])
			e.File, e.Line, e.Column = f.Source, pos.Line, pos.Column
			e.Message = strings.TrimSuffix(e.Message, " (set by "+f.where(fp)+")")
			e.Fix = strings.ReplaceAll(e.Fix, "relative to the inventory file's directory", "relative to the fleet file's directory")
			break
		}
	}
	return errs
}

// siteProblem is a problem found while loading a site.
type siteProblem struct {
	file string
	err  *inventory.FieldError
}

// mergeSiteProblems returns the sites' problems with those located in the fleet file (a bad
// default) reported once, saying which sites took it.
func (f *Fleet) mergeSiteProblems(ps []siteProblem) inventory.ErrorList {
	var out inventory.ErrorList
	type key struct {
		line, col int
		msg       string
	}
	first := map[key]*inventory.FieldError{}
	files := map[key][]string{}
	for _, p := range ps {
		if p.err.File != f.Source {
			out = append(out, p.err)
			continue
		}
		k := key{p.err.Line, p.err.Column, p.err.Message}
		if _, ok := first[k]; !ok {
			first[k] = p.err
			out = append(out, p.err)
		}
		files[k] = append(files[k], filepath.Base(p.file))
	}
	for k, e := range first {
		names := files[k]
		switch {
		case len(names) == 1:
			e.Message += " (in site inventory " + names[0] + ")"
		default:
			e.Message += fmt.Sprintf(" (in %d site inventories: %s, ...)", len(names), names[0])
		}
	}
	return out
}
