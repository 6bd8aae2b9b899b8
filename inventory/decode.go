// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"github.com/k3strap/k3strap/k3s"
	"go.yaml.in/yaml/v3"
)

// decoder decodes a parsed YAML tree into the inventory types strictly: unknown fields, duplicate
// keys and type errors are reported with their position, every problem is collected, and the
// position of every field path is recorded. It walks the yaml.Node tree alongside the Go types
// (yaml tags), calling yaml.Node.Decode for leaves and for types with their own UnmarshalYAML.
type decoder struct {
	file   string
	pos    Positions // path -> value node
	keyPos Positions // path -> mapping key node
	errs   ErrorList
	// failed holds the paths whose value did not decode, so that validation does not report
	// a second, derived problem for them.
	failed map[string]bool
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, pos: Positions{}, keyPos: Positions{}, failed: map[string]bool{}}
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	durationType    = reflect.TypeFor[Duration]()
	stringListType  = reflect.TypeFor[StringList]()
	taintType       = reflect.TypeFor[Taint]()
	secretType      = reflect.TypeFor[Secret]()
	k3sType         = reflect.TypeFor[K3s]()
	hostK3sType     = reflect.TypeFor[HostK3s]()
)

func posOf(n *yaml.Node) Position { return Position{Line: n.Line, Column: n.Column} }

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func (d *decoder) add(path string, p Position, msg, fix string) {
	d.errs = append(d.errs, &FieldError{File: d.file, Line: p.Line, Column: p.Column, Path: path, Message: msg, Fix: fix})
	d.failed[path] = true
}

// document decodes the root node of one YAML document into v (a struct value).
func (d *decoder) document(doc *yaml.Node, v reflect.Value, kind DocumentKind) {
	root := doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			d.add("", posOf(doc), "the "+kind.Noun+" is empty", "start from "+kind.Example)
			return
		}
		root = doc.Content[0]
	}
	d.value(root, v, "")
}

// value decodes n into v (addressable) and records n's position under path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	n = resolve(n)
	d.pos[path] = posOf(n)
	if isNull(n) {
		v.Set(reflect.Zero(v.Type()))
		return
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.decodeError(path, n, v.Type(), err)
			return
		}
		// Every duration of the file is a timeout: zero or less would give up at once, and
		// zero would silently read as "the default".
		switch {
		case v.Type() != durationType:
		case v.Int() <= 0:
			d.add(path, posOf(n), fmt.Sprintf("%s must be a positive duration", path), "write a duration greater than zero such as 10s, or leave the field out for the default")
		case time.Duration(v.Int()) > MaxDuration:
			d.add(path, posOf(n), fmt.Sprintf("%s is longer than %s", path, MaxDuration), "write a shorter duration, or leave the field out for the default")
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		before := len(d.errs)
		d.value(n, elem.Elem(), path)
		if len(d.errs) == before {
			v.Set(elem)
		}
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.typeError(path, n, v.Type())
			return
		}
		out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			elem := reflect.New(v.Type().Elem()).Elem()
			if isNull(resolve(item)) {
				// Keep the zero item so that indexes match the file's.
				d.pos[ip] = posOf(item)
				d.add(ip, posOf(item), fmt.Sprintf("%s is an empty list item", ip), "remove the lone '-' or give it a value")
			} else {
				d.value(item, elem, ip)
			}
			out = reflect.Append(out, elem)
		}
		v.Set(out)
	case reflect.Map:
		d.mapping(n, v, path)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			// The decoder's message quotes the value: say the kind only.
			d.add(path, posOf(n), fmt.Sprintf("%s: %s cannot be read as a value", displayPath(path), describeValue(n)), "")
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		if n.Kind != yaml.ScalarNode {
			d.typeError(path, n, v.Type())
			return
		}
		if isInteger(v.Kind()) && !d.wholeNumber(path, n) {
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.typeError(path, n, v.Type())
			return
		}
		if isInteger(v.Kind()) {
			d.inRange(path, n, v)
		}
	}
}

func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

var decimalRE = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)

// wholeNumber reports whether n is a whole number written in decimal, else records why not.
// The YAML decoder would take 22.5 as 22 and, as YAML 1.1 did, 022 as octal 18 and 0x16 as
// 22: a number in an inventory means what it reads as in decimal, or is refused.
func (d *decoder) wholeNumber(path string, n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode {
		return true // typeError reports the list or mapping
	}
	switch {
	case n.ShortTag() == "!!float" && decimalRE.MatchString(n.Value):
		// digits only, tagged float by the decoder: too large for a 64-bit integer
		d.add(path, posOf(n), fmt.Sprintf("%s %s is too large for a whole number", path, n.Value), "write a smaller whole number")
	case n.ShortTag() == "!!float":
		d.add(path, posOf(n), fmt.Sprintf("%s must be a whole number, not a decimal number", path), "write a whole number without a decimal point")
	case n.ShortTag() != "!!int":
		return true // typeError reports the string, bool, ...
	case !decimalRE.MatchString(n.Value):
		msg := fmt.Sprintf("%s is not written in decimal", path)
		fix := "write the number in decimal digits"
		if digits := strings.TrimLeft(n.Value, "+-"); len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0123456789") == "" {
			msg = fmt.Sprintf("%s has a leading zero (YAML 1.1 reads 022 as octal 18)", path)
			fix = "write the number without leading zeros, e.g. 22"
		}
		d.add(path, posOf(n), msg, fix)
	default:
		return true
	}
	return false
}

