// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sitestatus

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// fakeAPI is a small Kubernetes API for the SiteStatus resource: objects by name, and per
// bearer token the sites it may write ("*": every site, and list). A token it does not know
// gets 401. Its 403 message quotes the Authorization header, so that a test sees whether an
// error could carry the token.
type fakeAPI struct {
	mu      sync.Mutex
	objects map[string]map[string]any
	may     map[string]string // token → site ("*" for an operator)
	applied map[string]map[string]any
	reqs    []string
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{objects: map[string]map[string]any{}, may: map[string]string{}, applied: map[string]map[string]any{}}
}

const base = "/apis/fleet.k3strap.io/v1alpha1/namespaces/k3strap-fleet/sitestatuses"

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": msg, "reason": reason, "code": code})
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r.Method+" "+r.URL.Path)
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	who, ok := f.may[tok]
	if !ok {
		status(w, 401, "Unauthorized", "Unauthorized")
		return
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && p == base:
		if who != "*" {
			status(w, 403, "Forbidden", "sitestatuses is forbidden for "+r.Header.Get("Authorization"))
			return
		}
		var items []any
		for _, o := range f.objects {
			items = append(items, o)
		}
		json.NewEncoder(w).Encode(map[string]any{"apiVersion": "fleet.k3strap.io/v1alpha1", "kind": "SiteStatusList", "metadata": map[string]any{}, "items": items})
	case r.Method == http.MethodPatch && strings.HasPrefix(p, base+"/") && strings.HasSuffix(p, "/status"):
		name := strings.TrimSuffix(strings.TrimPrefix(p, base+"/"), "/status")
		if who != "*" && who != name {
			status(w, 403, "Forbidden", fmt.Sprintf("sitestatuses %q is forbidden: cannot patch (credential %s)", name, r.Header.Get("Authorization")))
			return
		}
		o := f.objects[name]
		if o == nil {
			status(w, 404, "NotFound", fmt.Sprintf("sitestatuses %q not found", name))
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json-patch+json" {
			status(w, 415, "UnsupportedMediaType", ct)
			return
		}
		var ops []struct {
			Op, Path string
			Value    map[string]any
		}
		if err := json.Unmarshal(body, &ops); err != nil || len(ops) != 1 || ops[0].Op != "add" || ops[0].Path != "/status" {
			status(w, 422, "Invalid", "bad patch")
			return
		}
		o["status"] = ops[0].Value
		json.NewEncoder(w).Encode(o)
	case r.Method == http.MethodPost && p == base:
		var o map[string]any
		json.Unmarshal(body, &o)
		name := o["metadata"].(map[string]any)["name"].(string)
		if f.objects[name] != nil {
			status(w, 409, "AlreadyExists", "exists")
			return
		}
		o["metadata"].(map[string]any)["creationTimestamp"] = "2026-11-27T01:00:00Z"
		f.objects[name] = o
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(o)
	case r.Method == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml":
		var o map[string]any
		json.Unmarshal(body, &o)
		f.applied[p] = o
		json.NewEncoder(w).Encode(o)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/token"):
		var tr map[string]any
		json.Unmarshal(body, &tr)
		secs := tr["spec"].(map[string]any)["expirationSeconds"].(float64)
		sa := strings.TrimSuffix(strings.TrimPrefix(p, "/api/v1/namespaces/k3strap-fleet/serviceaccounts/"), "/token")
		tok := "token-of-" + sa
		f.may[tok] = strings.TrimPrefix(sa, "site-")
		tr["status"] = map[string]any{"token": tok, "expirationTimestamp": time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC).Add(time.Duration(secs) * time.Second).Format(time.RFC3339)}
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(tr)
	default:
		status(w, 404, "NotFound", "no route "+r.Method+" "+p)
	}
}

// servers maps a test server's URL to its certificate (PEM) for kubeconfigFor.
var servers sync.Map

