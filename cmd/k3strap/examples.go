// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// commandExamples is the one table of every command's `Example:` (cobra's Example field, shown
// by --help and in the man pages), keyed by the command's path below k3strap ("" is k3strap
// itself). setExamples puts them on the commands; a test fails when a command has none.
var commandExamples = map[string]string{
	"": `  k3strap init                          # write ./cluster.yaml in a wizard
  k3strap validate                      # ./cluster.yaml is read when -f is not given
  k3strap apply -f cluster.yaml`,
	"validate": `  k3strap validate -f cluster.yaml
  k3strap validate -f cluster.yaml -o json | jq .findings
  cat cluster.yaml | k3strap validate -f -`,
	"preflight": `  k3strap preflight -f cluster.yaml
  k3strap preflight -f cluster.yaml --ignore-preflight-errors=Swap,Port-6443`,
	"render": `  k3strap render -f cluster.yaml --host cp1
  k3strap render -f cluster.yaml -o json | jq '.[].files[].path'`,
	"apply": `  k3strap apply -f cluster.yaml
  k3strap apply -f cluster.yaml --dry-run --detailed-exitcode -o json > plan.jsonl; echo $?
  K3STRAP_SSH_KEY_PATH=~/.ssh/lab k3strap apply -f cluster.yaml -o plain`,
	"upgrade": `  k3strap upgrade -f cluster.yaml            # after changing spec.k3s.version
  k3strap upgrade -f cluster.yaml --via suc --watch`,
	"reset": `  k3strap reset -f cluster.yaml --host w1
  k3strap reset -f cluster.yaml --yes`,
	"kubeconfig": `  k3strap kubeconfig -f cluster.yaml
  k3strap kubeconfig -f cluster.yaml --merge --context lab`,
	"check": `  k3strap check -f cluster.yaml
  k3strap check -f cluster.yaml -o json`,
	"doctor": `  k3strap doctor -f cluster.yaml
  k3strap doctor --ssh root@10.0.0.10
  k3strap doctor -f cluster.yaml --fix`,
	"version": `  k3strap version
  k3strap version -o json | jq -r .revision`,
	"init": `  k3strap init
  k3strap init -f lab.yaml`,
	"steps": `  k3strap steps
  k3strap steps apply
  k3strap steps upgrade -o json`,
	"backup": `  k3strap backup -f cluster.yaml
  k3strap backup -f cluster.yaml --name before-upgrade --to ./snapshots`,
	"backup list": `  k3strap backup list -f cluster.yaml`,
	"firstboot": `  k3strap firstboot seed -f site.yaml -O seeds/
  k3strap firstboot run                      # on the box: what its first-boot unit runs`,
	"firstboot seed": `  k3strap firstboot seed -f site.yaml -O seeds/                 # every host, bundle copied
  k3strap firstboot seed -f site.yaml -O seeds/ --host a1 --bundle-on-media /media/usb/site.tar
  genisoimage -V cidata -r -J -o a1.iso seeds/a1                 # a NoCloud volume holding the payload too`,
	"firstboot run": `  systemctl status k3strap-firstboot; cat /var/lib/k3strap/status
  k3strap firstboot run --dir /var/lib/k3strap --join-timeout 1h`,
	"restore": `  k3strap restore -f cluster.yaml --snapshot before-upgrade
  k3strap restore -f cluster.yaml --snapshot ./snapshots/before-upgrade.zip --yes`,
	"remove-node": `  k3strap remove-node -f cluster.yaml w2
  k3strap remove-node -f cluster.yaml w2 w3 --yes`,
	"rotate": `  k3strap rotate certificates -f cluster.yaml
  K3STRAP_K3S_TOKEN=... k3strap rotate token -f cluster.yaml`,
	"rotate certificates": `  k3strap rotate certificates -f cluster.yaml --dry-run`,
	"rotate token": `  k3strap rotate token -f cluster.yaml
  K3STRAP_K3S_TOKEN="$(cat new-token)" k3strap rotate token -f cluster.yaml`,
	"bundle": `  k3strap bundle -f site.yaml -O site.tar
  sha256sum site.tar`,
	"timeline": `  k3strap apply -o json > events.jsonl
  k3strap timeline -f events.jsonl -O run.html
  k3strap apply -f fleet.yaml -o json | k3strap timeline -f - -O fleet.html`,
	"schema": `  k3strap schema > cluster.schema.json
  # first line of cluster.yaml:
  # yaml-language-server: $schema=./cluster.schema.json`,
	"fleet": `  k3strap apply -f fleet.yaml                 # a fleet file runs the fleet
  k3strap fleet status -f fleet.yaml`,
	"fleet status": `  k3strap fleet status -f fleet.yaml
  k3strap fleet status -f fleet.yaml -o json | jq .sites`,
	"completion": `  source <(k3strap completion bash)
  k3strap completion zsh > "${fpath[1]}/_k3strap"`,
	"completion bash":       `  source <(k3strap completion bash)`,
	"completion zsh":        `  k3strap completion zsh > "${fpath[1]}/_k3strap"`,
	"completion fish":       `  k3strap completion fish | source`,
	"completion powershell": `  k3strap completion powershell | Out-String | Invoke-Expression`,
	"help":                  `  k3strap help apply`,
	"gen-man":               `  k3strap gen-man docs/man     # what make man runs`,
}

// commandPath is cmd's path below the root ("fleet status"; "" for the root).
func commandPath(cmd *cobra.Command) string {
	p := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name())
	return strings.TrimPrefix(p, " ")
}

// setExamples sets the Example of c and every command under it from commandExamples (a
// command's own Example, when set, is kept).
func setExamples(c *cobra.Command) {
	if c.Example == "" {
		c.Example = commandExamples[commandPath(c)]
	}
	for _, sub := range c.Commands() {
		setExamples(sub)
	}
}