// intRange is the accepted range of a whole-number field, both ends included, and what the
// field is in messages.
type intRange struct {
	min, max int64
	what     string
}

// MaxDuration is the longest duration k3strap takes, in a file or a flag: no wait of a run is
// meant to last longer than a day, and deadlines computed from much longer ones (a timeout plus
// a margin) would overflow time.Duration (about 292 years) and expire at once.
const MaxDuration = 24 * time.Hour

// intFieldRanges is the one table of the ranges of whole-number fields that the decoder checks
// as it reads them, by field name — where zero, the unset value, would otherwise pass as "use
// the default" (port: 0 read as 22). Ranges of other fields are validation's (validate.go).
//   - port: an SSH port (spec.ssh, a host's ssh, a bastion): TCP ports are 16 bits and 0 is
//     no port (RFC 793); leave the field out for the default.
var intFieldRanges = map[string]intRange{
	"port": {MinPort, MaxPort, "SSH port"},
}

// inRange records a whole number outside its field's range (intFieldRanges).
func (d *decoder) inRange(path string, n *yaml.Node, v reflect.Value) {
	name := path[strings.LastIndexByte(path, '.')+1:]
	r, ok := intFieldRanges[name]
	if !ok {
		return
	}
	var x int64
	if v.CanInt() {
		x = v.Int()
	} else {
		x = int64(v.Uint())
	}
	if x < r.min || x > r.max {
		d.add(path, posOf(n), fmt.Sprintf("%s %d is out of range", r.what, x), fmt.Sprintf("use a TCP port between %d and %d (leave %s out for the default)", r.min, r.max, name))
	}
}

// pair is one key/value of a mapping after merge keys ("<<: *anchor") are expanded.
type pair struct{ key, val *yaml.Node }

// pairs returns n's key/value pairs in file order, with the pairs of merged mappings first
// (own keys override merged ones, as YAML merge keys specify).
func pairs(n *yaml.Node) []pair {
	own := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.ShortTag() != "!!merge" {
			own[k.Value] = true
		}
	}
	var merged, out []pair
	seen := map[string]bool{}
	var addMerged func(m *yaml.Node)
	addMerged = func(m *yaml.Node) {
		m = resolve(m)
		switch m.Kind {
		case yaml.MappingNode:
			for _, p := range pairs(m) {
				if !own[p.key.Value] && !seen[p.key.Value] {
					seen[p.key.Value] = true
					merged = append(merged, p)
				}
			}
		case yaml.SequenceNode:
			for _, c := range m.Content {
				addMerged(c)
			}
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			addMerged(v)
			continue
		}
		out = append(out, pair{k, v})
	}
	return append(merged, out...)
}

// fieldInfo describes the YAML-visible fields of a struct type.
type fieldInfo struct {
	byName map[string]int
	names  []string
	inline int // index of an inline map field, -1 when none
}

func fieldsOf(t reflect.Type) fieldInfo {
	fi := fieldInfo{byName: map[string]int{}, inline: -1}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			if f.Type.Kind() == reflect.Map {
				fi.inline = i
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fi.byName[name] = i
		fi.names = append(fi.names, name)
	}
	return fi
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(path, n, v.Type())
		return
	}
	fi := fieldsOf(v.Type())
	first := map[string]*yaml.Node{}
	for _, p := range pairs(n) {
		k := resolve(p.key)
		if k.Kind != yaml.ScalarNode {
			d.add(path, posOf(k), fmt.Sprintf("%s: a key must be a plain name", displayPath(path)), "")
			continue
		}
		name := k.Value
		fp := joinPath(path, name)
		if prev, dup := first[name]; dup {
			d.add(fp, posOf(k), fmt.Sprintf("duplicate key %s (first at line %d)", shownKey(name), prev.Line), "remove one of them")
			continue
		}
		first[name] = k
		d.keyPos[fp] = posOf(k)
		if i, ok := fi.byName[name]; ok {
			d.value(p.val, v.Field(i), fp)
			continue
		}
		if fi.inline >= 0 {
			m := v.Field(fi.inline)
			if m.IsNil() {
				m.Set(reflect.MakeMap(m.Type()))
			}
			elem := reflect.New(m.Type().Elem()).Elem()
			d.value(p.val, elem, fp)
			m.SetMapIndex(reflect.ValueOf(name), elem)
			continue
		}
		d.add(fp, posOf(k), fmt.Sprintf("unknown field %s in %s", shownKey(name), displayPath(path)), unknownFieldFix(v.Type(), path, name, fi))
	}
}

