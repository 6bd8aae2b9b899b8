// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pull

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"aead.dev/minisign"
	"github.com/cenkalti/backoff/v4"
	"github.com/gofrs/flock"
)

// gitRepo is a real repository in a temporary directory whose commits are signed with real
// ssh-keygen keys through git's gpg.format=ssh.
type gitRepo struct {
	t   *testing.T
	dir string
}

func needTools(t *testing.T) {
	t.Helper()
	for _, b := range []string{"git", "ssh-keygen"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s is not installed: these tests build real signed repositories with it", b)
		}
	}
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Site Admin", "GIT_AUTHOR_EMAIL=admin@example.com",
		"GIT_COMMITTER_NAME=Site Admin", "GIT_COMMITTER_EMAIL=admin@example.com")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// newKey makes an ed25519 key pair and returns the private key's path.
func newKey(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	run(t, "", "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p)
	return p
}

// allowedSigners writes an allowed_signers file pinning the keys' public halves.
func allowedSigners(t *testing.T, opts string, keys ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# pinned signers\n\n")
	for _, k := range keys {
		pub, err := os.ReadFile(k + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("admin@example.com " + opts + string(pub))
	}
	p := filepath.Join(t.TempDir(), "allowed_signers")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func newRepo(t *testing.T) *gitRepo {
	needTools(t)
	d := t.TempDir()
	run(t, d, "git", "init", "-q", "-b", "main")
	return &gitRepo{t: t, dir: d}
}

// commit writes files and commits them, signed with key ("" for an unsigned commit); it
// returns the commit hash.
func (r *gitRepo) commit(key string, files map[string]string) string {
	r.t.Helper()
	for n, c := range files {
		p := filepath.Join(r.dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	run(r.t, r.dir, "git", "add", "-A")
	args := []string{"commit", "-q", "-m", "site change"}
	if key != "" {
		args = append([]string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + key}, append(args, "-S")...)
	}
	run(r.t, r.dir, "git", args...)
	return run(r.t, r.dir, "git", "rev-parse", "HEAD")
}

func gitConfig(t *testing.T, url, ref, signers string) *Config {
	return &Config{Host: "s1", Source: Source{Git: &GitSource{URL: url, Ref: ref, Path: "sites/s1/cluster.yaml"}},
		Verify: Verify{AllowedSigners: signers}, StateDir: filepath.Join(t.TempDir(), "state"), Path: "pull.yaml"}
}

const inv1 = "# revision 1\nlabel: one\n"
const inv2 = "# revision 2\nlabel: two\n"

func TestFetchSignedByPinnedKeyIsAccepted(t *testing.T) {
	key := newKey(t, "pinned")
	r := newRepo(t)
	rev := r.commit(key, map[string]string{"sites/s1/cluster.yaml": inv1, "sites/s1/ca.pem": "ca"})
	c := gitConfig(t, r.dir, "main", allowedSigners(t, "", key))
	d, err := Fetch(context.Background(), c)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if d.Revision != rev {
		t.Errorf("revision = %s, want HEAD %s", d.Revision, rev)
	}
	if d.Signer.Principals != "admin@example.com" || !strings.HasPrefix(d.Signer.Fingerprint, "SHA256:") {
		t.Errorf("signer = %+v", d.Signer)
	}
	b, err := os.ReadFile(d.Inventory)
	if err != nil || string(b) != inv1 {
		t.Errorf("inventory %s = %q, %v; want the committed file", d.Inventory, b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(c.StateDir, treeDir, "sites/s1/ca.pem")); string(b) != "ca" {
		t.Errorf("the rest of the tree is not beside the inventory: ca.pem = %q", b)
	}
	// A tag names the same commit.
	run(t, r.dir, "git", "tag", "-a", "-m", "wave 1", "wave-1")
	c.Source.Git.Ref = "wave-1"
	if d, err := Fetch(context.Background(), c); err != nil || d.Revision != rev {
		t.Errorf("Fetch of the annotated tag = %s, %v; want %s", d.Revision, err, rev)
	}
}

// refused asserts that err is a *RefusedError with reason and that the tree on disk is still
// the one before (want: its inventory's content, "" for none).
func refused(t *testing.T, c *Config, err error, reason, want string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v (%T), want a *RefusedError (%s)", err, err, reason)
	}
	if re.Reason != reason || re.Fix == "" {
		t.Errorf("refused: reason %q fix %q, want reason %q and a fix", re.Reason, re.Fix, reason)
	}
	b, rerr := os.ReadFile(filepath.Join(c.StateDir, treeDir, "sites/s1/cluster.yaml"))
	if want == "" && rerr == nil {
		t.Errorf("a refused state was written to the tree: %q", b)
	}
	if want != "" && string(b) != want {
		t.Errorf("the tree holds %q after a refused fetch, want the previous %q", b, want)
	}
}

func TestFetchUnknownKeyIsRefused(t *testing.T) {
	pinned, other := newKey(t, "pinned"), newKey(t, "other")
	r := newRepo(t)
	r.commit(pinned, map[string]string{"sites/s1/cluster.yaml": inv1})
	c := gitConfig(t, r.dir, "main", allowedSigners(t, "", pinned))
	if _, err := Fetch(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	r.commit(other, map[string]string{"sites/s1/cluster.yaml": inv2})
	_, err := Fetch(context.Background(), c)
	refused(t, c, err, "unknown key", inv1)
	// A pinned key limited to another namespace does not sign git commits either.
	c2 := gitConfig(t, r.dir, "main", allowedSigners(t, `namespaces="file" `, other))
	_, err = Fetch(context.Background(), c2)
	refused(t, c2, err, "unknown key", "")
}

func TestFetchUnsignedIsRefused(t *testing.T) {
	pinned := newKey(t, "pinned")
	r := newRepo(t)
	r.commit("", map[string]string{"sites/s1/cluster.yaml": inv1})
	c := gitConfig(t, r.dir, "main", allowedSigners(t, "", pinned))
	_, err := Fetch(context.Background(), c)
	refused(t, c, err, "unsigned", "")
}

func TestFetchTamperedIsRefused(t *testing.T) {
	pinned := newKey(t, "pinned")
	r := newRepo(t)
	r.commit(pinned, map[string]string{"sites/s1/cluster.yaml": inv1})
	c := gitConfig(t, r.dir, "main", allowedSigners(t, "", pinned))
	if _, err := Fetch(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	// A second signed commit, then a commit object that is the same but for its message, with
	// the signature copied: the signature no longer covers what it is attached to.
	r.commit(pinned, map[string]string{"sites/s1/cluster.yaml": inv2})
	raw := run(t, r.dir, "git", "cat-file", "commit", "HEAD") + "\n"
	if !strings.Contains(raw, "-----BEGIN SSH SIGNATURE-----") {
		t.Fatalf("the commit is not SSH-signed:\n%s", raw)
	}
	forged := strings.Replace(raw, "site change", "site change (harmless, honest)", 1)
	p := filepath.Join(t.TempDir(), "forged")
	if err := os.WriteFile(p, []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	h := run(t, r.dir, "git", "hash-object", "-t", "commit", "-w", p)
	run(t, r.dir, "git", "update-ref", "refs/heads/main", h)
	_, err := Fetch(context.Background(), c)
	refused(t, c, err, "signature does not match", inv1)
}

func TestFetchMissingRefAndUnreachableSource(t *testing.T) {
	pinned := newKey(t, "pinned")
	r := newRepo(t)
	r.commit(pinned, map[string]string{"sites/s1/cluster.yaml": inv1})
	c := gitConfig(t, r.dir, "wave-9", allowedSigners(t, "", pinned))
	_, err := Fetch(context.Background(), c)
	var re *RefError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), `no branch or tag "wave-9"`) || !strings.Contains(err.Error(), "it has: main") {
		t.Errorf("missing ref: err = %v, want a *RefError naming the ref and the branches there are", err)
	}
	c.Source.Git.Ref, c.Source.Git.Path = "main", "sites/s2/cluster.yaml"
	_, err = Fetch(context.Background(), c)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "has no file sites/s2/cluster.yaml") {
		t.Errorf("missing path: err = %v, want a *ConfigError naming the path", err)
	}
	c.Source.Git.URL = "git://127.0.0.1:1/site.git"
	_, err = Fetch(context.Background(), c)
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Errorf("closed port: err = %v (%T), want an *UnreachableError", err, err)
	}
}

func TestRunConvergesOnlyVerifiedChanges(t *testing.T) {
	pinned, other := newKey(t, "pinned"), newKey(t, "other")
	r := newRepo(t)
	rev1 := r.commit(pinned, map[string]string{"sites/s1/cluster.yaml": inv1})
	c := gitConfig(t, r.dir, "main", allowedSigners(t, "", pinned))
	var applied []string
	var log bytes.Buffer
	runner := &Runner{Config: c, Log: &log,
		Converge: func(_ context.Context, p string) (bool, error) {
			b, err := os.ReadFile(p)
			applied = append(applied, string(b))
			return true, err
		},
		Exit: func(err error) (int, string) {
			if err != nil {
				return 1, "failed"
			}
			return 0, "success"
		},
		Backoff: backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 2)}
	ctx := context.Background()

	st, err := runner.Run(ctx)
	if err != nil || st.Result.State != ResultApplied || st.AppliedRevision != rev1 || st.DesiredRevision != rev1 || !st.SourceReachable {
		t.Fatalf("first run: %+v, %v; want revision %s applied", st, err, rev1)
	}
	if len(applied) != 1 || applied[0] != inv1 {
		t.Fatalf("converged %q, want the signed inventory once", applied)
	}
	if st, err = runner.Run(ctx); err != nil || st.Result.State != ResultUpToDate || len(applied) != 1 {
		t.Errorf("second run, same revision: %s, %v, %d converges; want up-to-date and no converge", st.Result.State, err, len(applied))
	}

	r.commit(other, map[string]string{"sites/s1/cluster.yaml": inv2})
	st, err = runner.Run(ctx)
	if !errors.As(err, new(*RefusedError)) || st.Result.State != ResultRefused || st.AppliedRevision != rev1 || len(applied) != 1 {
		t.Errorf("unknown key: %+v, %v, %d converges; want refused, %s still applied, no converge", st, err, len(applied), rev1)
	}
	onDisk, _ := ReadStatus(c.StateDir)
	if onDisk.Result.State != ResultRefused || !strings.Contains(onDisk.Result.Message, "unknown key") || onDisk.Result.Fix == "" || onDisk.Result.ExitCode != 1 {
		t.Errorf("status.json after the refusal: %+v", onDisk)
	}

	const inv3 = "# revision 3\nlabel: three\n"
	rev3 := r.commit(pinned, map[string]string{"sites/s1/cluster.yaml": inv3})
	st, err = runner.Run(ctx)
	if err != nil || st.AppliedRevision != rev3 || len(applied) != 2 || applied[1] != inv3 {
		t.Errorf("signed change after the refusal: %+v, %v, converged %q", st, err, applied)
	}

	c.Source.Git.URL = "git://127.0.0.1:1/site.git"
	st, err = runner.Run(ctx)
	if !errors.As(err, new(*UnreachableError)) || st.SourceReachable || !strings.HasPrefix(st.SourceMessage, "source unreachable") ||
		st.AppliedRevision != rev3 || st.Result.State != ResultUnreachable || len(applied) != 2 {
		t.Errorf("unreachable: %+v, %v; want source unreachable, %s kept, no converge", st, err, rev3)
	}
	if n := strings.Count(log.String(), "retrying"); n != 3 {
		t.Errorf("%d attempts logged as retried, want 3 (the first and 2 retries):\n%s", n, log.String())
	}

	// A converge that fails leaves the applied revision; the next run converges again.
	c.Source.Git.URL = r.dir
	rev4 := r.commit(pinned, map[string]string{"sites/s1/cluster.yaml": inv1})
	runner.Converge = func(context.Context, string) (bool, error) { return false, errors.New("bring-up failed") }
	st, err = runner.Run(ctx)
	if err == nil || st.Result.State != ResultFailed || st.DesiredRevision != rev4 || st.AppliedRevision != rev3 {
		t.Errorf("failed converge: %+v, %v; want failed, desired %s, applied %s", st, err, rev4, rev3)
	}
}

func TestRunCancelled(t *testing.T) {
	c := gitConfig(t, "git://127.0.0.1:1/site.git", "main", allowedSigners(t, "", newKey(t, "k")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	runner := &Runner{Config: c, Log: &bytes.Buffer{}, Exit: func(error) (int, string) { return 130, "cancelled" },
		Converge: func(context.Context, string) (bool, error) { t.Error("converged"); return false, nil }}
	_, err := runner.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestFetchHTTPSPinnedDigest(t *testing.T) {
	body := []byte(inv1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/store7/cluster.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	sum := sha256.Sum256([]byte(inv1))
	c := &Config{Source: Source{HTTPS: &HTTPSSource{URL: srv.URL + "/store7/cluster.yaml", SHA256: hex.EncodeToString(sum[:])}},
		StateDir: filepath.Join(t.TempDir(), "state"), HTTPClient: srv.Client()}
	d, err := Fetch(context.Background(), c)
	if err != nil || d.Revision != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("pinned file: %+v, %v", d, err)
	}
	if b, _ := os.ReadFile(d.Inventory); string(b) != inv1 {
		t.Errorf("inventory = %q", b)
	}
	body = []byte(inv2) // the file changed on the server, the pin did not
	_, err = Fetch(context.Background(), c)
	var re *RefusedError
	if !errors.As(err, &re) || re.Reason != "digest does not match" {
		t.Errorf("changed file: err = %v, want refused (digest does not match)", err)
	}
	if b, _ := os.ReadFile(d.Inventory); string(b) != inv1 {
		t.Errorf("after the refusal the inventory is %q, want the verified one kept", b)
	}
	c.Source.HTTPS.URL = srv.URL + "/store8/cluster.yaml"
	if _, err := Fetch(context.Background(), c); !errors.As(err, new(*UnreachableError)) || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing file: err = %v, want unreachable naming the 404", err)
	}
}

func TestFetchHTTPSMinisign(t *testing.T) {
	pub, priv, err := minisign.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, otherPriv, err := minisign.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"/s7.yaml": []byte(inv1), "/s7.yaml.minisig": minisign.Sign(priv, []byte(inv1))}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	defer srv.Close()
	keyText, err := pub.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "minisign.pub")
	if err := os.WriteFile(keyFile, keyText, 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Config{Source: Source{HTTPS: &HTTPSSource{URL: srv.URL + "/s7.yaml", MinisignKey: keyFile}},
		StateDir: filepath.Join(t.TempDir(), "state"), HTTPClient: srv.Client()}
	d, err := Fetch(context.Background(), c)
	if err != nil || d.Signer.Principals != "minisign" || d.Signer.Fingerprint != fmt.Sprintf("%016X", pub.ID()) {
		t.Fatalf("signed by the pinned key: %+v, %v", d, err)
	}
	files["/s7.yaml"] = []byte(inv2) // altered after signing
	_, err = Fetch(context.Background(), c)
	var re *RefusedError
	if !errors.As(err, &re) || re.Reason != "signature does not match" {
		t.Errorf("altered file: err = %v, want refused (signature does not match)", err)
	}
	files["/s7.yaml.minisig"] = minisign.Sign(otherPriv, []byte(inv2))
	if _, err = Fetch(context.Background(), c); !errors.As(err, &re) || re.Reason != "unknown key" {
		t.Errorf("another key: err = %v, want refused (unknown key)", err)
	}
	delete(files, "/s7.yaml.minisig")
	if _, err = Fetch(context.Background(), c); !errors.As(err, &re) || re.Reason != "unsigned" {
		t.Errorf("no signature: err = %v, want refused (unsigned)", err)
	}
	if b, _ := os.ReadFile(d.Inventory); string(b) != inv1 {
		t.Errorf("after the refusals the inventory is %q, want the verified one kept", b)
	}
}

func TestRunOneAtATime(t *testing.T) {
	c := gitConfig(t, "git://127.0.0.1:1/site.git", "main", "unused")
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	other := flock.New(filepath.Join(c.StateDir, LockName))
	if ok, err := other.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %t %v", ok, err)
	}
	defer other.Unlock()
	runner := &Runner{Config: c, Log: &bytes.Buffer{}, Exit: func(error) (int, string) { return 1, "" },
		Converge: func(context.Context, string) (bool, error) { t.Error("converged"); return false, nil }}
	_, err := runner.Run(context.Background())
	if !errors.As(err, new(*BusyError)) {
		t.Errorf("err = %v, want a *BusyError", err)
	}
	if _, err := os.Stat(filepath.Join(c.StateDir, StatusName)); err == nil {
		t.Error("a busy run wrote the status")
	}
}
