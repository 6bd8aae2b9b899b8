// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"

	"github.com/k3strap/k3strap/internal/atomicfile"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// Next is what the user chose to do after the wizard wrote the inventory.
type Next string

// Choices at the end of the wizard.
const (
	NextNothing   Next = ""
	NextPreflight Next = "preflight"
	NextApply     Next = "apply"
)

// WizardOptions configure the init wizard.
type WizardOptions struct {
	// Path is the inventory file offered (default cluster.yaml).
	Path string
	// Test tries a host's SSH connection; nil means TestSSH.
	Test SSHTester
	// Write writes the inventory file; nil means atomicfile.WriteFile with mode 0644 (the inventory holds no secrets).
	Write func(path string, data []byte) error
	// Home is the user's home directory for the default SSH key; "" means os.UserHomeDir.
	Home string
	// Context bounds SSH tests; nil means context.Background().
	Context context.Context
}

// WizardResult is what the wizard produced.
type WizardResult struct {
	// Path is the inventory file (absolute) and Written whether it was written.
	Path    string
	Written bool
	// Problems are the validation errors of the written inventory (the user chose to write
	// it anyway); Next is NextNothing then.
	Problems []string
	// Next is what the user chose to run now.
	Next Next
}

type screen int

const (
	scCluster screen = iota
	scHosts
	scHost
	scK3s
	scNetwork
	scReview
	scDone
)

var screenTitles = map[screen]string{
	scCluster: "1/5 Cluster", scHosts: "2/5 Hosts", scHost: "2/5 Host", scK3s: "3/5 K3s",
	scNetwork: "4/5 Network and Rancher", scReview: "5/5 Review", scDone: "Written",
}

