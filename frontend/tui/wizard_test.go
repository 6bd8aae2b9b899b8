// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/schema"
)

// fakeSSH answers connection tests without a network: hosts whose address ends in .99 fail.
func fakeSSH(_ context.Context, c *inventory.Cluster, h *inventory.Host) SSHResult {
	sc := c.HostSSH(h)
	if strings.HasSuffix(h.Address, ".99") {
		return SSHResult{Detail: "auth failed: ssh: unable to authenticate, attempted methods [none publickey] (user \"" + sc.User + "\")", Seconds: 0.2}
	}
	return SSHResult{OK: true, Detail: fmt.Sprintf("%s@%s:%d · Linux 6.1.0-18-amd64 x86_64", sc.User, h.Address, sc.Port),
		HostKey: "recorded host key SHA256:Yx3lqkYV0b9oS1ZsA2X in " + c.ResolvePath(sc.KnownHosts) + " (trust on first use)", Seconds: 0.3}
}

// memWriter records what the wizard writes.
type memWriter struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (m *memWriter) write(path string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string][]byte{}
	}
	m.files[path] = data
	return nil
}

type keys struct {
	tm *teatest.TestModel
	p  *probe
}

// wait waits until the screen shows s.
func (k keys) wait(t *testing.T, s string) { t.Helper(); waitScreen(t, k.tm, k.p, s) }

func (k keys) typ(s string) { k.tm.Type(s) }
func (k keys) press(code rune, mod tea.KeyMod) {
	k.tm.Send(tea.KeyPressMsg{Code: code, Mod: mod})
}
func (k keys) enter() { k.press(tea.KeyEnter, 0) }
func (k keys) right() { k.press(tea.KeyRight, 0) }
func (k keys) up()    { k.press(tea.KeyUp, 0) }
func (k keys) clear() { k.press('u', tea.ModCtrl) }
func (k keys) enters(n int) {
	for range n {
		k.enter()
	}
}

// replace clears the focused text field and types s, then moves on.
func (k keys) replace(s string) { k.clear(); k.typ(s); k.enter() }

// walkToHosts types the cluster screen and adds two hosts (a server with a taint, an agent
// with its own user and port), then tests both connections.
func walkToHosts(t *testing.T, k keys, path, keyPath, knownHosts, agentAddr string) {
	k.replace("lab")
	k.replace(path)
	k.enter() // SSH user root
	k.replace(keyPath)
	k.replace(knownHosts)
	k.wait(t, "No hosts yet")
	// First host: the form proposes cp1 as a server.
	k.typ("a")
	k.enter() // name cp1
	k.replace("192.0.2.10")
	k.enters(4) // role server, user, key, port
	k.replace("dedicated=control-plane:NoSchedule")
	k.wait(t, "saved cp1")
	// Second host: an agent.
	k.typ("a")
	k.replace("edge-1")
	k.replace(agentAddr)
	k.enter() // role agent (proposed for a second host)
	k.replace("pi")
	k.enter() // key: cluster default
	k.replace("2222")
	k.enter() // no taints
	k.wait(t, "saved edge-1")
	k.typ("t")
	k.up()
	k.typ("t")
	k.wait(t, "192.0.2.10:22 · Linux")
}

