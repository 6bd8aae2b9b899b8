// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package generator writes the JSON Schemas of the inventory (kind Cluster, from the Go types of
// package inventory) and of the fleet file (kind Fleet, from package fleet and the inventory
// types it embeds), so that a schema cannot drift from what k3strap decodes: the structure and
// field names come from reflection over the yaml tags, descriptions from the fields' and types'
// doc comments, enums from the typed string constants declared beside each type.
//
// Rules (the decoder's, inventory/decode.go, which decodes fleet files too): unknown fields are
// refused, so every object has
// additionalProperties false, except K3sConfig whose ",inline" map takes any other K3s flag. A
// field is required when its tag has no omitempty and, for a struct, when that struct has a
// required field itself (a struct of only optional fields may be left out whole). Types with
// their own UnmarshalYAML are described by hand below (one case each); any other such type is
// an error, so a new one cannot be described wrongly.
package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/inventory"
)

// ID is the inventory schema's $id.
const ID = "https://k3strap.io/schemas/inventory/v1alpha1/cluster.json"

// FleetID is the fleet schema's $id.
const FleetID = "https://k3strap.io/schemas/inventory/v1alpha1/fleet.json"

// Generate returns the schema (indented JSON, a final newline) for inventory.Cluster; srcDir is
// the inventory package's source directory, read for doc comments and enum constants. Errors
// name the file that did not parse or the Go type that cannot be described.
func Generate(srcDir string) ([]byte, error) {
	return generate(reflect.TypeFor[inventory.Cluster](), inventory.Kind, ID,
		"k3strap inventory (kind Cluster, "+inventory.APIVersion+")", srcDir)
}

// GenerateFleet returns the schema of a fleet file (fleet.Fleet) as Generate does;
// inventoryDir and fleetDir are the source directories of packages inventory and fleet.
func GenerateFleet(inventoryDir, fleetDir string) ([]byte, error) {
	return generate(reflect.TypeFor[fleet.Fleet](), fleet.Kind, FleetID,
		"k3strap fleet file (kind Fleet, "+inventory.APIVersion+")", inventoryDir, fleetDir)
}

