// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/fleet/sitestatus"
)

// siteStatusFleet is a fleet of the one real cluster, reporting into itself as the management
// cluster.
const siteStatusFleet = `apiVersion: k3strap.io/v1alpha1
kind: Fleet
metadata:
  name: estate
spec:
  management:
    kubeconfig: mgmt.kubeconfig
  sites:
    - path: cluster.yaml
`

// TestRealSiteStatus (real K3s): one real K3s is the management cluster (docs/fleet.md
// "Status in a management cluster"). `fleet management install` applies the CRD (twice: it is
// idempotent); `fleet management credential` makes two pull sites' credentials (0600 files,
// the token never printed); site-a writes its status with its own credential and `k3s kubectl
// get sitestatuses` on the host shows it; with the real API site-a's credential gets 403
// reading, writing and patching site-b's object (and may read its own); a credential with a
// wrong token gets 401 with the regenerate fix, the token nowhere in the error. `k3strap check`
// on a fleet whose spec.management is that cluster reports the push site "real". `fleet
// status --output json` shows the push site and site-a with their reported fields, and site-b
// stale (never seen).
func TestRealSiteStatus(t *testing.T) {
	c := newRealCluster(t, 1)
	c.writeInventory(realSingleServer, nil)
	mgmt := filepath.Join(c.dir, "mgmt.kubeconfig")
	r := c.k3strap(5*time.Minute, "apply", "--kubeconfig-out", mgmt)
	if r.code != 0 {
		r.dump(t)
		t.Fatalf("apply of the management cluster: exit %d", r.code)
	}
	c.inv = "" // the fleet commands below take no inventory

	for range 2 {
		in := c.k3strap(2*time.Minute, "fleet", "management", "install", "--kubeconfig", mgmt, "--output", "plain")
		if in.code != 0 || !strings.Contains(in.stdout, "namespace k3strap-fleet and CRD sitestatuses.fleet.k3strap.io installed") {
			t.Fatalf("fleet management install: exit %d\n%s\n%s", in.code, in.stdout, in.stderr)
		}
	}
	creds := map[string]string{}
	for _, site := range []string{"site-a", "site-b"} {
		p := filepath.Join(c.dir, site+".kubeconfig")
		cr := c.k3strap(time.Minute, "fleet", "management", "credential", "--kubeconfig", mgmt, "--site", site, "--out", p, "--expiration", "48h", "--output", "plain")
		if cr.code != 0 || !strings.Contains(cr.stdout, "may get, update and patch only SiteStatus "+site) {
			t.Fatalf("credential of %s: exit %d\n%s\n%s", site, cr.code, cr.stdout, cr.stderr)
		}
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v, want 0600", p, err, st.Mode())
		}
		kc, err := clientcmd.LoadFromFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tok := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo].Token
		if len(tok) < 20 || strings.Contains(cr.stdout+cr.stderr, tok) {
			t.Fatalf("%s: token of %d bytes, printed: %v", site, len(tok), strings.Contains(cr.stdout+cr.stderr, tok))
		}
		creds[site] = p
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := time.Now().UTC().Truncate(time.Second)
	reachable := true
	want := sitestatus.Status{Source: sitestatus.SourcePull, Version: "v1.36.3+k3s1", NodesReady: 1, NodesTotal: 1,
		LastResult:    &sitestatus.Result{Command: "pull", ExitCode: 0, ExitMeaning: "success", Message: "converged to abc123", Time: seen},
		DoctorVerdict: "healthy", DesiredRevision: "abc123", AppliedRevision: "abc123", SourceReachable: &reachable, LastSeen: seen}
	if err := sitestatus.Write(ctx, creds["site-a"], "site-a", want); err != nil {
		t.Fatalf("site-a writing its own status: %v", err)
	}
	get := c.exec(0, "k3s", "kubectl", "get", "sitestatuses", "-n", "k3strap-fleet")
	t.Logf("k3s kubectl get sitestatuses -n k3strap-fleet:\n%s", get)
	if !strings.Contains(get, "LAST SEEN") || !regexpLine(get, `^site-a\s+pull\s+v1\.36\.3\+k3s1\s+1\s+1\s+success\s+healthy\s+\d+s`) || !regexpLine(get, `^site-b(\s|$)`) {
		t.Errorf("kubectl get sitestatuses does not show site-a's status and site-b")
	}

	// site-a's credential and site-b's object, with the real API.
	dynA := dynamicFor(t, creds["site-a"])
	res := dynA.Resource(sitestatus.GVR).Namespace(sitestatus.Namespace)
	if _, err := res.Get(ctx, "site-a", metav1.GetOptions{}); err != nil {
		t.Errorf("site-a reading its own object: %v", err)
	}
	if _, err := res.Get(ctx, "site-b", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("site-a reading site-b's object: %v, want 403", err)
	}
	if _, err := res.Patch(ctx, "site-b", types.MergePatchType, []byte(`{"spec":{"site":"hijacked"}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("site-a patching site-b's object: %v, want 403", err)
	}
	if _, err := res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "fleet.k3strap.io/v1alpha1", "kind": "SiteStatus",
		"metadata": map[string]any{"name": "site-c"}}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("site-a creating another object: %v, want 403", err)
	}
	err := sitestatus.Write(ctx, creds["site-a"], "site-b", want)
	var se *sitestatus.Error
	if !errors.As(err, &se) || se.Code != 403 || !strings.Contains(err.Error(), "this credential may write only its own site's status") {
		t.Errorf("site-a writing site-b's status: %v, want a 403 *sitestatus.Error saying so", err)
	}
	if _, err := sitestatus.Read(ctx, creds["site-a"]); err == nil || !strings.Contains(err.Error(), "403 Forbidden") {
		t.Errorf("site-a listing every status: %v, want 403", err)
	}

	// A token the API does not know (revoked, expired): 401 with the fix, the token unquoted.
	bad := filepath.Join(c.dir, "bad.kubeconfig")
	kc, _ := clientcmd.LoadFromFile(creds["site-a"])
	user := kc.Contexts[kc.CurrentContext].AuthInfo
	tok := kc.AuthInfos[user].Token
	kc.AuthInfos[user].Token = tok[:len(tok)-8] + "AAAAAAAA"
	if err := clientcmd.WriteToFile(*kc, bad); err != nil {
		t.Fatal(err)
	}
	err = sitestatus.Write(ctx, bad, "site-a", want)
	if !errors.As(err, &se) || se.Code != 401 || !strings.Contains(err.Error(), "regenerate") || strings.Contains(err.Error(), tok[:len(tok)-8]) {
		t.Errorf("a wrong token: %v, want a 401 with the regenerate fix and no token", err)
	}

	// A push site: check over a fleet whose spec.management is the same cluster.
	if err := os.WriteFile(filepath.Join(c.dir, "fleet.yaml"), []byte(siteStatusFleet), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := c.k3strap(3*time.Minute, "check", "-f", filepath.Join(c.dir, "fleet.yaml"))
	for _, e := range ch.events {
		if strings.Contains(e.Message, "not reported to the management cluster") {
			t.Errorf("check warned: %s", e.Message)
		}
	}
	if ch.code != 0 {
		ch.dump(t)
		t.Fatalf("fleet check: exit %d", ch.code)
	}

	st := c.k3strap(time.Minute, "fleet", "status", "-f", filepath.Join(c.dir, "fleet.yaml"), "--stale-after", "30m", "--output", "json")
	var rep fleet.Report
	if err := json.Unmarshal([]byte(st.stdout), &rep); st.code != 0 || err != nil {
		t.Fatalf("fleet status --output json: exit %d, %v\n%s\n%s", st.code, err, st.stdout, st.stderr)
	}
	t.Logf("fleet status: %s", st.stdout)
	by := map[string]fleet.SiteReport{}
	for _, s := range rep.Sites {
		by[s.Site] = s
	}
	if rep.Management == "" || rep.StaleAfter != "30m0s" || len(rep.Sites) != 3 {
		t.Errorf("report: management %q stale after %q, %d sites", rep.Management, rep.StaleAfter, len(rep.Sites))
	}
	if s := by["real"]; s.Source != "push" || s.Stale || s.Reported == nil || s.Reported.Version != "v1.36.3+k3s1" || s.Reported.NodesReady != 1 ||
		s.Reported.LastResult == nil || s.Reported.LastResult.Command != "check" || s.Reported.LastResult.ExitMeaning != "success" || s.Reported.DesiredRevision == "" {
		t.Errorf("push site real: %+v (reported %+v)", s, s.Reported)
	}
	if s := by["site-a"]; s.Source != "pull" || s.Stale || s.Status != "done" || s.Reported == nil || s.Reported.AppliedRevision != "abc123" ||
		s.Verdict != "healthy" || s.Cluster == nil || s.Cluster.Ready != 1 || !s.LastSeen.Equal(seen) {
		t.Errorf("pull site site-a: %+v (reported %+v)", s, s.Reported)
	}
	if s := by["site-b"]; s.Source != "pull" || !s.Stale || s.Reported != nil || !s.LastSeen.IsZero() || s.Status != "pending" {
		t.Errorf("site-b (never reported): %+v", s)
	}
	if rep.Totals.Stale != 1 || rep.Totals.Sites != 3 {
		t.Errorf("totals %+v", rep.Totals)
	}
}

// regexpLine reports whether a line of out matches the regular expression re.
func regexpLine(out, re string) bool {
	return regexp.MustCompile("(?m)" + re).MatchString(out)
}

// dynamicFor is a dynamic client with the kubeconfig file at p.
func dynamicFor(t *testing.T, p string) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", p)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 20 * time.Second
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
