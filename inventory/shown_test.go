// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const baseDoc = "apiVersion: k3strap.io/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec:\n  hosts:\n    - {name: cp1, address: 192.0.2.1, role: server}\n"

// placements put a value where the decoder meets it in the wrong shape or type: the whole
// document, a mapping's place, a number's, a list's, a duration's, a key.
var placements = []func(v string) string{
	func(v string) string { return v },
	func(v string) string { return strings.Replace(baseDoc, "metadata: {name: lab}", "metadata: "+v, 1) },
	func(v string) string { return baseDoc + "  ssh: {port: " + v + "}\n" },
	func(v string) string { return baseDoc + "  ssh: {connectTimeout: " + v + "}\n" },
	func(v string) string { return baseDoc + "  ssh: {agent: " + v + "}\n" },
	func(v string) string {
		return strings.Replace(baseDoc, "  hosts:\n    - {name: cp1, address: 192.0.2.1, role: server}\n", "  hosts: "+v+"\n", 1)
	},
	func(v string) string { return baseDoc + "  " + v + ": 1\n" },
	func(v string) string { return baseDoc + "  k3s: {config: {disable: {x: " + v + "}}}\n" },
}

// FuzzDecodeErrorsQuoteNothing: whatever value stands where the decoder refuses it, no message
// shows it (a token, a password or a key pasted in the wrong place, or the wrong file given).
func FuzzDecodeErrorsQuoteNothing(f *testing.F) {
	for _, s := range []string{"K10f3a8c9d2e1b4a7c6d5::server:9f8e7d6c5b4a3928", "hunter2hunter2", "'s3cr3t-value-x'", "\"quoted secret\"", "[a, b]", "{k: v}", "sekrit&stuff#x"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, secret string, where uint8) {
		if len(secret) < 8 || strings.ContainsAny(secret, "\n\r") {
			return // short strings occur in messages by chance ("spec", "a string")
		}
		if strings.Trim(secret, " \t+-0123456789_") == "" {
			return // a whole number read as one is stated in a range message ("SSH port 70000")
		}
		doc := placements[int(where)%len(placements)](secret)
		_, err := Parse("c.yaml", []byte(doc), LoadOptions{SkipFileChecks: true})
		if err == nil {
			return
		}
		// The value as YAML reads it: a plain or quoted scalar's text. Keys that read as field
		// names are named by design (unknown field "nodeNmae"), so such values are not judged.
		bare := strings.Trim(strings.TrimSpace(secret), `'"`)
		if fieldNameRE.MatchString(bare) {
			return
		}
		for _, v := range []string{strings.TrimSpace(secret), bare} {
			if len(v) >= 8 && strings.Contains(err.Error(), v) {
				t.Fatalf("the message shows the value %q:\n%s", v, err)
			}
		}
	})
}

// TestDocumentGuess: a mistaken file is named by what it looks like, never quoted.
func TestDocumentGuess(t *testing.T) {
	for in, want := range map[string]string{
		"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----": "a private key",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----":                 "a PEM certificate or key",
		"ssh-ed25519 AAAAC3Nza user@host":                                              "an SSH public key",
		"K10" + strings.Repeat("ab", 20) + "::server:" + strings.Repeat("c", 32):       "a K3s token",
		"A=1\nB=2":                        "an environment (.env) file",
		"export TOKEN=abc":                "an environment (.env) file",
		"correct-horse-battery-staple":    "a token or password",
		"just some words in a text file.": "",
	} {
		if got := documentGuess(in); got != want {
			t.Errorf("documentGuess(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAddressesNormalisedOnce: an IPv6 address with or without brackets is the same host,
// kept bare; URLs and host:port get the brackets once.
func TestAddressesNormalisedOnce(t *testing.T) {
	for _, addr := range []string{"'[fd00::1]'", "'fd00::1'", "' [fd00::1] '"} {
		doc := strings.Replace(baseDoc, "192.0.2.1", addr, 1) + "  k3s: {apiEndpoint: {address: '[fd00::10]'}}\n"
		c, err := Parse("c.yaml", []byte(doc), LoadOptions{SkipFileChecks: true})
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		h := &c.Spec.Hosts[0]
		if h.Address != "fd00::1" {
			t.Errorf("%s: address kept as %q, want fd00::1", addr, h.Address)
		}
		if got := ServerURL(h); got != "https://[fd00::1]:6443" {
			t.Errorf("%s: ServerURL = %q", addr, got)
		}
		if got := net.JoinHostPort(h.Address, "22"); got != "[fd00::1]:22" {
			t.Errorf("%s: host:port = %q", addr, got)
		}
		if got := c.Spec.K3s.APIEndpoint.Address; got != "fd00::10" {
			t.Errorf("%s: apiEndpoint address %q", addr, got)
		}
	}
	// The same host twice, once with brackets: a duplicate.
	doc := strings.Replace(baseDoc, "role: server}\n", "role: server}\n    - {name: cp2, address: 'fd00::1', role: server}\n", 1)
	doc = strings.Replace(doc, "192.0.2.1", "'[fd00::1]'", 1)
	if _, err := Parse("c.yaml", []byte(doc), LoadOptions{SkipFileChecks: true}); err == nil || !strings.Contains(err.Error(), "is already used by host cp1") {
		t.Errorf("bracketed and bare forms of one address not seen as one: %v", err)
	}
	for in, want := range map[string]string{"[fd00::1]": "fd00::1", "fd00::1": "fd00::1", "[192.0.2.1]": "[192.0.2.1]", "host.example": "host.example", "[host]": "[host]"} {
		if got := NormalizeAddress(in); got != want {
			t.Errorf("NormalizeAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSudoPasswordFileChecked: a missing, shared or directory sudoPasswordFile is refused at
// load with its line and the fix; a private one passes; its content is never read into a message.
func TestSudoPasswordFileChecked(t *testing.T) {
	dir := t.TempDir()
	private := filepath.Join(dir, "pw")
	shared := filepath.Join(dir, "pw-shared")
	for p, mode := range map[string]os.FileMode{private: 0o600, shared: 0o644} {
		if err := os.WriteFile(p, []byte("hunter2-the-password\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		file, want string
	}{
		{private, ""},
		{shared, "is readable by others (mode 0644) — fix: run chmod 600 " + shared},
		{filepath.Join(dir, "missing"), "sudo password file " + filepath.Join(dir, "missing") + " does not exist"},
		{dir, "is a directory"},
	} {
		doc := baseDoc + "  ssh: {sudoPasswordFile: " + c.file + "}\n"
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, LoadOptions{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.file, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path+":7:")):
			t.Errorf("%s: %v, want %q at line 7", c.file, err, c.want)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("%s: the password reached the message: %v", c.file, err)
		}
	}
}

// TestHostNameWithControlCharacters: refused (DNS-1123), and the message itself carries no
// control character.
func TestHostNameWithControlCharacters(t *testing.T) {
	doc := strings.Replace(baseDoc, "name: cp1", `name: "cp1\e]0;pwn\a\u009b2J"`, 1)
	_, err := Parse("c.yaml", []byte(doc), LoadOptions{SkipFileChecks: true})
	if err == nil || !strings.Contains(err.Error(), "DNS-1123") {
		t.Fatalf("accepted: %v", err)
	}
	for _, r := range err.Error() {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f {
			t.Fatalf("message holds %U: %q", r, err.Error())
		}
	}
}
