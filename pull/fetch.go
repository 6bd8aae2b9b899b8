// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"aead.dev/minisign"
	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// UnreachableError is a source that could not be reached (network, server down, repository
// missing): the box keeps its state and retries.
type UnreachableError struct {
	Source string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("source unreachable: %s: %v", e.Source, e.Err)
}
func (e *UnreachableError) Unwrap() error { return e.Err }

// RefError is a Git ref the repository does not have: a configuration error (exit 2).
type RefError struct {
	Source string
	Ref    string
	Have   []string
}

func (e *RefError) Error() string {
	have := "none"
	if len(e.Have) > 0 {
		have = strings.Join(e.Have, ", ")
	}
	return fmt.Sprintf("%s has no branch or tag %q (it has: %s) — fix: set source.git.ref to one of them, or push the ref", e.Source, e.Ref, have)
}

// Desired is a fetched, verified desired state.
type Desired struct {
	// Revision is the commit hash (Git) or "sha256:<hex>" (HTTPS).
	Revision string
	// Signer is who signed it (Git).
	Signer Verified
	// Inventory is the site inventory's path in the verified tree on disk.
	Inventory string
}

// dirs of the state directory.
const (
	repoDir  = "repo"
	treeDir  = "tree"
	fetchRef = "refs/k3strap/desired"
	// attemptTimeout bounds one fetch attempt (the backoff around it is RetryFor).
	attemptTimeout = 60 * time.Second
	// maxHTTPSFile bounds an HTTPS inventory's size.
	maxHTTPSFile = 16 << 20
)

// Fetch gets the desired state of c into c.StateDir, verifies it and only then writes its
// tree (StateDir/tree, replaced atomically). Errors: *UnreachableError, *RefError,
// *RefusedError, a *ConfigError for a bad allowed_signers file or a path missing from the
// commit, I/O errors as they are. Nothing is written on the tree for a refused state.
func Fetch(ctx context.Context, c *Config) (Desired, error) {
	if c.Source.HTTPS != nil {
		return fetchHTTPS(ctx, c)
	}
	return fetchGit(ctx, c)
}

func fetchGit(ctx context.Context, c *Config) (Desired, error) {
	g := c.Source.Git
	src := redactURL(g.URL)
	signers, err := LoadAllowedSigners(c.Verify.AllowedSigners)
	if err != nil {
		return Desired{}, &ConfigError{File: c.Path, Msg: "verify.allowedSigners: " + err.Error(), Fix: "fix the allowed_signers file"}
	}
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	rem := git.NewRemote(memory.NewStorage(), &gitconfig.RemoteConfig{Name: "origin", URLs: []string{g.URL}})
	refs, err := rem.ListContext(actx, &git.ListOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return Desired{}, ctx.Err()
		}
		return Desired{}, &UnreachableError{Source: src, Err: err}
	}
	name, err := resolveRef(refs, g.Ref)
	if err != nil {
		var re *RefError
		if errors.As(err, &re) {
			re.Source = src
		}
		return Desired{}, err
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return Desired{}, err
	}
	rp := filepath.Join(c.StateDir, repoDir)
	repo, err := git.PlainOpen(rp)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainInit(rp, true)
	}
	if err != nil {
		return Desired{}, fmt.Errorf("the state repository %s: %w", rp, err)
	}
	spec := gitconfig.RefSpec("+" + name.String() + ":" + fetchRef)
	// An anonymous remote on the state repository: the URL is the configuration's, never stored.
	fr := git.NewRemote(repo.Storer, &gitconfig.RemoteConfig{Name: "origin", URLs: []string{g.URL}})
	err = fr.FetchContext(actx, &git.FetchOptions{RefSpecs: []gitconfig.RefSpec{spec}, Tags: git.NoTags, Force: true})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if ctx.Err() != nil {
			return Desired{}, ctx.Err()
		}
		return Desired{}, &UnreachableError{Source: src, Err: err}
	}
	ref, err := repo.Reference(fetchRef, true)
	if err != nil {
		return Desired{}, fmt.Errorf("the fetched ref: %w", err)
	}
	h := ref.Hash()
	if tag, err := repo.TagObject(h); err == nil { // annotated tag: the commit it names
		cm, err := tag.Commit()
		if err != nil {
			return Desired{}, fmt.Errorf("tag %s does not name a commit: %w", g.Ref, err)
		}
		h = cm.Hash
	}
	commit, err := repo.CommitObject(h)
	if err != nil {
		return Desired{}, fmt.Errorf("ref %s: %w", g.Ref, err)
	}
	raw, err := rawObject(repo, h)
	if err != nil {
		return Desired{}, err
	}
	// Verify before anything else: nothing of the commit is read or written before this.
	who, err := VerifyCommit(raw, h.String(), signers)
	if err != nil {
		return Desired{}, err
	}
	tree, err := commit.Tree()
	if err != nil {
		return Desired{}, fmt.Errorf("commit %s: %w", h, err)
	}
	if _, err := tree.File(path.Clean(g.Path)); err != nil {
		return Desired{}, &ConfigError{File: c.Path, Msg: fmt.Sprintf("commit %s of %s has no file %s", h.String()[:12], g.Ref, g.Path), Fix: "set source.git.path to the site inventory's path in the repository, or commit it there"}
	}
	if err := writeTree(c.StateDir, tree); err != nil {
		return Desired{}, err
	}
	return Desired{Revision: h.String(), Signer: who, Inventory: filepath.Join(c.StateDir, treeDir, filepath.FromSlash(path.Clean(g.Path)))}, nil
}

