// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"al.essio.dev/pkg/shellescape"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

// Real-terminal tests of the terminal UI: k3strap runs in a tmux pane (a real
// pseudo-terminal), keys are typed with `tmux send-keys`, and the screen is read back with
// `tmux capture-pane`.

// tmuxPane is one k3strap command running in its own tmux server.
type tmuxPane struct {
	t    *testing.T
	sock string
}

const exitMarker = "K3STRAP-EXIT="

// startTmux runs argv (in dir, with env added) in a w×h tmux pane; after the command the pane
// prints K3STRAP-EXIT=<code> and stays open for capture-pane.
func startTmux(t *testing.T, w, h int, dir string, env []string, argv ...string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (apt-get install tmux); the real-terminal tests need it")
	}
	p := &tmuxPane{t: t, sock: fmt.Sprintf("k3strap-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())}
	script := "cd " + shellescape.Quote(dir) + " && env " + shellescape.QuoteCommand(append(env, argv...)) +
		"; echo " + exitMarker + "$?; sleep 3600"
	// The pane starts idle so that its options are set before k3strap draws: tmux's
	// scroll-on-clear would copy each full redraw of a frame at the top of the screen into
	// the history, which is not what a terminal shows.
	p.tmux("new-session", "-d", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), "-s", "k", "sleep", "3600")
	p.tmux("set-option", "-w", "-t", "k", "scroll-on-clear", "off")
	if raw := os.Getenv("K3STRAP_E2E_TMUX_RAW"); raw != "" { // debugging: the raw terminal output
		p.tmux("pipe-pane", "-o", "-t", "k", "cat >> "+shellescape.Quote(raw))
	}
	p.tmux("respawn-pane", "-k", "-t", "k", "sh", "-c", script)
	socket := strings.TrimSpace(p.tmux("display-message", "-p", "#{socket_path}"))
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-L", p.sock, "kill-server").Run()
		_ = os.Remove(socket)
	})
	return p
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// keys sends tmux key names (Enter, C-u, Right, ...) or literal words.
func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	p.tmux(append([]string{"send-keys", "-t", "k"}, keys...)...)
}

// text types s literally.
func (p *tmuxPane) text(s string) {
	p.t.Helper()
	p.tmux("send-keys", "-t", "k", "-l", s)
}

// replace clears the focused wizard field (ctrl+u), types s and presses Enter.
func (p *tmuxPane) replace(s string) {
	p.t.Helper()
	p.keys("C-u")
	p.text(s)
	p.keys("Enter")
}

// screen returns the pane's text (scrollback included).
func (p *tmuxPane) screen() string {
	p.t.Helper()
	return p.tmux("capture-pane", "-p", "-t", "k", "-S", "-200")
}

