// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"bytes"
	"errors"
	"io"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// DocumentKind names the kind of file a document is, for the messages about the file as a
// whole (empty, more than one document).
type DocumentKind struct {
	// Noun is what the file holds, e.g. "inventory" or "fleet file".
	Noun string
	// Example is the file to start from, e.g. "examples/single-server.yaml".
	Example string
}

// clusterDocument is an inventory (kind Cluster).
var clusterDocument = DocumentKind{Noun: "inventory", Example: "examples/single-server.yaml"}

// Decoded is a document DecodeDocument read: where each field path stands in the file.
type Decoded struct {
	// Positions maps field paths ("spec.sites[1].path") to their value's position.
	Positions Positions
	// KeyPositions maps the same paths to their mapping key's position (list items have none).
	KeyPositions Positions
}

// DecodeDocument decodes data, the one YAML document of file source, into out (a pointer to a
// struct with yaml tags) with the rules Load decodes an inventory by: unknown fields (with
// "did you mean"), duplicate keys and values of the wrong type are collected, each with file,
// line and column, and the position of every field path is recorded. An empty file or one
// with more than one document is an error naming kind. The document's kind and content are
// not validated: that is the caller's. A nil ErrorList means the document decoded.
func DecodeDocument(source string, data []byte, out any, kind DocumentKind) (Decoded, ErrorList) {
	d, fatal := decodeDocument(source, data, out, kind)
	if fatal != nil {
		return Decoded{}, fatal
	}
	return Decoded{Positions: d.pos, KeyPositions: d.keyPos}, d.errs
}

// decodeDocument parses data and decodes its one document into out. fatal is set when nothing
// could be decoded (empty file, YAML syntax); the decoder's errs hold the problems of a
// document that was decoded.
func decodeDocument(source string, data []byte, out any, kind DocumentKind) (d *decoder, fatal ErrorList) {
	d = newDecoder(source)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrorList{{File: source, Message: "the " + kind.Noun + " is empty", Fix: "start from " + kind.Example}}
		}
		return nil, ErrorList{syntaxError(source, data, err)}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		d.add("", posOf(&next), "the file holds more than one YAML document", "keep one document per "+kind.Noun+" (remove the '---' and what follows)")
	case !errors.Is(err, io.EOF):
		return nil, ErrorList{syntaxError(source, data, err)}
	}
	d.document(&doc, reflect.ValueOf(out).Elem(), kind)
	return d, nil
}
