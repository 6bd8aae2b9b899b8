// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"strings"
	"testing"
)

func TestExpandProxyCommand(t *testing.T) {
	got, err := ExpandProxyCommand("ssh -W %h:%p %r@bastion # %n 100%%", ProxyTokens{Host: "10.0.0.5", Port: 2222, User: "ops", Alias: "node1"})
	if err != nil || got != "ssh -W 10.0.0.5:2222 ops@bastion # node1 100%" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := ExpandProxyCommand("connect %h %C", ProxyTokens{}); err == nil || !strings.Contains(err.Error(), "unknown token %C") {
		t.Fatalf("unknown token: got %v", err)
	}
	if _, err := ExpandProxyCommand("nc %h 22 %", ProxyTokens{}); err == nil {
		t.Fatal("a lone % must be refused")
	}
}

// The enterprise SSH fields are validated with the file's line: an unknown ProxyCommand token,
// a proxyCommand together with a bastion, bastion and bastions together, both passphrase sources.
func TestValidateEnterpriseSSH(t *testing.T) {
	doc := `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: c
spec:
  ssh:
    proxyCommand: connect %h %C
    keyPassphraseEnv: KP
    keyPassphraseFile: /nonexistent/kp
    bastion:
      address: b0
    bastions:
      - address: b1
      - port: 70000
  hosts:
    - name: cp1
      address: 192.0.2.10
      role: server
`
	_, err := Parse("inv.yaml", []byte(doc), LoadOptions{SkipFileChecks: true})
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		"inv.yaml:7:19: ProxyCommand \"connect %h %C\" has the unknown token %C",
		"proxyCommand and a bastion are both set",
		"bastion and bastions are both set",
		"keyPassphraseEnv and keyPassphraseFile are both set",
		"inv.yaml:14:9: the bastion has no address", "inv.yaml:14:15: SSH port 70000 is out of range",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