// unknownFieldFix suggests where an unknown field belongs: one level down (cloudController
// in spec belongs in spec.k3s), under k3s.config (a K3s flag), or the closest known field.
func unknownFieldFix(t reflect.Type, path, name string, fi fieldInfo) string {
	for _, child := range fi.names {
		ct := t.Field(fi.byName[child]).Type
		for ct.Kind() == reflect.Pointer || ct.Kind() == reflect.Slice {
			ct = ct.Elem()
		}
		if ct.Kind() != reflect.Struct || ct == taintType {
			continue
		}
		if _, ok := fieldsOf(ct).byName[name]; ok {
			return fmt.Sprintf("move %s under %s:", name, joinPath(path, child))
		}
	}
	if t == k3sType || t == hostK3sType {
		if _, ok := flagTable().Lookup(k3s.Server, name); ok {
			return fmt.Sprintf("%s is a K3s flag: indent it under %s:", name, joinPath(path, "config"))
		}
	}
	if s, ok := closest(name, fi.names); ok {
		return "did you mean " + s + "?"
	}
	return "known fields here: " + strings.Join(fi.names, ", ")
}

// closest returns the candidate nearest to name by edit distance (case differences count
// once), when it is within a third of name's length (at least 2 edits).
func closest(name string, candidates []string) (string, bool) {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := levenshtein.ComputeDistance(name, c)
		if strings.EqualFold(name, c) {
			d = 0
		}
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	limit := max(len(name)/3, 2)
	return best, best != "" && bestD <= limit
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(path, n, v.Type())
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.add(path, posOf(n), fmt.Sprintf("%s: unsupported map key type", displayPath(path)), "")
		return
	}
	out := reflect.MakeMap(v.Type())
	first := map[string]*yaml.Node{}
	for _, p := range pairs(n) {
		k := resolve(p.key)
		if k.Kind != yaml.ScalarNode {
			d.add(path, posOf(k), fmt.Sprintf("%s: a key must be a plain name", displayPath(path)), "")
			continue
		}
		fp := joinPath(path, k.Value)
		if prev, dup := first[k.Value]; dup {
			d.add(fp, posOf(k), fmt.Sprintf("duplicate key %s (first at line %d)", shownKey(k.Value), prev.Line), "remove one of them")
			continue
		}
		first[k.Value] = k
		d.keyPos[fp] = posOf(k)
		elem := reflect.New(v.Type().Elem()).Elem()
		d.value(p.val, elem, fp)
		out.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
	}
	v.Set(out)
}

// decodeError turns the error of a type's own UnmarshalYAML into a positioned FieldError.
func (d *decoder) decodeError(path string, n *yaml.Node, t reflect.Type, err error) {
	var te *TaintError
	if errors.As(err, &te) {
		msg, fix := splitTaintMessage(te.Err.Error())
		d.add(path, Position{Line: te.Line, Column: te.Column}, msg, fix)
		return
	}
	d.typeError(path, n, t)
}

// splitTaintMessage separates ParseTaint's "what is wrong; how to write it" message.
func splitTaintMessage(s string) (msg, fix string) {
	for _, marker := range []string{"write taints as", "effects are case-sensitive", "the effect must be"} {
		if i := strings.Index(s, "; "+marker); i >= 0 {
			return s[:i], s[i+2:]
		}
	}
	return s, "write taints as key[=value]:Effect, e.g. dedicated=edge:NoExecute"
}

// typeError reports that n cannot be decoded into a value of type t: by the value's kind,
// never its content (describeValue); for the document as a whole, with a guess at what the
// file is (documentGuess) when it is a single string.
func (d *decoder) typeError(path string, n *yaml.Node, t reflect.Type) {
	noun, fix := expectation(t, displayPath(path))
	got := describeValue(n)
	if path == "" {
		msg := fmt.Sprintf("the document must be a mapping, not %s", got)
		if n.Kind == yaml.ScalarNode {
			if g := documentGuess(n.Value); g != "" {
				msg += " (is this the right file? it looks like " + g + ")"
			}
		}
		d.add(path, posOf(n), msg, "give the YAML file that starts with apiVersion: and kind: (k3strap init writes one; examples/ holds more)")
		return
	}
	d.add(path, posOf(n), fmt.Sprintf("%s must be %s, not %s", displayPath(path), noun, got), fix)
}

func displayPath(path string) string {
	if path == "" {
		return "the document"
	}
	return path
}

// expectation describes what a value of type t looks like in YAML, and how to write one.
func expectation(t reflect.Type, field string) (noun, fix string) {
	switch t {
	case durationType:
		return "a duration", "write a duration such as 10s or 1m30s"
	case stringListType:
		return "a string or a list of strings", "write one value, or a YAML list with one '- item' per line"
	case taintType:
		return "a taint string", "write taints as key[=value]:Effect, e.g. dedicated=edge:NoExecute"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return expectation(t.Elem(), field)
	case reflect.Bool:
		return "true or false", "write true or false (without quotes)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number", "write a whole number (without quotes)"
	case reflect.String:
		return "a single value", "write one value on the same line (quote it if it contains ': ' or starts with a special character)"
	case reflect.Slice:
		return "a list", "write a YAML list with one '- item' per line"
	case reflect.Map, reflect.Struct:
		return "a mapping", fmt.Sprintf("write key: value lines indented under %s", field)
	}
	return "a " + t.String(), ""
}
