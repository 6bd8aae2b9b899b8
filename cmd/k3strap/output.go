// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// -o/--output has one meaning on every command: the format of what the command prints on
// stdout. The formats:
//   - auto: the command's default (the terminal UI on a terminal for the commands that have
//     one, plain lines otherwise; json for `schema`);
//   - plain: lines for people;
//   - json: machine-readable (one JSON document, or JSON lines of events for the commands
//     that run steps: docs/output.md);
//   - yaml: the same document as YAML, where a document is printed.
//
// outputFormats is the one table of which command prints which formats; checkOutput refuses
// any other value with exit 2 before the command runs. A command missing from it runs steps
// and prints events: auto, plain or json.
var outputFormats = map[string][]string{
	"validate":              {"plain", "json"},
	"render":                {"plain", "json", "yaml"},
	"steps":                 {"plain", "json", "yaml"},
	"version":               {"plain", "json", "yaml"},
	"schema":                {"json", "yaml", "plain"}, // plain: the JSON document as it is
	"bundle":                {"plain"},
	"timeline":              {"plain"}, // an HTML page, to -O or stdout
	"fleet status":          {"plain", "json"},
	"firstboot":             {"plain"},
	"firstboot seed":        {"plain"},
	"completion":            {"plain"},
	"completion bash":       {"plain"},
	"completion zsh":        {"plain"},
	"completion fish":       {"plain"},
	"completion powershell": {"plain"},
	"help":                  {"plain"},
	"gen-man":               {"plain"},
}

// eventFormats are the formats of a command that runs steps and prints events.
var eventFormats = []string{"auto", "plain", "json"}

// formatsOf returns the -o values cmd accepts, auto first ("auto" is always accepted: the
// command's default).
func formatsOf(cmd *cobra.Command) []string {
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	if f, ok := outputFormats[path]; ok {
		return append([]string{"auto"}, f...)
	}
	return eventFormats
}

// checkOutput refuses an -o value cmd does not print (a usage error: exit 2), naming what it
// prints. bundle's deprecated `-o FILE` (any value that is not a format name) passes: bundle
// takes it as its file with a warning (bundle.go).
func checkOutput(cmd *cobra.Command, output string) error {
	formats := formatsOf(cmd)
	if slices.Contains(formats, output) {
		return nil
	}
	if cmd.Name() == "bundle" && !isFormatName(output) {
		return nil
	}
	return usageError{fmt.Errorf("--output %q: `%s` prints %s — fix: give one of these with -o", output,
		strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), strings.Join(formats, ", "))}
}

// isFormatName reports whether s names an output format of any command.
func isFormatName(s string) bool {
	return slices.Contains([]string{"auto", "plain", "json", "yaml"}, s)
}

// writeDocument prints v as the -o format asks: JSON (one line, as the JSON lines of the
// event commands, so a reader of lines sees one document per line; `jq .` indents it) or
// YAML; ok is false for plain (the caller prints lines).
func writeDocument(w io.Writer, output string, v any) (ok bool, err error) {
	switch output {
	case "json":
		return true, json.NewEncoder(w).Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	}
	return false, nil
}
