// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/schema"
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
	// Write writes the inventory file; nil means WriteFileAtomic.
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

// testState is a host's SSH test: running, or its result.
type testState struct {
	running bool
	res     SSHResult
}

type sshTestMsg struct {
	host string
	res  SSHResult
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
		opts.Write = WriteFileAtomic
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

// defaultKey returns the first of the usual private keys that exists in home/.ssh, as
// "~/.ssh/NAME", or "".
func defaultKey(home string) string {
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	for _, k := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		if _, err := os.Stat(filepath.Join(home, ".ssh", k)); err == nil {
			return "~/.ssh/" + k
		}
	}
	return ""
}

// backends lists the backend choices of a CNI type (inventory validation's lists).
func backends(cni string) []string {
	switch cni {
	case "calico":
		return []string{"VXLAN", "IPIP", "VXLANCrossSubnet", "IPIPCrossSubnet", "WireGuard", "None"}
	case "none":
		return []string{"-"}
	}
	return []string{"vxlan", "host-gw", "wireguard-native"}
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

func (w *Wizard) testing() bool {
	for _, t := range w.tests {
		if t.running {
			return true
		}
	}
	return false
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

func (w *Wizard) defaultUser() string {
	if u := w.cluster.value("user"); u != "" {
		return u
	}
	return "root"
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

// test starts the SSH test of host i.
func (w *Wizard) test(i int) tea.Cmd {
	c := w.build()
	h := c.Spec.Hosts[i]
	w.tests[h.Name] = testState{running: true}
	test, ctx := w.opts.Test, w.opts.Context
	run := func() tea.Msg { return sshTestMsg{host: h.Name, res: test(ctx, c, &h)} }
	return tea.Batch(run, w.spin.Tick)
}

// absPath is the inventory path made absolute (relative to the working directory).
func (w *Wizard) absPath() string {
	p := w.cluster.value("path")
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// build returns the inventory as the forms describe it. Source is the target file, so that
// relative paths resolve as Load will resolve them.
func (w *Wizard) build() *inventory.Cluster {
	c := &inventory.Cluster{APIVersion: inventory.APIVersion, Kind: inventory.Kind, Source: w.absPath()}
	c.Metadata.Name = w.cluster.value("name")
	c.Spec.SSH = inventory.SSH{User: w.cluster.value("user"), KeyPath: w.cluster.value("key"), KnownHosts: w.cluster.value("knownHosts")}
	k := &c.Spec.K3s
	if v := w.k3s.value("version"); k3s.IsRelease(v) {
		k.Version = v
	} else {
		k.Channel = v
	}
	k.Install = inventory.InstallMode(w.k3s.value("install"))
	if k.Install == inventory.Airgap {
		k.Airgap = map[string]inventory.AirgapArtifacts{w.k3s.value("arch"): {
			Binary: w.k3s.value("binary"), Images: w.k3s.value("images"), Checksums: w.k3s.value("checksums"),
		}}
	}
	c.Spec.CNI.Type = inventory.CNIType(w.net.value("cni"))
	if c.Spec.CNI.Type != inventory.CNINone {
		c.Spec.CNI.Backend = w.net.value("backend")
	}
	switch w.net.value("rancher") {
	case "install":
		c.Spec.Rancher = &inventory.Rancher{Install: &inventory.RancherInstall{Hostname: w.net.value("rancherHost"), Version: w.net.value("rancherVersion")}}
	case "register":
		c.Spec.Rancher = &inventory.Rancher{Register: &inventory.RancherRegister{URL: w.net.value("rancherURL"), APITokenEnv: w.net.value("tokenEnv")}}
	}
	c.Spec.Hosts = append([]inventory.Host(nil), w.hosts...)
	return c
}

// header is the comment the wizard writes at the top of the file. Its first line is the
// yaml-language-server modeline (schema.Modeline, docs/schema.md) naming the schema that
// `k3strap schema > cluster.schema.json` writes next to the inventory, so an editor checks and
// completes the file.
func (w *Wizard) header() []string {
	modeline := strings.TrimPrefix(schema.Modeline("./"+schema.FileName), "# ") // Marshal adds "# "
	return append([]string{modeline, "Written by `k3strap init`; edit freely."}, inventory.DefaultHeader()...)
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

// reviewHeight is the number of YAML lines the review screen shows.
func (w *Wizard) reviewHeight() int {
	n := w.height - 6 - min(len(w.problems), 4)
	if len(w.problems) > 0 {
		n--
	}
	return max(3, n)
}

// View renders the current screen.
func (w *Wizard) View() tea.View {
	v := tea.NewView(w.Render())
	v.AltScreen = true
	return v
}

// Render returns the current screen as text (with styles).
func (w *Wizard) Render() string {
	st := w.st
	width := max(40, w.width)
	lines := []string{st.title.Render("k3strap init") + st.dim.Render(" · ") + st.bold.Render(screenTitles[w.screen]), ""}
	var keys string
	switch w.screen {
	case scCluster:
		lines = append(lines, "Let's describe your cluster. Every answer can be changed later in the file.", "")
		lines = append(lines, w.cluster.view(st, width)...)
		keys = "enter next · tab/↑/↓ move · ctrl+c quit"
	case scHosts:
		lines = append(lines, w.hostsView(width)...)
		keys = "a add · e edit · d delete · t test SSH · T test all · n next · esc back"
		if w.deleting {
			keys = st.warn.Render(fmt.Sprintf("delete %s? y to confirm, any other key keeps it", w.hosts[w.selected].Name))
		}
	case scHost:
		verb := "Add a host"
		if w.editing >= 0 {
			verb = "Edit " + w.hosts[w.editing].Name
		}
		lines = append(lines, verb, "")
		lines = append(lines, w.host.view(st, width)...)
		keys = "enter next (on the last field: save) · tab/↑/↓ move · esc cancel"
	case scK3s:
		lines = append(lines, w.k3s.view(st, width)...)
		keys = "enter next · ←/→ choose · esc back"
	case scNetwork:
		lines = append(lines, w.net.view(st, width)...)
		keys = "enter next · ←/→ choose · esc back"
	case scReview:
		lines = append(lines, w.reviewView(width)...)
		keys = "w write the file · ↑/↓/space scroll · esc back"
	case scDone:
		lines = append(lines, w.doneView()...)
		keys = "p preflight · a apply · q quit"
		if len(w.result.Problems) > 0 {
			keys = "q quit"
		}
	}
	foot := []string{}
	if w.message != "" {
		foot = append(foot, st.warn.Render(w.message))
	}
	foot = append(foot, st.dim.Render(keys))
	room := max(1, w.height-1-len(foot))
	if len(lines) > room {
		lines = lines[:room]
	}
	for len(lines) < room {
		lines = append(lines, "")
	}
	lines = append(lines, foot...)
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, width, "…")
	}
	return strings.Join(lines, "\n")
}

func (w *Wizard) hostsView(width int) []string {
	st := w.st
	if len(w.hosts) == 0 {
		return []string{"No hosts yet. Press " + st.key.Render("a") + " to add the first one: it becomes the first server,",
			"which initialises the cluster. Add more servers for high availability (3 or 5), agents for workloads."}
	}
	nameW, addrW := 4, 7
	for _, h := range w.hosts {
		nameW, addrW = max(nameW, len(h.Name)), max(addrW, len(h.Address))
	}
	nameW, addrW = min(nameW, 16), min(addrW, 24)
	head := fmt.Sprintf("  %-*s  %-*s  %-7s  %-18s  %s", nameW, "NAME", addrW, "ADDRESS", "ROLE", "SSH", "CONNECTION TEST")
	lines := []string{st.dim.Render(head)}
	c := w.build()
	firstServer := true
	for i, h := range w.hosts {
		mark := "  "
		if i == w.selected {
			mark = st.accent.Render("› ")
		}
		sc := c.HostSSH(&c.Spec.Hosts[i])
		role := string(h.Role)
		if h.Role == inventory.RoleServer && firstServer {
			role += "*"
			firstServer = false
		}
		ssh := fmt.Sprintf("%s:%d", sc.User, sc.Port)
		var test string
		switch t, ok := w.tests[h.Name]; {
		case !ok:
			test = st.dim.Render("not tested (t)")
		case t.running:
			test = w.spin.View() + " connecting…"
		case t.res.OK:
			test = st.ok.Render("✓ ") + t.res.Detail + st.dim.Render(fmt.Sprintf(" (%.1fs)", t.res.Seconds))
		default:
			test = st.fail.Render("✗ ") + t.res.Detail
		}
		l := fmt.Sprintf("%s%-*s  %-*s  %-7s  %-18s  %s", mark, nameW, ansi.Truncate(h.Name, nameW, "…"), addrW, ansi.Truncate(h.Address, addrW, "…"), role, ansi.Truncate(ssh, 18, "…"), test)
		if i == w.selected {
			l = st.bold.Render(ansi.Strip(l[:0])) + l
		}
		lines = append(lines, l)
		if t, ok := w.tests[h.Name]; ok && t.res.HostKey != "" && !t.running {
			lines = append(lines, "    "+st.dim.Render(t.res.HostKey))
		}
		if len(h.Taints) > 0 {
			var ts []string
			for _, t := range h.Taints {
				ts = append(ts, t.String())
			}
			lines = append(lines, "    "+st.dim.Render("taints: "+strings.Join(ts, ", ")))
		}
	}
	lines = append(lines, "", st.dim.Render("* the first server initialises the cluster"))
	return lines
}

func (w *Wizard) reviewView(width int) []string {
	st := w.st
	var lines []string
	if len(w.problems) > 0 {
		lines = append(lines, st.fail.Render(fmt.Sprintf("✗ %d %s to fix (esc goes back; w writes it anyway):", len(w.problems), plural(len(w.problems), "problem", "problems"))))
		for i, p := range w.problems {
			if i == 4 {
				break
			}
			lines = append(lines, "  "+st.warn.Render(firstLineOf(p)))
		}
	} else {
		lines = append(lines, st.ok.Render("✓ valid")+st.dim.Render(" — this is the file that will be written to "+w.absPath()))
	}
	h := w.reviewHeight()
	end := min(len(w.yaml), w.scroll+h)
	for _, l := range w.yaml[w.scroll:end] {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			l = st.dim.Render(l)
		}
		lines = append(lines, "  "+l)
	}
	if end < len(w.yaml) {
		lines = append(lines, st.dim.Render(fmt.Sprintf("  … %d more lines (↓)", len(w.yaml)-end)))
	}
	return lines
}

func firstLineOf(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func (w *Wizard) doneView() []string {
	st := w.st
	r := w.result
	rel := w.cluster.value("path")
	lines := []string{st.ok.Render("✓ wrote ") + st.bold.Render(r.Path), "  Keep it in git: it holds no secrets.", ""}
	if len(r.Problems) > 0 {
		lines = append(lines, st.warn.Render(fmt.Sprintf("It has %d %s; fix them in the file, then check it with:", len(r.Problems), plural(len(r.Problems), "problem", "problems"))),
			"  "+st.key.Render("k3strap validate -f "+rel))
		return lines
	}
	return append(lines,
		"What now?",
		"  "+st.key.Render("p")+"  run preflight: connect to every host and check it, changing nothing",
		"  "+st.key.Render("a")+"  run apply: install K3s on every host and watch the first server come up",
		"  "+st.key.Render("q")+"  quit; later run "+st.key.Render("k3strap preflight -f "+rel)+" and "+st.key.Render("k3strap apply -f "+rel),
	)
}

// WriteFileAtomic writes data to path through a temporary file in the same directory renamed
// over path, so that an interrupted write leaves the old file or none (mode 0644: the
// inventory holds no secrets).
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".k3strap-init-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp, 0o644)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
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
