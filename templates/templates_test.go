// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package templates

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/internal/golden"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

func serverConfig() inventory.K3sConfig {
	return inventory.K3sConfig{
		TokenFile:              "/etc/rancher/k3s/cluster-token",
		NodeName:               "cp1",
		NodeLabel:              inventory.StringList{"site=lab"},
		NodeTaint:              inventory.StringList{"dedicated=edge:NoExecute"},
		TLSSAN:                 inventory.StringList{"10.0.0.10"},
		WriteKubeconfigMode:    "0600",
		Disable:                inventory.StringList{"traefik", "servicelb"},
		DisableCloudController: inventory.Bool(false),
		KubeletArg:             inventory.StringList{"max-pods=200"},
		Extra:                  map[string]any{"secrets-encryption-provider": "aescbc", "etcd-expose-metrics": true, "default-local-storage-path": "/data"},
	}
}

func TestK3sConfigGolden(t *testing.T) {
	got, err := K3sConfig(inventory.RoleServer, serverConfig())
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "config-server.yaml", got)
	// Stable across renders (Extra is a map).
	for i := 0; i < 20; i++ {
		again, _ := K3sConfig(inventory.RoleServer, serverConfig())
		if string(again) != string(got) {
			t.Fatal("rendering is not stable")
		}
	}
}

func TestK3sConfigRefusesSecretsAndUnknownKeys(t *testing.T) {
	c := serverConfig()
	c.Token = "s3cret"
	if _, err := K3sConfig(inventory.RoleServer, c); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("token accepted or leaked: %v", err)
	}
	c = serverConfig()
	c.Extra["flanel-backend"] = "vxlan"
	if _, err := K3sConfig(inventory.RoleServer, c); err == nil || !strings.Contains(err.Error(), "flanel-backend") {
		t.Fatalf("unknown key not refused: %v", err)
	}
	a := inventory.K3sConfig{NodeName: "a1", Disable: inventory.StringList{"traefik"}}
	if _, err := K3sConfig(inventory.RoleAgent, a); err == nil {
		t.Fatal("server-only key accepted for an agent")
	}
}

// TestRenderedKeysAreKnownFlags: everything k3strap renders is in the K3s flag table.
func TestRenderedKeysAreKnownFlags(t *testing.T) {
	table := k3s.Flags()
	for _, role := range []inventory.Role{inventory.RoleServer, inventory.RoleAgent} {
		cfg := serverConfig()
		if role == inventory.RoleAgent {
			cfg = cfg.ForAgent()
		}
		out, err := K3sConfig(role, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			t.Fatal("nothing rendered")
		}
		for k := range m {
			if _, ok := table.Lookup(role.FlagRole(), k); !ok {
				t.Errorf("%s config renders %q, which K3s %s does not accept", role, k, k3s.FlagsVersion)
			}
		}
	}
}

func TestInstallScriptIsOurs(t *testing.T) {
	s := string(InstallScript())
	for _, want := range []string{"INSTALL_K3S_SKIP_DOWNLOAD", "Type=notify", "k3s-killall.sh", "No change detected so skipping service start", "chmod 0600"} {
		if !strings.Contains(s, want) {
			t.Errorf("install script lacks %q", want)
		}
	}
}
