// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// enterpriseInv: every host logs in with a CA-signed certificate of an encrypted key whose
// passphrase comes from the environment; cp1 is reached through two jump hosts (the bastion
// h0, then a1), a1 through the bastion; or, with Extra.proxy, no jump host in the inventory
// at all (the ssh_config given by --ssh-config has a ProxyCommand).
const enterpriseInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: ent
spec:
  k3s:
{{template "k3s-airgap" .}}
    config:
      kubelet-arg: [fail-cgroupv1=false]
  ssh:
    user: root
    keyPath: {{.Extra.key}}
    keyPassphraseEnv: K3STRAP_E2E_KEYPASS
    knownHosts: {{.Extra.knownHosts}}
    connectTimeout: 5s
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
{{- if not .Extra.proxy}}
      ssh:
        bastions:
          - address: {{.Extra.bastion}}
            keyPath: {{.Key}}
          - address: {{(index .Hosts 1).Address}}
{{- end}}
    - name: a1
      address: {{(index .Hosts 1).Address}}
      role: agent
{{- if not .Extra.proxy}}
      ssh:
        bastion:
          address: {{.Extra.bastion}}
          keyPath: {{.Key}}
{{- end}}
`

// TestEnterpriseSSH: hosts that accept only certificate logins from a CA made with ssh-keygen
// -s (TrustedUserCAKeys, AuthorizedKeysFile none, AuthenticationMethods publickey) and present
// host certificates; the user key is encrypted, its passphrase in the environment. apply
// converges through a two-hop jump (bastion h0, then a1) with the host CA in known_hosts and no
// trust-on-first-use record for the certificate hosts, re-runs unchanged through a ProxyCommand
// `ssh -W %h:%p` from --ssh-config, and a wrong passphrase, a wrong host CA, a certificate
// from a CA the hosts do not trust, an expired certificate and an unknown ProxyCommand token
// each fail clearly within the connect timeout.
func TestEnterpriseSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen (openssh-client) is not installed")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh (openssh-client) is not installed: needed for the ProxyCommand")
	}
	c := newClusterTopology(t, 2, "bastion")
	b := c.h.Bastion()
	if b == nil {
		t.Fatal("no bastion")
	}
	d := c.dir
	keygen := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
		}
	}
	const pass = "e2e passphrase 7"
	keygen("-q", "-t", "ed25519", "-N", "", "-C", "user-ca", "-f", filepath.Join(d, "user_ca"))
	keygen("-q", "-t", "ed25519", "-N", "", "-C", "host-ca", "-f", filepath.Join(d, "host_ca"))
	keygen("-q", "-t", "ed25519", "-N", "", "-C", "other-ca", "-f", filepath.Join(d, "other_ca"))
	key := filepath.Join(d, "id_cert")
	keygen("-q", "-t", "ed25519", "-N", pass, "-C", "e2e", "-f", key)
	keygen("-q", "-s", filepath.Join(d, "user_ca"), "-I", "e2e-root", "-n", "root", "-V", "-5m:+1h", key+".pub")
	userCA, err := os.ReadFile(filepath.Join(d, "user_ca.pub"))
	if err != nil {
		t.Fatal(err)
	}
	// Each cluster host: a host certificate for its address, only certificate logins — until
	// the test ends: the harness's next `up` logs in with its plain key before resetting hosts.
	t.Cleanup(func() {
		for i := range c.hosts {
			c.exec(i, "sh", "-c", "rm -f /etc/ssh/sshd_config.d/00-certs-only.conf && systemctl restart ssh")
		}
	})
	for i, h := range c.hosts {
		pub := c.exec(i, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
		hk := filepath.Join(d, h.Name+"_host.pub")
		if err := os.WriteFile(hk, []byte(pub+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		keygen("-q", "-s", filepath.Join(d, "host_ca"), "-h", "-I", h.Name, "-n", h.Address, "-V", "-5m:+1h", hk)
		cert, err := os.ReadFile(filepath.Join(d, h.Name+"_host-cert.pub"))
		if err != nil {
			t.Fatal(err)
		}
		for p, data := range map[string][]byte{
			"/etc/ssh/user_ca.pub":                      userCA,
			"/etc/ssh/ssh_host_ed25519_key-cert.pub":    cert,
			"/etc/ssh/sshd_config.d/00-certs-only.conf": []byte("TrustedUserCAKeys /etc/ssh/user_ca.pub\nHostCertificate /etc/ssh/ssh_host_ed25519_key-cert.pub\nAuthorizedKeysFile none\nAuthenticationMethods publickey\n"),
		} {
			if err := c.h.WriteFile(t.Context(), h.Index, p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c.exec(i, "sh", "-c", "sshd -t && systemctl restart ssh")
	}
	// The harness key no longer logs in to the cluster hosts: only the certificate does.
	out, err := exec.Command("ssh", "-F", c.h.SSHConfigPath(), "-o", "ConnectTimeout=5", "-J", "root@"+b.Address, "root@"+c.hosts[0].Address, "true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("the plain harness key still logs in to %s (err %v): %s", c.hosts[0].Address, err, out)
	}
	hostCA, err := os.ReadFile(filepath.Join(d, "host_ca.pub"))
	if err != nil {
		t.Fatal(err)
	}
	knownHosts := filepath.Join(d, "known_hosts_ca")
	caLine := "@cert-authority " + c.h.PrivateNet() + ".* " + string(hostCA)
	if err := os.WriteFile(knownHosts, []byte(caLine), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("K3STRAP_E2E_KEYPASS", pass)
	extra := map[string]any{"key": key, "knownHosts": knownHosts, "bastion": b.Address}

	c.writeInventory(enterpriseInv, extra)
	r := c.k3strap(4*time.Minute, "apply", "--ssh-config=none", "--kubeconfig-out", d+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply with certificates through two jump hosts exited %d", r.code)
	}
	kh, _ := os.ReadFile(knownHosts)
	for _, h := range c.hosts {
		for _, line := range strings.Split(string(kh), "\n") {
			if strings.Contains(line, h.Address) && !strings.HasPrefix(line, "@cert-authority") {
				t.Errorf("%s was recorded by trust on first use although its certificate is trusted through the CA: %s", h.Address, line)
			}
		}
	}
	if !strings.Contains(string(kh), b.Address) {
		t.Errorf("the bastion's plain key was not recorded (trust on first use):\n%s", kh)
	}

	// The same hosts through a ProxyCommand in an ssh_config, no jump host in the inventory.
	sshcfg := filepath.Join(d, "ssh_config")
	cfg := "Host " + c.h.PrivateNet() + ".*\n  ProxyCommand ssh -F " + c.h.SSHConfigPath() + " -W %h:%p root@" + b.Address + "\n"
	if err := os.WriteFile(sshcfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	extra["proxy"] = true
	c.writeInventory(enterpriseInv, extra)
	r = c.k3strap(3*time.Minute, "apply", "--ssh-config="+sshcfg, "--kubeconfig-out", d+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply through ProxyCommand exited %d", r.code)
	}
	for _, h := range r.summary(t).Hosts {
		if h.Status != events.StatusUnchanged {
			t.Errorf("re-run through ProxyCommand: %s is %s, want unchanged", h.Host, h.Status)
		}
	}

	// Failures, each clear and within the 5 s connect timeout (plus the run's own start-up).
	fail := func(what, want string) {
		t.Helper()
		r := c.k3strap(time.Minute, "preflight", "--ssh-config="+sshcfg)
		defer r.dump(t)
		t.Logf("%s: %s", what, firstLineWith(r.stdout+r.stderr, want))
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("%s: exit %d, want a failure saying %q", what, r.code, want)
		}
		if r.duration > 20*time.Second {
			t.Errorf("%s: took %s", what, r.duration)
		}
	}
	t.Setenv("K3STRAP_E2E_KEYPASS", "not the passphrase")
	fail("wrong passphrase", "the passphrase from $K3STRAP_E2E_KEYPASS is wrong")
	t.Setenv("K3STRAP_E2E_KEYPASS", pass)

	otherCA, err := os.ReadFile(filepath.Join(d, "other_ca.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(knownHosts, []byte("@cert-authority "+c.h.PrivateNet()+".* "+string(otherCA)), 0o600); err != nil {
		t.Fatal(err)
	}
	fail("wrong host CA", "does not accept")
	if err := os.WriteFile(knownHosts, []byte(caLine), 0o600); err != nil {
		t.Fatal(err)
	}
	keygen("-q", "-s", filepath.Join(d, "other_ca"), "-I", "e2e-other", "-n", "root", "-V", "-5m:+1h", key+".pub")
	fail("user certificate from another CA", "the host must trust that CA (TrustedUserCAKeys)")
	keygen("-q", "-s", filepath.Join(d, "user_ca"), "-I", "e2e-old", "-n", "root", "-V", "20200101Z:20200102Z", key+".pub")
	fail("expired user certificate", "id_cert-cert.pub: expired (valid from 2020-01-01T00:00:00Z to 2020-01-02T00:00:00Z")
	keygen("-q", "-s", filepath.Join(d, "user_ca"), "-I", "e2e-root", "-n", "root", "-V", "-5m:+1h", key+".pub")
	if err := os.WriteFile(sshcfg, []byte(strings.Replace(cfg, "%h:%p", "%h:%p:%C", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	fail("unknown ProxyCommand token", sshcfg+" (Host "+c.hosts[0].Address+", line 2): ProxyCommand")
}

// firstLineWith returns the first line of text containing s (what a user reads), "" if none.
func firstLineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