// Wizard is the bubbletea model of `k3strap init`.
type Wizard struct {
	opts   WizardOptions
	st     styles
	width  int
	height int
	spin   spinner.Model

	screen  screen
	cluster *form
	k3s     *form
	net     *form
	host    *form
	editing int // index of the host in the host form, -1 for a new one

	hosts    []inventory.Host
	selected int
	deleting bool
	tests    map[string]testState

	yaml     []string
	problems []string
	scroll   int
	armed    bool // w pressed once on an existing file

	message string // one status line (errors, confirmations)
	result  WizardResult
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// NewWizard returns the wizard model.
func NewWizard(opts WizardOptions) *Wizard {
	if opts.Path == "" {
		opts.Path = "cluster.yaml"
	}
	if opts.Test == nil {
		opts.Test = TestSSH
	}
	if opts.Write == nil {
		opts.Write = func(path string, data []byte) error { return atomicfile.WriteFile(path, data, 0o644) }
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	w := &Wizard{opts: opts, st: newStyles(), width: MinWidth, height: MinHeight, editing: -1, tests: map[string]testState{}}
	w.spin = spinner.New(spinner.WithSpinner(spinner.MiniDot), spinner.WithStyle(w.st.accent))
	w.cluster = newForm(
		textField("name", "Cluster name", "my-cluster", "", "The cluster's name: lower-case letters, digits and '-'. It names the kubeconfig context and file."),
		textField("path", "Inventory file", opts.Path, "", "Where the inventory is written: commented YAML to keep in git (no secrets go in it)."),
		textField("user", "SSH user", "", "root (or User from ~/.ssh/config)", "The user k3strap logs in as on every host (a host may override it). Not root? It needs sudo."),
		textField("key", "SSH key", defaultKey(opts.Home), "(ssh-agent only)", "Private key file for every host (a host may override it). Leave empty to use only the ssh-agent."),
		textField("knownHosts", "known_hosts", "", "~/.ssh/known_hosts", "Host keys are recorded here on first contact (trust on first use) and verified on every later run."),
	)
	w.k3s = newForm(
		textField("version", "K3s release", k3s.DefaultVersion, "", "A K3s release such as "+k3s.DefaultVersion+", or a channel (stable, latest, v1.36) for online installs."),
		choiceField("install", "Install mode", "online: each host downloads K3s itself. airgap: k3strap uploads the release files you downloaded (no internet needed on the hosts).", "online", "airgap"),
		choiceField("arch", "Hosts' arch", "The architecture of the hosts the airgap files are for (add more in the file later).", "amd64", "arm64", "arm"),
		textField("binary", "K3s binary", "", "./k3s", "The k3s binary of the release (k3s, k3s-arm64 or k3s-armhf); relative paths are relative to the inventory file."),
		textField("images", "Images archive", "", "./k3s-airgap-images-amd64.tar.zst", "The release's k3s-airgap-images-<arch>.tar.zst (optional)."),
		textField("checksums", "Checksums", "", "./sha256sum-amd64.txt", "The release's sha256sum-<arch>.txt (optional): the files are verified against it before upload."),
	)
	airgap := func() bool { return w.k3s.value("install") == "airgap" }
	for _, k := range []string{"arch", "binary", "images", "checksums"} {
		w.k3s.get(k).show = airgap
	}
	w.net = newForm(
		choiceField("cni", "Pod network (CNI)", "flannel is built into K3s. calico installs the Tigera operator. flannel-standalone runs flannel as a DaemonSet. none: bring your own.", "flannel", "calico", "flannel-standalone", "none"),
		choiceField("backend", "Backend", "How pod traffic crosses hosts. vxlan works everywhere; host-gw needs one L2 network; wireguard-native encrypts.", "vxlan", "host-gw", "wireguard-native"),
		choiceField("rancher", "Rancher", "install: Rancher on this cluster. register: k3strap creates this cluster in an existing Rancher through its API.", "none", "install", "register"),
		textField("rancherHost", "Rancher hostname", "", "<first server address>.sslip.io", "The name Rancher answers at; it must resolve to a server."),
		textField("rancherVersion", "Rancher version", "", "latest stable", "A Rancher chart version such as v2.12.1, or empty for the newest stable."),
		textField("rancherURL", "Rancher URL", "", "https://rancher.example.com", "The address of the Rancher to register with."),
		textField("tokenEnv", "API token variable", "RANCHER_TOKEN", "", "The environment variable that will hold a Rancher API key when you run apply (Rancher: account → API Keys). The key itself never goes in the file."),
	)
	w.net.get("backend").show = func() bool { return w.net.value("cni") != "none" }
	w.net.get("rancherHost").show = func() bool { return w.net.value("rancher") == "install" }
	w.net.get("rancherVersion").show = w.net.get("rancherHost").show
	w.net.get("rancherURL").show = func() bool { return w.net.value("rancher") == "register" }
	w.net.get("tokenEnv").show = w.net.get("rancherURL").show
	return w
}

// Result returns what the wizard produced (after the program ended).
func (w *Wizard) Result() WizardResult { return w.result }

// Init starts nothing: the wizard waits for keys.
func (w *Wizard) Init() tea.Cmd { return nil }

// Update handles keys, window sizes, SSH test results and spinner ticks.
func (w *Wizard) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		w.width, w.height = msg.Width, msg.Height
		return w, nil
	case sshTestMsg:
		w.tests[msg.host] = testState{res: msg.res}
		return w, nil
	case spinner.TickMsg:
		if !w.testing() {
			return w, nil
		}
		var cmd tea.Cmd
		w.spin, cmd = w.spin.Update(msg)
		return w, cmd
	case tea.KeyPressMsg:
		if msg.String() == "ctrl+c" {
			return w, tea.Quit
		}
		return w, w.key(msg)
	}
	return w, nil
}

func (w *Wizard) key(k tea.KeyPressMsg) tea.Cmd {
	w.message = ""
	switch w.screen {
	case scCluster:
		cmd, submit := w.cluster.key(k)
		if submit {
			if msg := w.checkCluster(); msg != "" {
				w.message = msg
				return nil
			}
			w.screen = scHosts
		}
		return cmd
	case scHosts:
		return w.hostsKey(k)
	case scHost:
		if k.String() == "esc" {
			w.screen = scHosts
			return nil
		}
		cmd, submit := w.host.key(k)
		if submit {
			w.saveHost()
		}
		return cmd
	case scK3s:
		if k.String() == "esc" {
			w.screen = scHosts
			return nil
		}
		cmd, submit := w.k3s.key(k)
		if submit {
			if msg := w.checkK3s(); msg != "" {
				w.message = msg
				return nil
			}
			w.screen = scNetwork
		}
		return cmd
	case scNetwork:
		if k.String() == "esc" {
			w.screen = scK3s
			return nil
		}
		before := w.net.value("cni")
		cmd, submit := w.net.key(k)
		if after := w.net.value("cni"); after != before {
			b := w.net.get("backend")
			b.choices, b.choice = backends(after), 0
		}
		if submit {
			w.enterReview()
		}
		return cmd
	case scReview:
		return w.reviewKey(k)
	case scDone:
		switch k.String() {
		case "p":
			if len(w.result.Problems) == 0 {
				w.result.Next = NextPreflight
				return tea.Quit
			}
		case "a":
			if len(w.result.Problems) == 0 {
				w.result.Next = NextApply
				return tea.Quit
			}
		case "q", "enter", "esc":
			return tea.Quit
		}
	}
	return nil
}

