// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/preflight"
)

// Dynamic shell completion (cobra's __complete protocol, which `k3strap completion SHELL`
// scripts call): the domain's names complete where a flag takes one.
//   - -f/--file: YAML files;
//   - -o/--output: the formats the command prints (outputFormats);
//   - --host, and remove-node's arguments: the host names of the inventory given by -f (or
//     the default, inputPath);
//   - --site: the site names of the fleet file given by -f;
//   - --ignore-preflight-errors: the preflight check IDs (package checkid through
//     preflight.Checks) and "all";
//   - `steps COMMAND`: the commands that run as steps (ValidArgs).
//
// Completion reads the file quietly (no "using ./cluster.yaml" notice, no validation: a
// half-written inventory still completes its host names) and offers nothing when it cannot.

// registerCompletions registers the completion functions on every command under root.
func (a *app) registerCompletions(root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("file", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
	})
	_ = root.RegisterFlagCompletionFunc("output", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return formatsOf(cmd), cobra.ShellCompDirectiveNoFileComp
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		fl := c.LocalNonPersistentFlags()
		if fl.Lookup("host") != nil {
			_ = c.RegisterFlagCompletionFunc("host", a.completeHosts)
		}
		if fl.Lookup("site") != nil {
			_ = c.RegisterFlagCompletionFunc("site", a.completeSites)
		}
		if c.Name() == "remove-node" && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = a.completeHostArgs
		}
		if fl.Lookup("ignore-preflight-errors") != nil {
			_ = c.RegisterFlagCompletionFunc("ignore-preflight-errors", completeCheckIDs)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completionInput returns the bytes of the inventory or fleet file completion reads (-f, else
// $K3STRAP_FILE, else ./cluster.yaml), or nil; stdin ("-") is never read.
func (a *app) completionInput() []byte {
	path, _ := a.inputPath()
	if path == "" || path == stdinPath {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxInputBytes {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return b
}

// completeHosts offers the host names (spec.hosts[].name) of the inventory, those already
// given with --host left out.
func (a *app) completeHosts(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	given, _ := cmd.Flags().GetStringSlice("host")
	return a.hostNames(given), cobra.ShellCompDirectiveNoFileComp
}

// completeHostArgs offers the host names as arguments (remove-node NAME...), those already
// given left out.
func (a *app) completeHostArgs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.hostNames(args), cobra.ShellCompDirectiveNoFileComp
}

// hostNames returns "name\trole" for each host of the inventory not in given.
func (a *app) hostNames(given []string) []string {
	var doc struct {
		Spec struct {
			Hosts []struct {
				Name string `yaml:"name"`
				Role string `yaml:"role"`
			} `yaml:"hosts"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(a.completionInput(), &doc); err != nil {
		return nil
	}
	var out []string
	for _, h := range doc.Spec.Hosts {
		if h.Name != "" && !containsFold(given, h.Name) {
			out = append(out, h.Name+"\t"+h.Role)
		}
	}
	return out
}

// completeSites offers the site names of the fleet file (loaded: a site's name is its
// inventory's metadata.name).
func (a *app) completeSites(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	path, _ := a.inputPath()
	data := a.completionInput()
	if data == nil || !fleet.IsFleet(data) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	f, err := fleet.Parse(path, data, fleet.LoadOptions{SkipFileChecks: true})
	if err != nil || f == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	given, _ := cmd.Flags().GetStringSlice("site")
	var out []string
	for _, s := range f.Sites {
		if !containsFold(given, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeCheckIDs offers the preflight check IDs and "all" after the last comma of what is
// typed (the flag takes ID,ID,...).
func completeCheckIDs(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	prefix := ""
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		prefix = toComplete[:i+1]
	}
	out := []string{prefix + "all"}
	for _, c := range preflight.Checks() {
		out = append(out, prefix+c.ID())
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