// generate describes root, a document type with apiVersion and kind, reading the doc comments
// and constants of the packages in srcDirs.
func generate(root reflect.Type, kind, id, title string, srcDirs ...string) ([]byte, error) {
	src := map[string]*source{}
	for _, d := range srcDirs {
		pkg, s, err := readSource(d)
		if err != nil {
			return nil, err
		}
		src[pkg] = s
	}
	g := &gen{src: src, defs: map[string]*node{}, names: map[reflect.Type]string{}, taken: map[string]reflect.Type{}}
	doc, err := g.structSchema(root)
	if err != nil {
		return nil, err
	}
	// The root document pins apiVersion and kind.
	doc.Properties["apiVersion"].Const = inventory.APIVersion
	doc.Properties["kind"].Const = kind
	// Draft-07: the draft every yaml-language-server release implements (newer drafts only in
	// part); "#/$defs/..." references are plain JSON pointers and resolve in any draft.
	doc.Schema = "http://json-schema.org/draft-07/schema#"
	doc.ID = id
	doc.Title = title
	doc.Defs = g.defs
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// node is one JSON Schema (draft-07) object; fields are emitted in this order.
type node struct {
	Schema               string           `json:"$schema,omitempty"`
	ID                   string           `json:"$id,omitempty"`
	Ref                  string           `json:"$ref,omitempty"`
	Title                string           `json:"title,omitempty"`
	Description          string           `json:"description,omitempty"`
	Type                 any              `json:"type,omitempty"`
	Const                any              `json:"const,omitempty"`
	Enum                 []string         `json:"enum,omitempty"`
	Pattern              string           `json:"pattern,omitempty"`
	Minimum              *int             `json:"minimum,omitempty"`
	Items                *node            `json:"items,omitempty"`
	AnyOf                []*node          `json:"anyOf,omitempty"`
	Required             []string         `json:"required,omitempty"`
	Properties           map[string]*node `json:"properties,omitempty"`
	AdditionalProperties any              `json:"additionalProperties,omitempty"`
	Defs                 map[string]*node `json:"$defs,omitempty"`
}

// source is what a package's files say beside its types.
type source struct {
	typeDoc  map[string]string            // type name → doc comment
	fieldDoc map[string]map[string]string // type name → Go field name → doc comment
	consts   map[string][]string          // type name → values of its typed string constants, in file order
}

// readSource reads the package in dir: its name and what its files say.
func readSource(dir string) (string, *source, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", nil, err
	}
	pkg := ""
	src := &source{typeDoc: map[string]string{}, fieldDoc: map[string]map[string]string{}, consts: map[string][]string{}}
	fset := token.NewFileSet()
	sort.Strings(files)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return "", nil, err
		}
		file, err := parser.ParseFile(fset, f, data, parser.ParseComments)
		if err != nil {
			return "", nil, fmt.Errorf("reading the types of %s: %w", dir, err)
		}
		pkg = file.Name.Name
		n++
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					doc := s.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					src.typeDoc[s.Name.Name] = text(doc)
					if st, ok := s.Type.(*ast.StructType); ok {
						m := map[string]string{}
						for _, fl := range st.Fields.List {
							for _, name := range fl.Names {
								m[name.Name] = text(fl.Doc)
							}
						}
						src.fieldDoc[s.Name.Name] = m
					}
				case *ast.ValueSpec:
					id, ok := s.Type.(*ast.Ident)
					if gd.Tok != token.CONST || !ok || len(s.Values) != len(s.Names) {
						continue
					}
					for _, v := range s.Values {
						lit, ok := v.(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						if u, err := strconv.Unquote(lit.Value); err == nil {
							src.consts[id.Name] = append(src.consts[id.Name], u)
						}
					}
				}
			}
		}
	}
	if n == 0 {
		return "", nil, fmt.Errorf("reading the types: no Go files in %s", dir)
	}
	return pkg, src, nil
}

// text is a doc comment as one paragraph.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

type gen struct {
	src   map[string]*source // package name → its source
	defs  map[string]*node
	names map[reflect.Type]string // struct type → its $defs name
	taken map[string]reflect.Type // $defs name → the type holding it
}

// pkg is the source of t's package (nil for a package not read: no docs, no enums).
func (g *gen) pkg(t reflect.Type) *source { return g.src[path.Base(t.PkgPath())] }

// defName is t's $defs name: its Go name, or package.Name when a type of another package
// already has that name (fleet.Spec beside inventory.Spec).
func (g *gen) defName(t reflect.Type) string {
	if n, ok := g.names[t]; ok {
		return n
	}
	n := t.Name()
	if o, ok := g.taken[n]; ok && o != t {
		n = path.Base(t.PkgPath()) + "." + t.Name()
	}
	g.names[t], g.taken[n] = n, t
	return n
}

// typeDoc and fieldDoc are the doc comments of t and of its field f.
func (g *gen) typeDoc(t reflect.Type) string {
	if s := g.pkg(t); s != nil {
		return s.typeDoc[t.Name()]
	}
	return ""
}

func (g *gen) fieldDoc(t reflect.Type, f string) string {
	if s := g.pkg(t); s != nil {
		return s.fieldDoc[t.Name()][f]
	}
	return ""
}

var (
	// yamlUnmarshaler is implemented by the types that decode themselves.
	yamlUnmarshaler = reflect.TypeFor[interface{ UnmarshalYAML(*yaml.Node) error }]()
	// durationPattern matches what time.ParseDuration accepts ("10s", "1m30s", "1.5h", "0").
	durationPattern = `^[-+]?(0|([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+)$`
	// taintPattern is key[=value]:Effect (inventory.ParseTaint) with the Kubernetes effects.
	taintPattern = `^[^=:\s]+(=[^:\s]*)?:(` + strings.Join([]string{
		string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}, "|") + `)$`
	// amountPattern is fleet.Amount's text: a number of sites or a percentage ("25%").
	amountPattern = `^\s*[0-9]+\s*%?\s*$`
	// scalar is what a K3s flag value may be in config.yaml.
	scalar = []string{"string", "number", "integer", "boolean"}
)