func (w *Wizard) checkCluster() string {
	if n := w.cluster.value("name"); !nameRE.MatchString(n) || len(n) > 63 || strings.Contains(n, ".") {
		return fmt.Sprintf("cluster name %q: use at most 63 lower-case letters, digits and '-'", n)
	}
	if w.cluster.value("path") == "" {
		return "give the inventory file a name, e.g. cluster.yaml"
	}
	return ""
}

func (w *Wizard) checkK3s() string {
	v := w.k3s.value("version")
	if v == "" {
		return "give a K3s release (e.g. " + k3s.DefaultVersion + ") or a channel (stable)"
	}
	if w.k3s.value("install") == "airgap" {
		if !k3s.IsRelease(v) {
			return "an airgap install needs a fixed release such as " + k3s.DefaultVersion + " (the one the binary is)"
		}
		if w.k3s.value("binary") == "" {
			return "an airgap install needs the path of the k3s binary"
		}
	}
	return ""
}

func (w *Wizard) hostsKey(k tea.KeyPressMsg) tea.Cmd {
	if w.deleting {
		w.deleting = false
		if k.String() == "y" && w.selected < len(w.hosts) {
			name := w.hosts[w.selected].Name
			w.hosts = append(w.hosts[:w.selected], w.hosts[w.selected+1:]...)
			delete(w.tests, name)
			w.selected = max(0, min(w.selected, len(w.hosts)-1))
			w.message = "removed " + name
		}
		return nil
	}
	switch k.String() {
	case "up", "k":
		w.selected = max(0, w.selected-1)
	case "down", "j":
		w.selected = min(max(0, len(w.hosts)-1), w.selected+1)
	case "a", "+":
		w.openHost(-1)
	case "e", "enter":
		if len(w.hosts) > 0 {
			w.openHost(w.selected)
		} else {
			w.openHost(-1)
		}
	case "d", "x", "delete":
		if len(w.hosts) > 0 {
			w.deleting = true
		}
	case "t":
		if len(w.hosts) > 0 {
			return w.test(w.selected)
		}
	case "T":
		var cmds []tea.Cmd
		for i := range w.hosts {
			cmds = append(cmds, w.test(i))
		}
		return tea.Batch(cmds...)
	case "n", "tab":
		if msg := w.checkHosts(); msg != "" {
			w.message = msg
			return nil
		}
		w.screen = scK3s
	case "esc", "b":
		w.screen = scCluster
	}
	return nil
}

func (w *Wizard) checkHosts() string {
	if len(w.hosts) == 0 {
		return "add at least one host (a)"
	}
	for _, h := range w.hosts {
		if h.Role == inventory.RoleServer {
			return ""
		}
	}
	return "at least one host must be a server: the first server initialises the cluster"
}

// openHost opens the host form for host i, or for a new host when i < 0.
func (w *Wizard) openHost(i int) {
	h := inventory.Host{Role: inventory.RoleAgent}
	if i < 0 {
		servers := 0
		for _, x := range w.hosts {
			if x.Role == inventory.RoleServer {
				servers++
			}
		}
		if servers == 0 {
			h.Role = inventory.RoleServer
			h.Name = "cp1"
		} else {
			h.Name = fmt.Sprintf("node%d", len(w.hosts)+1)
		}
	} else {
		h = w.hosts[i]
	}
	port := ""
	if h.SSH.Port != 0 {
		port = strconv.Itoa(h.SSH.Port)
	}
	var taints []string
	for _, t := range h.Taints {
		taints = append(taints, t.String())
	}
	role := choiceField("role", "Role", "server: runs the control plane (the first server initialises the cluster; keep an odd number of servers). agent: runs workloads only.", "server", "agent")
	w.host = newForm(
		textField("name", "Name", h.Name, "", "The Kubernetes node name: lower-case letters, digits, '-' and '.'."),
		textField("address", "Address", h.Address, "192.0.2.10 or host.example.com", "How this machine reaches the host over SSH: an IP address or a DNS name."),
		role,
		textField("user", "SSH user", h.SSH.User, "(cluster default: "+w.defaultUser()+")", "Leave empty to use the cluster's SSH user."),
		textField("key", "SSH key", h.SSH.KeyPath, "(cluster default)", "Leave empty to use the cluster's SSH key."),
		textField("port", "SSH port", port, "22", "The host's SSH port."),
		textField("taints", "Taints", strings.Join(taints, ", "), "none", "Comma-separated key[=value]:Effect, e.g. dedicated=edge:NoSchedule (effects: NoSchedule, PreferNoSchedule, NoExecute)."),
	)
	w.host.set("role", string(h.Role))
	w.editing = i
	w.screen = scHost
	w.message = ""
}