// newTLS starts an HTTPS test server (client-go sends a bearer token over TLS only).
func newTLS(h http.Handler) *httptest.Server {
	srv := httptest.NewTLSServer(h)
	servers.Store(srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	return srv
}

// kubeconfigFor writes a kubeconfig of server (started by newTLS) with token.
func kubeconfigFor(t *testing.T, server, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kc")
	ca, _ := servers.Load(server)
	body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: %s\n    certificate-authority-data: %s\nusers:\n- name: u\n  user:\n    token: %s\ncontexts:\n- name: c\n  context: {cluster: m, user: u}\ncurrent-context: c\n", server, base64.StdEncoding.EncodeToString(ca.([]byte)), token)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fakeAPI) add(name string) {
	f.objects[name] = map[string]any{"apiVersion": "fleet.k3strap.io/v1alpha1", "kind": "SiteStatus",
		"metadata": map[string]any{"name": name, "namespace": Namespace, "creationTimestamp": "2026-11-27T00:00:00Z"}, "spec": map[string]any{"site": name}}
}

func TestWriteThenRead(t *testing.T) {
	api := newFakeAPI()
	api.add("alpha")
	api.add("beta")
	api.may["secret-alpha"], api.may["op"] = "alpha", "*"
	srv := newTLS(api)
	defer srv.Close()
	seen := time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC)
	reachable := false
	want := Status{Source: SourcePull, Version: "v1.36.3+k3s1", NodesReady: 2, NodesTotal: 3,
		LastResult:    &Result{Command: "pull", ExitCode: 4, ExitMeaning: "a host step failed", Message: "step k3s-install failed", Time: seen},
		DoctorVerdict: "warnings", DesiredRevision: "abc123", AppliedRevision: "abc000",
		SourceReachable: &reachable, SourceMessage: "git fetch: connection refused", LastSeen: seen}
	if err := Write(context.Background(), kubeconfigFor(t, srv.URL, "secret-alpha"), "alpha", want); err != nil {
		t.Fatal(err)
	}
	sites, err := Read(context.Background(), kubeconfigFor(t, srv.URL, "op"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) != 2 || sites[0].Name != "alpha" || sites[1].Name != "beta" {
		t.Fatalf("sites %+v, want alpha and beta in order", sites)
	}
	a, b := sites[0], sites[1]
	if !a.Reported || b.Reported {
		t.Errorf("reported: alpha %v beta %v, want true false", a.Reported, b.Reported)
	}
	got, _ := json.Marshal(a.Status)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("read back\n%s\nwant\n%s", got, exp)
	}
	if !b.Created.Equal(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("beta created %v", b.Created)
	}
	// A second write replaces the whole status: fields left empty are cleared.
	if err := Write(context.Background(), kubeconfigFor(t, srv.URL, "secret-alpha"), "alpha", Status{Source: SourcePull, LastSeen: seen}); err != nil {
		t.Fatal(err)
	}
	sites, _ = Read(context.Background(), kubeconfigFor(t, srv.URL, "op"))
	if s := sites[0].Status; s.LastResult != nil || s.Version != "" || s.SourceReachable != nil {
		t.Errorf("second write kept old fields: %+v", s)
	}
}

func TestStale(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		seen  time.Time
		stale bool
	}{{time.Time{}, true}, {now.Add(-59 * time.Minute), false}, {now.Add(-61 * time.Minute), true}, {now, false}} {
		if got := (Site{Status: Status{LastSeen: c.seen}}).Stale(now, time.Hour); got != c.stale {
			t.Errorf("last seen %v: stale %v, want %v", c.seen, got, c.stale)
		}
	}
}