// waitFor waits until the screen shows s and returns it.
func (p *tmuxPane) waitFor(s string, timeout time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	var scr string
	for time.Now().Before(deadline) {
		if scr = p.screen(); strings.Contains(scr, s) {
			return scr
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("the terminal never showed %q within %s; screen:\n%s", s, timeout, scr)
	return ""
}

var exitRE = regexp.MustCompile(exitMarker + `(\d+)`)

// exitCode waits for the command to end and returns its exit code and the screen.
func (p *tmuxPane) exitCode(timeout time.Duration) (int, string) {
	p.t.Helper()
	scr := p.waitFor(exitMarker, timeout)
	m := exitRE.FindStringSubmatch(scr)
	if m == nil {
		p.t.Fatalf("no exit code on screen:\n%s", scr)
	}
	code, _ := strconv.Atoi(m[1])
	return code, scr
}

// settle waits until the freshly reset hosts finished booting (systemd reports running or
// degraded): sshd answers before logind and friends are up, and a session opened in between
// can be closed on the client (seen as "EOF" when a command starts).
func settle(t *testing.T, c *testCluster) {
	t.Helper()
	for _, h := range c.hosts {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, _ := c.h.Exec(ctx, h.Index, "systemctl", "is-system-running", "--wait")
		cancel()
		if st := strings.TrimSpace(string(out)); st != "running" && st != "degraded" {
			t.Logf("host %s: systemd state %q after waiting", h.Name, st)
		}
	}
}

// TestTUIInit types through `k3strap init` in a real terminal: cluster, one host (whose SSH
// connection is tested live against a throw-away host, recording its key), an airgap K3s with
// the simulator's artifacts, the default network, the review; writes the file and runs
// preflight from the wizard. The written inventory must load and say what was typed.
func TestTUIInit(t *testing.T) {
	c := newCluster(t, 1)
	settle(t, c)
	home := filepath.Join(c.dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(c.dir, "lab.yaml")
	addr := c.hosts[0].Address
	p := startTmux(t, 120, 40, c.dir, []string{"HOME=" + home, "TERM=xterm-256color"}, c.bin.k3strap, "init", "-f", "lab.yaml")

	p.waitFor("1/5 Cluster", 30*time.Second)
	p.replace("lab")
	p.keys("Enter") // the file: lab.yaml from -f
	p.keys("Enter") // SSH user: root by default
	p.replace(c.h.KeyPath())
	p.keys("Enter") // known_hosts: ~/.ssh/known_hosts
	p.waitFor("No hosts yet", 10*time.Second)

	p.keys("a")
	p.waitFor("Add a host", 10*time.Second)
	p.keys("Enter") // name: cp1
	p.text(addr)
	p.keys("Enter", "Enter", "Enter", "Enter", "Enter") // role server, user, key, port
	p.text("dedicated=edge:NoSchedule")
	p.keys("Enter")
	p.waitFor("saved cp1", 10*time.Second)
	p.keys("t")
	scr := p.waitFor("✓ root@"+addr+":22", 40*time.Second)
	if !strings.Contains(scr, "recorded host key SHA256:") {
		t.Errorf("the SSH test did not report the recorded host key:\n%s", scr)
	}

	p.keys("n")
	p.waitFor("K3s release", 10*time.Second)
	p.keys("Enter")          // release: the default, the simulator's
	p.keys("Right", "Enter") // install: airgap
	p.keys("Enter")          // arch: amd64
	p.replace(filepath.Join(c.bin.artifacts, "k3s"))
	p.replace(filepath.Join(c.bin.artifacts, "k3s-airgap-images-amd64.tar.zst"))
	p.replace(filepath.Join(c.bin.artifacts, "sha256sum-amd64.txt"))
	p.waitFor("Pod network", 10*time.Second)
	p.keys("Enter", "Enter", "Enter") // flannel, vxlan, no Rancher
	p.waitFor("✓ valid", 10*time.Second)
	p.keys("w")
	p.waitFor("What now?", 10*time.Second)
	p.keys("p")
	code, scr := p.exitCode(3 * time.Minute)
	t.Logf("screen after preflight:\n%s", scr)
	// One server with a NoSchedule taint and no other node: preflight's FirstNodeTaints error
	// (the packaged add-ons could not schedule), shown with its fix; exit 3.
	if code != 3 {
		t.Fatalf("init → preflight exited %d, want 3 (FirstNodeTaints)", code)
	}
	for _, want := range []string{"wrote " + inv, "k3strap preflight · cluster lab · 1 host", "✗ failed (exit 3)",
		"Preflight  ✗", "ERROR   cp1  FirstNodeTaints", "fix: ", "✗ preflight failed", "exit 3 (preflight failed)"} {
		if !strings.Contains(scr, want) {
			t.Errorf("screen lacks %q", want)
		}
	}

	// The file: commented, loads, says what was typed.
	raw, err := os.ReadFile(inv)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("# Written by `k3strap init`")) {
		t.Errorf("no header comment:\n%s", raw)
	}
	got, err := inventory.Load(inv, inventory.LoadOptions{})
	if err != nil {
		t.Fatalf("the written inventory does not load: %v\n%s", err, raw)
	}
	h := got.Spec.Hosts
	if got.Metadata.Name != "lab" || len(h) != 1 || h[0].Name != "cp1" || h[0].Address != addr || h[0].Role != inventory.RoleServer ||
		len(h[0].Taints) != 1 || h[0].Taints[0].String() != "dedicated=edge:NoSchedule" ||
		got.Spec.K3s.Version != "v1.36.3+k3s1" || got.Spec.K3s.Install != inventory.Airgap || got.Spec.SSH.KeyPath != c.h.KeyPath() {
		t.Errorf("the inventory does not say what was typed:\n%s", raw)
	}
	kh, err := os.ReadFile(filepath.Join(home, ".ssh", "known_hosts"))
	if err != nil || !strings.Contains(string(kh), addr) {
		t.Errorf("the host key was not recorded in ~/.ssh/known_hosts: %v\n%s", err, kh)
	}
}

// TestTUIApply runs `k3strap apply` in a real 120x40 terminal: q cancels a first run (exit 130,
// said on the dashboard); the second run installs the throw-away host and the finished
// dashboard, read with capture-pane, shows the host, the bring-up timeline and the summary.
// A third, headless run (--output json) is validated line by line against the event schema.
func TestTUIApply(t *testing.T) {
	c := newCluster(t, 1)
	settle(t, c)
	t.Cleanup(func() {
		if t.Failed() { // what sshd on the host went through: the installer's transport errors
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, _ := c.h.Exec(ctx, c.hosts[0].Index, "sh", "-c", "journalctl -b --no-pager | grep -v ' k3s\\[' | tail -n 80; ss -ltnp; iptables-save 2>&1 | head -40; ip route")
			t.Logf("host %s after the failure:\n%s", c.hosts[0].Name, out)
		}
	})
	inv := c.writeInventory(singleServer, nil)
	kc := filepath.Join(c.dir, "e2e.kubeconfig")
	env := []string{"TERM=xterm-256color", "NO_COLOR=1"}

	// A run cancelled with q as soon as the dashboard is up.
	p := startTmux(t, 120, 40, c.dir, env, c.bin.k3strap, "apply", "-f", inv, "--kubeconfig-out", kc)
	p.waitFor("q cancel", 30*time.Second)
	p.keys("q")
	code, scr := p.exitCode(2 * time.Minute)
	if code != 130 || !strings.Contains(scr, "exit 130 (cancelled)") {
		t.Fatalf("q: exit %d, screen:\n%s", code, scr)
	}

	// The real run, to the end.
	p = startTmux(t, 120, 40, c.dir, env, c.bin.k3strap, "apply", "-f", inv, "--kubeconfig-out", kc)
	code, scr = p.exitCode(4 * time.Minute)
	t.Logf("finished dashboard:\n%s", scr)
	if code != 0 {
		t.Fatalf("apply exited %d", code)
	}
	for _, want := range []string{
		"k3strap apply · cluster e2e · 1 host", "✓ done",
		"cp1", "server*", c.hosts[0].Address,
		"Preflight", "Bring-up  cp1 (first server)",
		"service-active", "api-ready", "node-registered", "uninitialized-taint-gone", "podcidr-set", "subnet-env", "node-ready",
		"✓ apply succeeded", "kubeconfig  " + kc, "next        export KUBECONFIG=" + kc, "kubectl get nodes",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("the finished dashboard lacks %q", want)
		}
	}
	if regexp.MustCompile(`\x1b\[`).MatchString(scr) {
		t.Error("escape sequences in the captured text")
	}
	token := c.exec(0, "cat", "/etc/rancher/k3s/cluster-token")
	if strings.Contains(scr, token) {
		t.Error("the token appears on the dashboard")
	}

	// Headless: every --output json line is valid against events/schema.json.
	r := c.k3strap(2*time.Minute, "apply", "--kubeconfig-out", kc, "--verbose")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("json apply exited %d", r.code)
	}
	schema := compileEventSchema(t)
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		lines++
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(sc.Text()))
		if err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("event does not match the schema: %s\n%v", sc.Text(), err)
		}
	}
	if lines == 0 || len(r.ofType(events.Summary)) != 1 {
		t.Fatalf("%d JSON lines, %d summaries", lines, len(r.ofType(events.Summary)))
	}
	if strings.Contains(r.stdout, token) {
		t.Error("the token appears in the JSON events")
	}
}

func compileEventSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(events.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	comp.AssertFormat()
	if err := comp.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := comp.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
