// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/internal/sshtest"
	"github.com/k3strap/k3strap/k3s"
)

// The real probe.sh, run by a local shell behind an SSH server and a real remote.Client, with
// stand-ins for systemctl and k3s that show the real node as it registers (the uninitialized
// taint on): the supervisor answers each tick with the nap the judge decided
// (bringup.GatePoll while the taint is on) over the probe's standard input, and the probe naps
// that long — ten ticks within seconds although --poll-interval is 5 s (the probe's own
// default without an answer: ten ticks would take 45 s).
func TestProbeNapsAsTheJudgeSays(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh: the probe script needs a POSIX shell")
	}
	dir := t.TempDir()
	raw, err := os.ReadFile("../testdata/real-k3s-v1.36.3/node-registered-uninitialized.json")
	if err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	if err := json.Unmarshal(raw, &n); err != nil {
		t.Fatal(err)
	}
	n.CreationTimestamp = metav1.Time{} // registered "now": the stall grace counts from the first look
	node, err := json.Marshal(&n)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("node.json", string(node))
	write("systemctl", "#!/bin/sh\ncase \"$1 $3\" in\n'is-active '*) echo activating ;;\n'show NRestarts') echo 0 ;;\nesac\n")
	write("k3s", "#!/bin/sh\ncase \"$*\" in\n*readyz*) echo ok ;;\n*'get node'*) cat "+filepath.Join(dir, "node.json")+" ;;\nesac\n")

	var mu sync.Mutex
	var stdin strings.Builder
	srv := sshtest.New(t, func(cmd string, in io.Reader, stdout, stderr io.Writer, done <-chan struct{}) int {
		// The probe's script arrives on standard input ahead of the naps (remote.Cmd: a long
		// script travels there, up to remote.ScriptEnd); the stub runs it with the rest.
		br := bufio.NewReader(in)
		var script strings.Builder
		for {
			l, err := br.ReadString('\n')
			if l == remote.ScriptEnd+"\n" {
				break
			}
			script.WriteString(l)
			if err != nil {
				return 0 // not a script sent on standard input: not the probe
			}
		}
		if !strings.Contains(script.String(), "@readyz") {
			return 0
		}
		// The command as sent, its script with the stub k3s, the naps recorded as they pass.
		c := exec.Command("sh", "-c", cmd)
		c.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		c.Stdin = io.MultiReader(strings.NewReader(strings.ReplaceAll(script.String(), k3s.PathBinary, filepath.Join(dir, "k3s"))+remote.ScriptEnd+"\n"),
			io.TeeReader(br, writerFunc(func(p []byte) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				return stdin.Write(p)
			})))
		c.Stdout, c.Stderr = stdout, stderr
		c.WaitDelay = time.Second
		if err := c.Start(); err != nil {
			t.Error(err)
			return 1
		}
		ended := make(chan struct{})
		go func() {
			select {
			case <-done:
				_ = c.Process.Kill()
			case <-ended:
			}
		}()
		_ = c.Wait()
		close(ended)
		return 0
	})
	sup, _ := testSupervisor(time.Time{})
	sup.s.in.opts.PollInterval = 5 * time.Second
	dialTest(t, srv, sup.hs, time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	answers := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Fields(stdin.String())
	}
	start := time.Now()
	go func() {
		for ctx.Err() == nil && len(answers()) < 10 {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	err = sup.run(ctx, convergeResult{})
	took := time.Since(start)
	got := answers()
	t.Logf("%d answers in %s: %v (run: %v)", len(got), took.Round(time.Millisecond), got, err)
	if len(got) < 10 {
		t.Fatalf("the probe got %d answers in %s", len(got), took)
	}
	for _, a := range got {
		if a != "0.10" {
			t.Fatalf("answers %q, want 0.10 (bringup.GatePoll) while the taint is on", got)
		}
	}
	if took > 20*time.Second {
		t.Errorf("ten ticks took %s: the probe did not nap as answered", took)
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
