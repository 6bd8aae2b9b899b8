// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/flags"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// Input is what a `k3s server` / `k3s agent` invocation sees.
type Input struct {
	// Role is the subcommand (server or agent).
	Role flags.Role
	// Args are the command-line arguments after the subcommand.
	Args []string
	// Getenv reads the environment (K3S_* variables).
	Getenv func(string) string
	// Environ lists the environment as KEY=VALUE (for the k3s.io/node-env annotation).
	Environ []string
	// Root prefixes the config file paths (tests only).
	Root paths.Root
}

// Result is the parsed configuration.
type Result struct {
	// Role is the subcommand.
	Role flags.Role
	// FileArgs are the "--key=value" arguments read from config.yaml and drop-ins, unknown
	// keys included (as K3s's node-args annotation shows them).
	FileArgs []string
	// CLIArgs are the command-line arguments as given.
	CLIArgs []string
	// Warnings are the messages K3s logs at warning level, one per unknown config key, e.g.
	// "Unknown flag --flanel-backend found in config.yaml, skipping\n" (trailing newline
	// included, as in log-lines-default.txt).
	Warnings []string
	// Values maps each known flag to its effective values: all items for a list flag (config
	// first, then command line), the last value for string and bool flags.
	Values map[string][]string
	// NodeArgs is the k3s.io/node-args annotation value: a JSON array of the subcommand and
	// the effective arguments, secret values replaced by "********".
	NodeArgs string
	// NodeEnv is the k3s.io/node-env annotation value: a JSON object of the K3S_* variables,
	// secret values replaced by "********".
	NodeEnv string
}

// envFlags are the flags urfave/cli fills from an environment variable when neither the
// config file nor the command line sets them (pkg/cli/cmds/server.go, agent.go).
var envFlags = map[string]string{
	"token":                 "K3S_TOKEN",
	"token-file":            "K3S_TOKEN_FILE",
	"agent-token":           "K3S_AGENT_TOKEN",
	"agent-token-file":      "K3S_AGENT_TOKEN_FILE",
	"server":                "K3S_URL",
	"node-name":             "K3S_NODE_NAME",
	"data-dir":              "K3S_DATA_DIR",
	"cluster-init":          "K3S_CLUSTER_INIT",
	"write-kubeconfig":      "K3S_KUBECONFIG_OUTPUT",
	"write-kubeconfig-mode": "K3S_KUBECONFIG_MODE",
	"datastore-endpoint":    "K3S_DATASTORE_ENDPOINT",
	"resolv-conf":           "K3S_RESOLV_CONF",
	"selinux":               "K3S_SELINUX",
	"lb-server-port":        "K3S_LB_SERVER_PORT",
}

// shortFlags are K3s's one-letter aliases.
var shortFlags = map[string]string{"c": "config", "d": "data-dir", "t": "token", "s": "server", "o": "write-kubeconfig"}

// secretFlags have their value redacted in node-args (pkg/nodeconfig isSecret).
var secretFlags = map[string]bool{"--token": true, "-t": true, "--agent-token": true, "--datastore-endpoint": true,
	"--cluster-secret": true, "--etcd-s3-access-key": true, "--etcd-s3-secret-key": true}