func TestWizardWalkthrough(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"k3s", "images.tar.zst", "sha256sum-amd64.txt", "id_test"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "lab.yaml")
	w := NewWizard(WizardOptions{Path: "cluster.yaml", Test: fakeSSH, Home: dir})
	tm, p := newProbe(t, w, 120, 40)
	k := keys{tm, p}
	walkToHosts(t, k, path, filepath.Join(dir, "id_test"), filepath.Join(dir, "known_hosts"), "192.0.2.20")
	k.wait(t, "pi@192.0.2.20:2222 · Linux")
	k.typ("n")
	k.wait(t, "K3s release")
	k.enter() // release: the default
	k.right() // install: airgap
	k.enter()
	k.enter()        // arch amd64
	k.replace("k3s") // relative to the inventory file's directory
	k.replace(filepath.Join(dir, "images.tar.zst"))
	k.replace("sha256sum-amd64.txt")
	k.wait(t, "Pod network")
	k.right() // calico
	k.enter()
	k.enter() // backend VXLAN
	k.right()
	k.right() // rancher: register
	k.enter()
	k.replace("https://rancher.example.com")
	k.enter() // token variable RANCHER_TOKEN
	k.wait(t, "✓ valid")
	k.typ("w")
	k.wait(t, "What now?")
	k.typ("p")
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*probe).renderer.(*Wizard)

	res := fm.Result()
	if !res.Written || res.Path != path || res.Next != NextPreflight || len(res.Problems) > 0 {
		t.Fatalf("result %+v", res)
	}
	if err := os.WriteFile(path, []byte(strings.Join(fm.yaml, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The first line is the yaml-language-server modeline (editors check the file with it).
	if want := schema.Modeline("./" + schema.FileName); len(fm.yaml) == 0 || fm.yaml[0] != want {
		t.Errorf("first line of the written inventory = %q, want the modeline %q", fm.yaml[0], want)
	}
	c, err := inventory.Load(path, inventory.LoadOptions{})
	if err != nil {
		t.Fatalf("the wizard's inventory does not load: %v\n%s", err, strings.Join(fm.yaml, "\n"))
	}
	s := c.Spec
	checks := []struct {
		what      string
		got, want any
	}{
		{"name", c.Metadata.Name, "lab"},
		{"hosts", len(s.Hosts), 2},
		{"first server", c.FirstServer().Name, "cp1"},
		{"cp1 taint", s.Hosts[0].Taints[0].String(), "dedicated=control-plane:NoSchedule"},
		{"edge-1 role", s.Hosts[1].Role, inventory.RoleAgent},
		{"edge-1 user", s.Hosts[1].SSH.User, "pi"},
		{"edge-1 port", s.Hosts[1].SSH.Port, 2222},
		{"ssh key", s.SSH.KeyPath, filepath.Join(dir, "id_test")},
		{"version", s.K3s.Version, k3s.DefaultVersion},
		{"install", s.K3s.Install, inventory.Airgap},
		{"airgap binary", s.K3s.Airgap["amd64"].Binary, filepath.Join(dir, "k3s")},
		{"cni", s.CNI.Type, inventory.CNICalico},
		{"backend", s.CNI.Backend, "VXLAN"},
		{"rancher url", s.Rancher.Register.URL, "https://rancher.example.com"},
		{"rancher token env", s.Rancher.Register.APITokenEnv, "RANCHER_TOKEN"},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	text := strings.Join(fm.yaml, "\n")
	for _, want := range []string{"# Written by `k3strap init`", "binary: k3s", "# The machines."} {
		if !strings.Contains(text, want) {
			t.Errorf("written YAML lacks %q:\n%s", want, text)
		}
	}
}

// TestWizardValidation: bad answers are refused with a reason and the wizard stays put.
func TestWizardValidation(t *testing.T) {
	w := NewWizard(WizardOptions{Test: fakeSSH, Home: t.TempDir()})
	tm, p := newProbe(t, w, 100, 30)
	k := keys{tm, p}
	k.replace("Lab_1")
	k.enters(4)
	k.wait(t, `cluster name "Lab_1"`)
	k.up()
	k.up()
	k.up()
	k.up()
	k.replace("lab")
	k.enters(4)
	k.wait(t, "No hosts yet")
	k.typ("n")
	k.wait(t, "add at least one host")
	k.typ("a")
	k.enter()
	k.replace("192.0.2.10")
	k.enters(4)
	k.replace("dedicated:noschedule")
	k.wait(t, "effects are case-sensitive")
	k.replace("dedicated:NoSchedule")
	k.wait(t, "saved cp1")
	// Delete asks first.
	k.typ("d")
	k.wait(t, "delete cp1?")
	k.typ("y")
	k.wait(t, "removed cp1")
	k.press('c', tea.ModCtrl)
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*probe).renderer.(*Wizard)
	if fm.Result().Written || len(fm.hosts) != 0 {
		t.Fatalf("ctrl+c after deleting: %+v, %d hosts", fm.Result(), len(fm.hosts))
	}
}

// TestWizardFrames: golden frames of the hosts screen (with connection tests) and the review
// screen at 80x24 and 120x40.
func TestWizardFrames(t *testing.T) {
	for _, sz := range sizes {
		for _, screen := range []string{"hosts", "review"} {
			t.Run(fmt.Sprintf("%s-%dx%d", screen, sz.w, sz.h), func(t *testing.T) {
				mw := &memWriter{}
				w := NewWizard(WizardOptions{Test: fakeSSH, Home: t.TempDir(), Write: mw.write})
				tm, p := newProbe(t, w, sz.w, sz.h)
				k := keys{tm, p}
				walkToHosts(t, k, "/srv/lab/cluster.yaml", "~/.ssh/id_ed25519", "/srv/lab/known_hosts", "192.0.2.99")
				k.wait(t, "✗ auth failed")
				if screen == "review" {
					k.typ("n")
					k.enters(2) // default release, online
					k.enters(3) // flannel, vxlan, no Rancher
					k.wait(t, "Review")
				}
				if err := tm.Quit(); err != nil {
					t.Fatal(err)
				}
				fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*probe).renderer.(*Wizard)
				f := ansi.Strip(fm.Render()) + "\n"
				if n := strings.Count(f, "\n"); n > sz.h {
					t.Errorf("%d lines in a %d-line window", n, sz.h)
				}
				golden.RequireEqual(t, f)
			})
		}
	}
}
