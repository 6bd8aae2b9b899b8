// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// WriteOptions tune Marshal.
type WriteOptions struct {
	// Header is the comment at the top of the file, one line per item (without "# "). Nil
	// means DefaultHeader.
	Header []string
	// KeepSecrets writes secret values (spec.k3s.token, Rancher's bootstrapPassword, token and
	// agent-token in a K3s config). By default they are left out and a comment says where they
	// come from instead, so that the file can be kept in git.
	KeepSecrets bool
}

// defaultHeader is the comment Marshal puts at the top of an inventory when
// WriteOptions.Header is nil (read-only; DefaultHeader returns a copy).
var defaultHeader = []string{
	"k3strap inventory: `k3strap apply -f FILE` takes these hosts to a K3s cluster.",
	"Keep it in git: it holds no secrets (the join token is read back from the first server or",
	"generated there; give one in $" + "K3STRAP_K3S_TOKEN if you must).",
	"Check it with `k3strap validate -f FILE`; see what each host gets with `k3strap render -f FILE`.",
}

// DefaultHeader returns the default top-of-file comment lines.
func DefaultHeader() []string { return append([]string(nil), defaultHeader...) }

// fieldComments are the head comments Marshal attaches to field paths; "[]" in a path
// matches any list index. Source of the facts: the inventory types' doc comments.
var fieldComments = map[string]string{
	"metadata.name":                 "The cluster's name: the kubeconfig context and file (<name>.kubeconfig).",
	"spec.k3s":                      "K3s: which release, and how it reaches the hosts.",
	"spec.k3s.version":              "A fixed K3s release (github.com/k3s-io/k3s/releases). Change it and re-run apply to upgrade.",
	"spec.k3s.channel":              "The newest release of this channel, resolved when a host installs K3s (online only).",
	"spec.k3s.install":              "online: each host downloads K3s itself; airgap: k3strap uploads the files under airgap.",
	"spec.k3s.airgap":               "Local K3s release files per host architecture (amd64, arm64, arm), verified and uploaded.",
	"spec.k3s.cloudController":      "embedded (K3s's own), external (deploy externalCloudController.manifest) or disabled.",
	"spec.k3s.config":               "K3s config.yaml for every server; keys are K3s flag names. Agents get the agent flags only.",
	"spec.ssh":                      "How k3strap reaches every host over SSH. A host's own ssh: overrides these.",
	"spec.ssh.keyPath":              "Private key file (an encrypted key belongs in ssh-agent: set agent: true).",
	"spec.ssh.knownHosts":           "Host keys are recorded here on first contact and verified on every later run.",
	"spec.cni":                      "Pod network: flannel (built into K3s), calico, flannel-standalone or none (bring your own).",
	"spec.cni.backend":              "flannel: vxlan, host-gw or wireguard-native; calico: VXLAN, IPIP, ..., None.",
	"spec.rancher":                  "Rancher: install it on this cluster, or register the cluster with an existing Rancher.",
	"spec.hosts":                    "The machines. The first server initialises the cluster; more servers make it highly\navailable (keep an odd number); agents run workloads only.",
	"spec.hosts[].role":             "server (control plane) or agent (workloads only).",
	"spec.hosts[].address":          "How this workstation reaches the host over SSH (IP or DNS name).",
	"spec.hosts[].taints":           "key[=value]:Effect (NoSchedule, PreferNoSchedule, NoExecute); k3strap keeps them set.",
	"spec.hosts[].labels":           "Node labels; k3strap keeps them set.",
	"spec.hosts[].ssh":              "Overrides spec.ssh for this host.",
	"spec.hosts[].k3s":              "Overrides spec.k3s.config for this host.",
	"spec.rancher.install.hostname": "Where Rancher answers (default <first server address>.sslip.io).",
}

