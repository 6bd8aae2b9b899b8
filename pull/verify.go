// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pull

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// RefusedError is desired state that failed verification: it is never applied. Reason is
// short ("unsigned", "unknown key", "signature does not match", "digest does not match",
// "not an SSH signature"); Msg the whole story; Fix what to do.
type RefusedError struct {
	Revision string
	Reason   string
	Msg      string
	Fix      string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("desired state %s refused (%s): %s", e.Revision, e.Reason, e.Msg)
}

const sshSigArmor = "-----BEGIN SSH SIGNATURE-----"

// Verified is who signed an accepted commit.
type Verified struct {
	// Principals are the allowed_signers principals of the key; Fingerprint its SHA256
	// fingerprint (ssh-keygen -l).
	Principals  string
	Fingerprint string
}

// VerifyCommit checks the raw commit object (as `git cat-file commit` prints it) of revision
// rev: its gpgsig header must hold an armored SSHSIG (git's gpg.format=ssh, see
// git-config(1) gpg.format and ssh-keygen(1) -Y sign) made in namespace "git" by one of
// signers over the commit without that header — what `git verify-commit` checks with
// `ssh-keygen -Y verify`. Any failure is a *RefusedError.
func VerifyCommit(raw []byte, rev string, signers []Signer) (Verified, error) {
	payload, sig := splitSignature(raw)
	if sig == "" {
		return Verified{}, &RefusedError{Revision: rev, Reason: "unsigned", Msg: "the commit carries no signature",
			Fix: "sign the commit with a pinned key: git -c gpg.format=ssh -c user.signingkey=KEY commit -S (or commit.gpgsign=true), then push"}
	}
	if !strings.HasPrefix(strings.TrimSpace(sig), sshSigArmor) {
		return Verified{}, &RefusedError{Revision: rev, Reason: "not an SSH signature", Msg: "the commit is signed, but not with an SSH key (gpg.format=ssh)",
			Fix: "sign with a pinned SSH key (git -c gpg.format=ssh commit -S)"}
	}
	s, err := sshsig.Unarmor([]byte(sig))
	if err != nil {
		return Verified{}, &RefusedError{Revision: rev, Reason: "signature does not match", Msg: "the commit's SSH signature cannot be read: " + err.Error(),
			Fix: "sign the commit again with a pinned key and push"}
	}
	fp := ssh.FingerprintSHA256(s.PublicKey)
	var known *Signer
	for i := range signers {
		if ssh.FingerprintSHA256(signers[i].Key) == fp && signers[i].allows(GitNamespace) {
			known = &signers[i]
			break
		}
	}
	if known == nil {
		return Verified{}, &RefusedError{Revision: rev, Reason: "unknown key", Msg: "the commit is signed by key " + fp + ", which is not in the allowed signers for namespace git",
			Fix: "sign with a pinned key, or add the signer's public key to the allowed_signers file on the box (a reviewed change of the box's configuration)"}
	}
	if err := sshsig.Verify(bytes.NewReader(payload), s, known.Key, s.HashAlgorithm, GitNamespace); err != nil {
		reason := "signature does not match"
		if errors.Is(err, sshsig.ErrNamespaceMismatch) {
			reason = "wrong namespace"
		}
		return Verified{}, &RefusedError{Revision: rev, Reason: reason, Msg: fmt.Sprintf("the signature by %s does not verify over the commit (%v): the commit was altered after signing, or the signature was made for something else", fp, err),
			Fix: "find out who changed the history; sign a commit with a pinned key and push"}
	}
	return Verified{Principals: known.Principals, Fingerprint: fp}, nil
}

// splitSignature returns the commit without its gpgsig header, and the header's value (its
// continuation lines unindented) — git's parse_buffer_signed_by_header.
func splitSignature(raw []byte) ([]byte, string) {
	head, body, found := bytes.Cut(raw, []byte("\n\n"))
	if !found {
		return raw, ""
	}
	var out bytes.Buffer
	var sig strings.Builder
	in := false
	for _, l := range strings.SplitAfter(string(head), "\n") {
		switch {
		case strings.HasPrefix(l, "gpgsig "):
			in = true
			sig.WriteString(strings.TrimPrefix(l, "gpgsig "))
		case in && strings.HasPrefix(l, " "):
			sig.WriteString(l[1:])
		default:
			in = false
			out.WriteString(l)
		}
	}
	if !strings.HasSuffix(out.String(), "\n") {
		out.WriteString("\n")
	}
	out.WriteString("\n")
	out.Write(body)
	return out.Bytes(), sig.String()
}