// saveHost validates the host form and stores the host.
func (w *Wizard) saveHost() {
	f := w.host
	h := inventory.Host{Name: f.value("name"), Address: f.value("address"), Role: inventory.Role(f.value("role"))}
	if w.editing >= 0 {
		old := w.hosts[w.editing]
		h.Labels, h.K3s, h.SSH = old.Labels, old.K3s, old.SSH
	}
	h.SSH.User, h.SSH.KeyPath, h.SSH.Port = f.value("user"), f.value("key"), 0
	switch {
	case !nameRE.MatchString(h.Name) || len(h.Name) > 253:
		w.message = fmt.Sprintf("name %q: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", h.Name)
		return
	case h.Address == "":
		w.message = "give the host's address (IP or DNS name)"
		return
	}
	for i, x := range w.hosts {
		if i != w.editing && x.Name == h.Name {
			w.message = fmt.Sprintf("there is already a host named %s", h.Name)
			return
		}
	}
	if p := f.value("port"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			w.message = fmt.Sprintf("SSH port %q: give a number between 1 and 65535", p)
			return
		}
		h.SSH.Port = n
	}
	h.Taints = nil
	for _, s := range strings.Split(f.value("taints"), ",") {
		if s = strings.TrimSpace(s); s == "" || s == "none" {
			continue
		}
		t, err := inventory.ParseTaint(s)
		if err != nil {
			w.message = err.Error()
			return
		}
		h.Taints = append(h.Taints, t)
	}
	if w.editing >= 0 {
		if old := w.hosts[w.editing]; old.Name != h.Name || old.Address != h.Address || !reflect.DeepEqual(old.SSH, h.SSH) {
			delete(w.tests, old.Name)
		}
		w.hosts[w.editing] = h
		w.selected = w.editing
	} else {
		w.hosts = append(w.hosts, h)
		w.selected = len(w.hosts) - 1
	}
	w.screen = scHosts
	w.message = "saved " + h.Name + " — t tests its SSH connection"
}

// enterReview renders and validates the inventory for the review screen.
func (w *Wizard) enterReview() {
	c := w.build()
	b, err := inventory.Marshal(c, inventory.WriteOptions{Header: w.header()})
	w.problems = nil
	if err != nil {
		w.problems = []string{err.Error()}
	} else if _, err := inventory.Parse(c.Source, b, inventory.LoadOptions{}); err != nil {
		var el inventory.ErrorList
		if errors.As(err, &el) {
			for _, e := range el {
				w.problems = append(w.problems, e.Error())
			}
		} else {
			w.problems = []string{err.Error()}
		}
	}
	w.yaml = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	w.scroll, w.armed = 0, false
	w.screen = scReview
}

func (w *Wizard) reviewKey(k tea.KeyPressMsg) tea.Cmd {
	page := max(1, w.reviewHeight()-1)
	switch k.String() {
	case "esc", "b":
		w.screen = scNetwork
	case "up", "k":
		w.scroll--
	case "down", "j":
		w.scroll++
	case "pgup", "ctrl+b":
		w.scroll -= page
	case "pgdown", "ctrl+f", "space":
		w.scroll += page
	case "w":
		path := w.absPath()
		if _, err := os.Stat(path); err == nil && !w.armed {
			w.armed = true
			w.message = fmt.Sprintf("%s exists: press w again to replace it, esc to go back", path)
			return nil
		}
		data := []byte(strings.Join(w.yaml, "\n") + "\n")
		if err := w.opts.Write(path, data); err != nil {
			w.message = "writing failed: " + err.Error()
			return nil
		}
		w.result = WizardResult{Path: path, Written: true, Problems: w.problems}
		w.screen = scDone
	}
	w.scroll = max(0, min(w.scroll, len(w.yaml)-w.reviewHeight()))
	return nil
}

// RunWizard runs the wizard on term and returns what it produced. The program uses the
// alternate screen; the terminal is restored when it returns.
func RunWizard(term Terminal, opts WizardOptions) (WizardResult, error) {
	w := NewWizard(opts)
	p := tea.NewProgram(w, term.options()...)
	if _, err := p.Run(); err != nil {
		return WizardResult{}, err
	}
	return w.Result(), nil
}