// TestWriteErrors: each refusal names what failed and its fix, and never the token — the fake
// API's 403 quotes the Authorization header as a careless server might.
func TestWriteErrors(t *testing.T) {
	api := newFakeAPI()
	api.add("alpha")
	api.add("beta")
	api.may["secret-alpha-0123456789"] = "alpha"
	srv := newTLS(api)
	defer srv.Close()
	dead := newTLS(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	for _, c := range []struct {
		name, server, token, site string
		code                      int
		want                      []string
	}{
		{"other site", srv.URL, "secret-alpha-0123456789", "beta", 403, []string{"writing the status of site beta", "403 Forbidden", "this credential may write only its own site's status", "site beta's credential"}},
		{"expired", srv.URL, "secret-expired-0123456789", "alpha", 401, []string{"401 Unauthorized", "expired", "regenerate", "k3strap fleet management credential --kubeconfig MANAGEMENT.kubeconfig --site alpha"}},
		{"missing object", srv.URL, "secret-alpha-0123456789", "gamma", 0, nil},
		{"unreachable", deadURL, "secret-alpha-0123456789", "alpha", 0, []string{"writing the status of site alpha on the management cluster " + deadURL, "reachable"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "missing object" {
				api.may["secret-alpha-0123456789"] = "*"
				defer func() { api.may["secret-alpha-0123456789"] = "alpha" }()
				c.code, c.want = 404, []string{"SiteStatus object k3strap-fleet/gamma does not exist", "k3strap fleet management credential"}
			}
			start := time.Now()
			err := Write(context.Background(), kubeconfigFor(t, c.server, c.token), c.site, Status{Source: SourcePush})
			if err == nil {
				t.Fatal("Write succeeded")
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Write took %s", d)
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code {
				t.Errorf("error %T code %v, want *Error code %d", err, e, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "0123456789") {
				t.Errorf("error carries the token: %q", err)
			}
		})
	}
	if err := Write(context.Background(), kubeconfigFor(t, srv.URL, "x"), "Bad_Name", Status{}); err == nil || !strings.Contains(err.Error(), "not a Kubernetes object name") {
		t.Errorf("bad site name: %v", err)
	}
	if err := Write(context.Background(), filepath.Join(t.TempDir(), "none"), "alpha", Status{}); err == nil || !strings.Contains(err.Error(), "loading the kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
}

func TestReadForbiddenForSite(t *testing.T) {
	api := newFakeAPI()
	api.add("alpha")
	api.may["secret-alpha-0123456789"] = "alpha"
	srv := newTLS(api)
	defer srv.Close()
	_, err := Read(context.Background(), kubeconfigFor(t, srv.URL, "secret-alpha-0123456789"))
	if err == nil || !strings.Contains(err.Error(), "403 Forbidden") || !strings.Contains(err.Error(), "operator's kubeconfig") || strings.Contains(err.Error(), "0123456789") {
		t.Errorf("Read with a site's credential: %v", err)
	}
}

// TestMakeCredential: the identity's objects are applied as documented (the Role allows get,
// update and patch of the site's own object only), the object is created once (a re-run finds
// it), the token's expiration is the one asked, and the kubeconfig written works for Write.
func TestMakeCredential(t *testing.T) {
	api := newFakeAPI()
	api.may["op"] = "*"
	srv := newTLS(api)
	defer srv.Close()
	op := kubeconfigFor(t, srv.URL, "op")
	for range 2 {
		cred, err := MakeCredential(context.Background(), op, "alpha", 48*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if want := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC); !cred.Expires.Equal(want) || cred.ServiceAccount != "site-alpha" {
			t.Errorf("credential %s expires %v, want site-alpha %v", cred.ServiceAccount, cred.Expires, want)
		}
		p := filepath.Join(t.TempDir(), "alpha.kubeconfig")
		if err := os.WriteFile(p, cred.Kubeconfig, 0o600); err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.LoadFromFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ctx := kc.Contexts[kc.CurrentContext]
		if ctx == nil || ctx.Namespace != Namespace || kc.AuthInfos[ctx.AuthInfo].Token != "token-of-site-alpha" || kc.Clusters[ctx.Cluster].Server != srv.URL {
			t.Errorf("kubeconfig %+v", kc)
		}
		if err := Write(context.Background(), p, "alpha", Status{Source: SourcePull}); err != nil {
			t.Errorf("writing with the new credential: %v", err)
		}
		if err := Write(context.Background(), p, "beta", Status{Source: SourcePull}); err == nil {
			t.Error("the new credential wrote another site's status")
		}
	}
	role := api.applied["/apis/rbac.authorization.k8s.io/v1/namespaces/k3strap-fleet/roles/site-alpha"]
	rules, _ := json.Marshal(role["rules"])
	if want := `[{"apiGroups":["fleet.k3strap.io"],"resourceNames":["alpha"],"resources":["sitestatuses","sitestatuses/status"],"verbs":["get","update","patch"]}]`; string(rules) != want {
		t.Errorf("role rules %s, want %s", rules, want)
	}
	rb := api.applied["/apis/rbac.authorization.k8s.io/v1/namespaces/k3strap-fleet/rolebindings/site-alpha"]
	if b, _ := json.Marshal(rb["subjects"]); string(b) != `[{"kind":"ServiceAccount","name":"site-alpha","namespace":"k3strap-fleet"}]` {
		t.Errorf("rolebinding subjects %s", b)
	}
	if api.applied["/api/v1/namespaces/k3strap-fleet/serviceaccounts/site-alpha"] == nil {
		t.Error("no ServiceAccount applied")
	}
	if api.objects["alpha"] == nil {
		t.Error("no SiteStatus object created")
	}
	if _, err := MakeCredential(context.Background(), op, "alpha", time.Minute); err == nil || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("a 1m expiration: %v", err)
	}
}

// TestCRD: the manifest parses, and names what `kubectl get sitestatuses` shows.
func TestCRD(t *testing.T) {
	u, err := CRD()
	if err != nil {
		t.Fatal(err)
	}
	if u.GetName() != CRDName {
		t.Errorf("name %s", u.GetName())
	}
	b, _ := json.Marshal(u.Object)
	for _, w := range []string{`"scope":"Namespaced"`, `"status":{}`, `"name":"Version"`, `"name":"Ready"`, `"name":"Result"`, `"name":"Verdict"`, `"name":"Last seen"`, `"group":"fleet.k3strap.io"`, `"plural":"sitestatuses"`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("CRD lacks %s", w)
		}
	}
	// Every field of Status is in the schema.
	st, _ := json.Marshal(Status{LastResult: &Result{Time: time.Now()}, SourceReachable: new(bool), LastSeen: time.Now(), Source: "push", Version: "v", DoctorVerdict: "x", DesiredRevision: "x", AppliedRevision: "x", SourceMessage: "x"})
	var m map[string]any
	json.Unmarshal(st, &m)
	for k := range m {
		if !strings.Contains(string(b), `"`+k+`":{`) {
			t.Errorf("CRD schema lacks status.%s", k)
		}
	}
}
