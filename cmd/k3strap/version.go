// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// buildInfo is what `k3strap version` reports about the running binary: -o json prints it as
// one JSON object with these field names.
type buildInfo struct {
	// Version is the release ("v0.3.0"): -ldflags "-X main.version=..." when set (make build,
	// the release), else the main module's version the Go toolchain stamped (`go install
	// ...@v0.3.0` gives the tag, a build in a checkout a pseudo-version, "+dirty" when the tree
	// had changes), else "dev".
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from (vcs.revision), empty when unknown
	// (built outside a checkout, or with -buildvcs=false).
	Revision string `json:"revision,omitempty"`
	// Time is the commit's time, RFC 3339 (vcs.time), empty when unknown.
	Time string `json:"time,omitempty"`
	// Dirty says whether the checkout had uncommitted changes (vcs.modified); nil (absent from
	// JSON) when unknown, as Revision.
	Dirty *bool `json:"dirty,omitempty"`
	// GoVersion is the toolchain that built the binary ("go1.26.8").
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH of the binary ("linux/amd64").
	Platform string `json:"platform"`
}

// unsetVersion is main.version when no -X main.version was given (root.go).
const unsetVersion = "dev"

// readBuildInfo combines ldVersion (main.version) with what the Go toolchain embedded (bi, nil
// when runtime/debug.ReadBuildInfo has none) into what `version` reports. ldVersion wins when it
// was set: make and the release set it from the git tag.
func readBuildInfo(ldVersion string, bi *debug.BuildInfo) buildInfo {
	info := buildInfo{
		Version:   unsetVersion,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		// "(devel)" is what the toolchain writes when it knows no version (go run, -buildvcs=false).
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				dirty := s.Value == "true"
				info.Dirty = &dirty
			}
		}
	}
	if ldVersion != "" && ldVersion != unsetVersion {
		info.Version = ldVersion
	}
	return info
}

// currentBuild is readBuildInfo for this process.
func currentBuild() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return readBuildInfo(version, bi)
}

// writeText prints info as `k3strap VERSION` (the line older releases printed alone) and one
// indented "key  value" line per known fact.
func (info buildInfo) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintln(&b, "k3strap", info.Version)
	if info.Revision != "" {
		rev := info.Revision
		if info.Dirty != nil && *info.Dirty {
			rev += " (dirty: uncommitted changes)"
		}
		fmt.Fprintf(&b, "  revision  %s\n", rev)
	}
	if info.Time != "" {
		fmt.Fprintf(&b, "  time      %s\n", info.Time)
	}
	fmt.Fprintf(&b, "  go        %s\n", info.GoVersion)
	fmt.Fprintf(&b, "  platform  %s\n", info.Platform)
	_, err := io.WriteString(w, b.String())
	return err
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print k3strap's version, commit, Go version and platform",
		Long: "Print what this binary is: its release (or the module version `go install` stamped),\n" +
			"the commit and its time, whether the tree was dirty, the Go version and the platform.\n" +
			"-o json prints one JSON object (version, revision, time, dirty, goVersion, platform),\n" +
			"-o yaml the same as YAML.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := currentBuild()
			switch a.output {
			case "", "auto", "plain":
				return info.writeText(a.stdout)
			case "json":
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			case "yaml":
				b, err := yaml.Marshal(info)
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(b)
				return err
			default:
				return usageError{fmt.Errorf("--output %q: version prints plain (the default), json or yaml", a.output)}
			}
		},
	}
}