// schema describes t; named struct types become $defs entries referenced by $ref.
func (g *gen) schema(t reflect.Type) (*node, error) {
	switch t {
	case reflect.TypeFor[inventory.Duration]():
		return &node{Type: "string", Pattern: durationPattern}, nil
	case reflect.TypeFor[inventory.Taint]():
		return &node{Type: "string", Pattern: taintPattern}, nil
	case reflect.TypeFor[inventory.StringList]():
		return &node{AnyOf: []*node{{Type: scalar[:3]}, {Type: "array", Items: &node{Type: scalar[:3]}}}}, nil
	case reflect.TypeFor[inventory.Secret]():
		return &node{Type: "string"}, nil
	case reflect.TypeFor[fleet.Amount]():
		// A number of sites or a percentage (fleet/amount.go); YAML reads `batch: 5` as a number.
		zero := 0
		return &node{AnyOf: []*node{{Type: "integer", Minimum: &zero}, {Type: "string", Pattern: amountPattern}}}, nil
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) {
		return nil, fmt.Errorf("type %s decodes itself (UnmarshalYAML): describe it in schema/internal/generator", t)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.String:
		n := &node{Type: "string"}
		if s := g.pkg(t); s != nil && t.Name() != "" {
			n.Enum = s.consts[t.Name()]
		}
		return n, nil
	case reflect.Bool:
		return &node{Type: "boolean"}, nil
	case reflect.Int, reflect.Int32, reflect.Int64:
		return &node{Type: "integer"}, nil
	case reflect.Slice:
		items, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return &node{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("type %s: map keys must be strings in YAML", t)
		}
		if t.Elem().Kind() == reflect.Interface {
			return &node{Type: "object"}, nil // any YAML values (chart values)
		}
		v, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return &node{Type: "object", AdditionalProperties: v}, nil
	case reflect.Struct:
		name := g.defName(t)
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // a placeholder against recursion
			s, err := g.structSchema(t)
			if err != nil {
				return nil, err
			}
			g.defs[name] = s
		}
		return &node{Ref: "#/$defs/" + name}, nil
	}
	return nil, fmt.Errorf("type %s (%s) has no JSON Schema rule", t, t.Kind())
}

// structSchema describes a struct's yaml fields.
func (g *gen) structSchema(t reflect.Type) (*node, error) {
	s := &node{Type: "object", Description: g.typeDoc(t), Properties: map[string]*node{}, AdditionalProperties: false}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			if f.Type.Kind() != reflect.Map || f.Type.Elem().Kind() != reflect.Interface {
				return nil, fmt.Errorf("type %s: inline field %s is not a map of any values", t, f.Name)
			}
			// Other K3s flags: a scalar or a list of scalars (K3sConfig.Extra).
			s.AdditionalProperties = &node{AnyOf: []*node{{Type: scalar}, {Type: "array", Items: &node{Type: scalar}}}}
			continue
		}
		if name == "" {
			return nil, fmt.Errorf("type %s: field %s has no yaml name", t, f.Name)
		}
		p, err := g.schema(f.Type)
		if err != nil {
			return nil, err
		}
		if d := g.fieldDoc(t, f.Name); d != "" {
			// Beside a $ref too: validators ignore it there (draft-07), editors show the field's
			// words rather than the type's.
			p.Description = d
		}
		s.Properties[name] = p
		if !strings.Contains(","+opts+",", ",omitempty,") && g.required(f.Type) {
			s.Required = append(s.Required, name)
		}
	}
	return s, nil
}

// required reports whether a field of type t without omitempty must be present: scalars and
// lists must; a struct only when it has a required field itself.
func (g *gen) required(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		return false
	}
	if t.Kind() != reflect.Struct {
		return true
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		_, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() || strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",inline,") {
			continue
		}
		if g.required(f.Type) {
			return true
		}
	}
	return false
}