// resolveRef finds ref among the remote's refs: a full refs/... name, else refs/heads/ref,
// else refs/tags/ref.
func resolveRef(refs []*plumbing.Reference, ref string) (plumbing.ReferenceName, error) {
	byName := map[plumbing.ReferenceName]bool{}
	var have []string
	for _, r := range refs {
		byName[r.Name()] = true
		if r.Name().IsBranch() || r.Name().IsTag() {
			have = append(have, r.Name().Short())
		}
	}
	cands := []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
	if strings.HasPrefix(ref, "refs/") {
		cands = []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	}
	for _, n := range cands {
		if byName[n] {
			return n, nil
		}
	}
	sort.Strings(have)
	return "", &RefError{Ref: ref, Have: have}
}

// rawObject returns the commit object's bytes as git stores them.
func rawObject(repo *git.Repository, h plumbing.Hash) ([]byte, error) {
	o, err := repo.Storer.EncodedObject(plumbing.CommitObject, h)
	if err != nil {
		return nil, err
	}
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// writeTree writes tree's regular files into StateDir/tree through a new directory and a
// rename: a reader sees the old tree or the new one. Symbolic links and submodules are left out.
func writeTree(stateDir string, tree *object.Tree) error {
	dst := filepath.Join(stateDir, treeDir)
	tmp, err := os.MkdirTemp(stateDir, ".tree-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	err = tree.Files().ForEach(func(f *object.File) error {
		if f.Mode != filemode.Regular && f.Mode != filemode.Executable {
			return nil
		}
		if !filepath.IsLocal(filepath.FromSlash(f.Name)) {
			return fmt.Errorf("the commit has a path outside the tree: %q", f.Name)
		}
		p := filepath.Join(tmp, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		w, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, r); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	})
	if err != nil {
		return err
	}
	old := dst + ".old"
	_ = os.RemoveAll(old)
	if err := os.Rename(dst, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

func fetchHTTPS(ctx context.Context, c *Config) (Desired, error) {
	h := c.Source.HTTPS
	b, err := httpsGet(ctx, c, h.URL)
	if err != nil {
		return Desired{}, err
	}
	sum := sha256.Sum256(b)
	got := hex.EncodeToString(sum[:])
	rev := "sha256:" + got
	if h.SHA256 != "" && got != h.SHA256 {
		return Desired{}, &RefusedError{Revision: rev, Reason: "digest does not match", Msg: fmt.Sprintf("%s has sha256 %s, the pinned one is %s", redactURL(h.URL), got, h.SHA256),
			Fix: "if the file was changed on purpose, pin its new sha256 in source.https.sha256 (a reviewed change of the box's configuration)"}
	}
	var who Verified
	if h.MinisignKey != "" {
		if who, err = verifyMinisign(ctx, c, b, rev); err != nil {
			return Desired{}, err
		}
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return Desired{}, err
	}
	tmp, err := os.MkdirTemp(c.StateDir, ".tree-")
	if err != nil {
		return Desired{}, err
	}
	defer os.RemoveAll(tmp)
	name := "cluster.yaml"
	if err := os.WriteFile(filepath.Join(tmp, name), b, 0o600); err != nil {
		return Desired{}, err
	}
	dst := filepath.Join(c.StateDir, treeDir)
	_ = os.RemoveAll(dst + ".old")
	if err := os.Rename(dst, dst+".old"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Desired{}, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return Desired{}, err
	}
	_ = os.RemoveAll(dst + ".old")
	return Desired{Revision: rev, Signer: who, Inventory: filepath.Join(dst, name)}, nil
}

// httpsGet fetches url (at most maxHTTPSFile bytes); a failure to get a 200 is an
// *UnreachableError (404 included: the error names the status).
func httpsGet(ctx context.Context, c *Config, url string) ([]byte, error) {
	src := redactURL(url)
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, url, nil)
	if err != nil {
		return nil, &ConfigError{File: c.Path, Msg: "source.https.url: " + err.Error()}
	}
	client := c.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &UnreachableError{Source: src, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &UnreachableError{Source: src, Err: fmt.Errorf("HTTP %s", resp.Status)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPSFile+1))
	if err != nil {
		return nil, &UnreachableError{Source: src, Err: err}
	}
	if len(b) > maxHTTPSFile {
		return nil, &UnreachableError{Source: src, Err: fmt.Errorf("larger than %d bytes", maxHTTPSFile)}
	}
	return b, nil
}

// verifyMinisign checks the file b against its minisign signature at URL+".minisig" and the
// pinned key (minisign(1): a missing signature is "unsigned", another key ID "unknown key",
// a signature not over b "signature does not match"). Errors: *RefusedError,
// *UnreachableError, *ConfigError for an unreadable key file.
func verifyMinisign(ctx context.Context, c *Config, b []byte, rev string) (Verified, error) {
	h := c.Source.HTTPS
	key, err := minisign.PublicKeyFromFile(h.MinisignKey)
	if err != nil {
		return Verified{}, &ConfigError{File: c.Path, Msg: "source.https.minisignKey: " + err.Error(), Fix: "give the path of the signer's minisign.pub"}
	}
	sig, err := httpsGet(ctx, c, h.URL+".minisig")
	var ue *UnreachableError
	if errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "404") {
		return Verified{}, &RefusedError{Revision: rev, Reason: "unsigned", Msg: "there is no signature at " + redactURL(h.URL) + ".minisig",
			Fix: "sign the file with the pinned key (minisign -Sm FILE) and publish FILE.minisig beside it"}
	}
	if err != nil {
		return Verified{}, err
	}
	var s minisign.Signature
	if err := s.UnmarshalText(sig); err != nil {
		return Verified{}, &RefusedError{Revision: rev, Reason: "signature does not match", Msg: "the minisign signature cannot be read: " + err.Error(), Fix: "sign the file again with the pinned key (minisign -Sm FILE)"}
	}
	id := fmt.Sprintf("%016X", key.ID())
	if s.KeyID != key.ID() {
		return Verified{}, &RefusedError{Revision: rev, Reason: "unknown key", Msg: fmt.Sprintf("the file is signed by minisign key %016X, the pinned key is %s", s.KeyID, id),
			Fix: "sign with the pinned key, or pin the signer's key in source.https.minisignKey (a reviewed change of the box's configuration)"}
	}
	if !minisign.Verify(key, b, sig) {
		return Verified{}, &RefusedError{Revision: rev, Reason: "signature does not match", Msg: "the minisign signature by key " + id + " does not verify over the file: it was altered after signing",
			Fix: "find out who changed the file; sign it again with the pinned key and publish it"}
	}
	return Verified{Principals: "minisign", Fingerprint: id}, nil
}