// secretPaths are the fields holding secrets, with where the value comes from when it is left
// out of the file.
var secretPaths = map[string]string{
	"spec.k3s.token":                         "token: left out; read back from the first server, generated there, or given in $K3STRAP_K3S_TOKEN",
	"spec.k3s.config.token":                  "token: left out (secret); use spec.k3s.token or $K3STRAP_K3S_TOKEN",
	"spec.k3s.config.agent-token":            "agent-token: left out (secret)",
	"spec.hosts[].k3s.config.token":          "token: left out (secret)",
	"spec.hosts[].k3s.config.agent-token":    "agent-token: left out (secret)",
	"spec.rancher.install.bootstrapPassword": "bootstrapPassword: left out; generated and written to a 0600 file when empty",
	"spec.rancher.register.importURL":        "importURL: left out (it embeds Rancher's registration token); or use url: with apiTokenEnv:",
	"spec.rancher.register.apiToken":         "apiToken: left out (secret); name the variable holding it in apiTokenEnv:",
}

// Marshal returns c as a commented YAML inventory that Load reads back to the same cluster: a
// header comment, a comment above each section and key field saying what it does, empty
// sections left out, and — unless opts.KeepSecrets — secret values left out with a comment in
// their place. Paths are written as they are in c (Load resolves relative ones against the
// file's directory). The only error is a value that does not encode to YAML.
func Marshal(c *Cluster, opts WriteOptions) ([]byte, error) {
	var root yaml.Node
	if err := root.Encode(c); err != nil {
		return nil, fmt.Errorf("encoding the inventory: %w", err)
	}
	pruneEmpty(&root)
	annotate(&root, "", opts.KeepSecrets, map[string]bool{})
	header := opts.Header
	if header == nil {
		header = defaultHeader
	}
	root.HeadComment = commentLines(header)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, fmt.Errorf("writing the inventory: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("writing the inventory: %w", err)
	}
	return spaceSections(buf.Bytes()), nil
}

// commentLines joins lines into a comment block for yaml.Node (the encoder adds "# ").
func commentLines(lines []string) string {
	var out []string
	for _, l := range lines {
		for _, part := range strings.Split(l, "\n") {
			out = append(out, "# "+part)
		}
	}
	return strings.Join(out, "\n")
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// annotate walks the mapping tree, attaching fieldComments (each generic path once: the
// first host's fields are explained, the others not again) and removing secrets, whose note
// goes above the next key (or below the mapping when none follows).
func annotate(n *yaml.Node, path string, keepSecrets bool, seen map[string]bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			annotate(c, path, keepSecrets, seen)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			annotate(c, p, keepSecrets, seen)
		}
	case yaml.MappingNode:
		kept := n.Content[:0:0]
		var notes []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			generic := indexRE.ReplaceAllString(p, "[]")
			if note, secret := secretPaths[generic]; secret && !keepSecrets {
				notes = append(notes, note)
				continue
			}
			head := notes
			notes = nil
			if cm, ok := fieldComments[generic]; ok && !seen[generic] {
				seen[generic] = true
				head = append(head, cm)
			}
			if len(head) > 0 {
				k.HeadComment = commentLines(head)
			}
			annotate(v, p, keepSecrets, seen)
			kept = append(kept, k, v)
		}
		n.Content = kept
		if len(notes) > 0 {
			n.FootComment = commentLines(notes)
		}
	}
}

// pruneEmpty removes mapping entries whose value is an empty mapping or sequence, bottom up.
func pruneEmpty(n *yaml.Node) {
	for _, c := range n.Content {
		pruneEmpty(c)
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		v := n.Content[i+1]
		if (v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode) && len(v.Content) == 0 {
			continue
		}
		kept = append(kept, n.Content[i], v)
	}
	n.Content = kept
}

// spaceSections puts a blank line before each commented key below the top level's first, so
// the sections read apart.
func spaceSections(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	out := make([]string, 0, len(lines)+16)
	inHeader := true
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if inHeader && !strings.HasPrefix(trimmed, "#") {
			inHeader = false
		}
		if !inHeader && strings.HasPrefix(trimmed, "# ") && i > 0 {
			prev := strings.TrimSpace(lines[i-1])
			if prev != "" && !strings.HasPrefix(prev, "#") && !strings.HasSuffix(prev, ":") && !strings.HasPrefix(prev, "- ") {
				out = append(out, "")
			}
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n"))
}
