// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// timelineInChromium writes r's JSON events to a file, draws them with `k3strap timeline` and
// renders the page in headless Chromium (Debian's chromium, installed by `make setup`): the
// rendered DOM must name every host in hosts and every milestone in milestones, and say the
// run succeeded. Without chromium it says so in the log and checks the page's HTML instead.
func (c *testCluster) timelineInChromium(r run, hosts, milestones []string) {
	c.t.Helper()
	dir := c.t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, []byte(r.stdout), 0o600); err != nil {
		c.t.Fatal(err)
	}
	page := filepath.Join(dir, "run.html")
	tl := c.k3strap(time.Minute, "timeline", "-f", events, "-O", page, "-o", "plain")
	if tl.code != 0 {
		c.t.Fatalf("k3strap timeline exited %d\nstdout:\n%s\nstderr:\n%s", tl.code, tl.stdout, tl.stderr)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		c.t.Fatal(err)
	}
	dom := string(html)
	if bin, err := exec.LookPath("chromium"); err != nil {
		c.t.Log("chromium not installed (make setup installs it): checking the timeline's HTML, not a rendered page")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "--headless", "--disable-gpu", "--no-sandbox",
			"--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+page).Output()
		if err != nil {
			c.t.Fatalf("chromium --dump-dom %s: %v", page, err)
		}
		dom = string(out)
	}
	for _, h := range hosts {
		if !strings.Contains(dom, ">"+h+"<") {
			c.t.Errorf("the rendered timeline has no row for host %s", h)
		}
	}
	for _, m := range milestones {
		if !strings.Contains(dom, m) {
			c.t.Errorf("the rendered timeline does not show milestone %s", m)
		}
	}
	if !strings.Contains(dom, "succeeded") {
		c.t.Error("the rendered timeline does not say the run succeeded")
	}
}