var secretEnv = map[string]bool{"K3S_TOKEN": true, "K3S_DATASTORE_ENDPOINT": true, "K3S_AGENT_TOKEN": true,
	"K3S_CLUSTER_SECRET": true, "AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true}

// Omitted replaces secret values in annotations.
const Omitted = "********"

// Load reads config.yaml (or --config/-c, or K3S_CONFIG_FILE) with its drop-ins, warns about
// unknown keys (without failing, as K3s), parses the command line (an unknown command-line
// flag is an error, as urfave/cli makes it) and merges everything. Errors name the file or
// flag.
func Load(in Input, table *flags.Table) (*Result, error) {
	getenv := in.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	cfgPath, explicit := paths.DefaultConfig, false
	if v := getenv("K3S_CONFIG_FILE"); v != "" {
		cfgPath, explicit = v, true
	}
	for i, a := range in.Args {
		for _, f := range []string{"--config", "-c"} {
			if a == f && i+1 < len(in.Args) {
				cfgPath, explicit = in.Args[i+1], true
			} else if strings.HasPrefix(a, f+"=") {
				cfgPath, explicit = a[len(f)+1:], true
			}
		}
	}
	fileArgs, err := ReadFiles(in.Root.Path(cfgPath), explicit)
	if err != nil {
		return nil, fmt.Errorf("failed to read config file %s: %w", cfgPath, err)
	}
	r := &Result{Role: in.Role, FileArgs: fileArgs, CLIArgs: in.Args, Values: map[string][]string{}}

	for _, a := range fileArgs {
		name, val, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if s, ok := shortFlags[name]; ok {
			name = s
		}
		kind, ok := table.Lookup(in.Role, name)
		if !ok {
			r.Warnings = append(r.Warnings, fmt.Sprintf("Unknown flag %s found in config.yaml, skipping\n", strings.SplitN(a, "=", 2)[0]))
			continue
		}
		r.set(name, kind, val)
	}
	if err := r.parseCLI(in.Args, table); err != nil {
		return nil, err
	}
	for flag, env := range envFlags {
		if _, set := r.Values[flag]; set {
			continue
		}
		if _, ok := table.Lookup(in.Role, flag); !ok {
			continue
		}
		if v := getenv(env); v != "" {
			r.Values[flag] = []string{v}
		}
	}
	r.NodeArgs = nodeArgs(string(in.Role), fileArgs, in.Args)
	r.NodeEnv = nodeEnv(in.Environ)
	return r, nil
}

func (r *Result) set(name string, kind flags.Kind, val string) {
	if kind == flags.List {
		r.Values[name] = append(r.Values[name], val)
		return
	}
	r.Values[name] = []string{val}
}

// parseCLI parses "--flag value", "--flag=value", "-flag", bool "--flag" and the short
// aliases. A positional argument or an unknown flag is an error worded like urfave/cli's.
func (r *Result) parseCLI(args []string, table *flags.Table) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			//lint:ignore ST1005 worded like urfave/cli, which K3s uses
			return fmt.Errorf("Incorrect Usage: unexpected argument %q", a)
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if s, ok := shortFlags[name]; ok {
			name = s
		}
		kind, ok := table.Lookup(r.Role, name)
		if !ok {
			//lint:ignore ST1005 worded like urfave/cli, which K3s uses
			return fmt.Errorf("Incorrect Usage: flag provided but not defined: -%s", name)
		}
		if !hasVal {
			if kind == flags.Bool {
				val = "true"
			} else {
				if i+1 >= len(args) {
					//lint:ignore ST1005 worded like urfave/cli, which K3s uses
					return fmt.Errorf("Incorrect Usage: flag needs an argument: -%s", name)
				}
				i++
				val = args[i]
			}
		}
		r.set(name, kind, val)
	}
	return nil
}

func nodeArgs(role string, fileArgs, cliArgs []string) string {
	list := []string{role}
	for _, a := range append(append([]string{}, fileArgs...), cliArgs...) {
		if strings.HasPrefix(a, "--") && strings.Contains(a, "=") {
			list = append(list, strings.SplitN(a, "=", 2)...)
			continue
		}
		list = append(list, a)
	}
	for i, a := range list {
		if secretFlags[a] && i+1 < len(list) {
			list[i+1] = Omitted
		}
	}
	b, _ := json.Marshal(list)
	return string(b)
}

func nodeEnv(environ []string) string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "K3S_") {
			if secretEnv[k] {
				v = Omitted
			}
			env[k] = v
		}
	}
	b, _ := json.Marshal(env)
	return string(b)
}

// Get returns the last value of flag and whether it was set.
func (r *Result) Get(flag string) (string, bool) {
	v, ok := r.Values[flag]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// List returns all values of a list flag; for the flags K3s splits on commas (disable,
// node-ip, cluster-cidr, ...) each comma-separated part is one item.
func (r *Result) List(flag string) []string {
	var out []string
	for _, v := range r.Values[flag] {
		if commaSplit[flag] {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
			continue
		}
		out = append(out, v)
	}
	return out
}

var commaSplit = map[string]bool{"disable": true, "node-ip": true, "node-external-ip": true, "cluster-cidr": true,
	"service-cidr": true, "cluster-dns": true, "tls-san": true}

// KnownKeys returns the sorted flag names that were set (for tests and debugging).
func (r *Result) KnownKeys() []string {
	out := make([]string, 0, len(r.Values))
	for k := range r.Values {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
