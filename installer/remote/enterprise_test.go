// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/k3strap/k3strap/inventory"
)

// newSigner returns a fresh ed25519 key as a signer and its private key.
func newSigner(t *testing.T) (ssh.Signer, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, priv
}

// signCert makes a certificate of type typ for key signed by ca, valid [after, before).
func signCert(t *testing.T, ca ssh.Signer, key ssh.PublicKey, typ uint32, principals []string, after, before time.Time) *ssh.Certificate {
	t.Helper()
	c := &ssh.Certificate{Key: key, CertType: typ, KeyId: "test", ValidPrincipals: principals,
		ValidAfter: uint64(after.Unix()), ValidBefore: uint64(before.Unix())}
	if err := c.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return c
}

// certServer is an in-process SSH server that accepts only user certificates signed by
// userCA for principal "root", presents a host certificate signed by hostCA (a plain host key
// only when hostCA is nil) and forwards
// direct-tcpip channels (a jump host).
type certServer struct {
	ln     net.Listener
	userCA ssh.PublicKey
}

func newCertServer(t *testing.T, userCA, hostCA ssh.Signer) *certServer {
	t.Helper()
	hostKey, _ := newSigner(t)
	s := &certServer{userCA: userCA.PublicKey()}
	checker := &ssh.CertChecker{IsUserAuthority: func(auth ssh.PublicKey) bool {
		return bytes.Equal(auth.Marshal(), s.userCA.Marshal())
	}}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(m ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if _, ok := key.(*ssh.Certificate); !ok {
			return nil, errors.New("only certificates")
		}
		return checker.Authenticate(m, key)
	}}
	if hostCA != nil { // else only a plain host key
		hostCert := signCert(t, hostCA, hostKey.PublicKey(), ssh.HostCert, []string{"127.0.0.1"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		hostCertSigner, err := ssh.NewCertSigner(hostCert, hostKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.AddHostKey(hostCertSigner)
	}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveForward(c, cfg)
		}
	}()
	return s
}

func (s *certServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// serveForward runs one server connection: direct-tcpip channels are forwarded, the rest
// refused; global requests (keepalives) answered.
func serveForward(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go func() {
		for r := range reqs {
			if r.WantReply {
				_ = r.Reply(true, nil)
			}
		}
	}()
	for nc := range chans {
		if nc.ChannelType() != "direct-tcpip" {
			_ = nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		d := nc.ExtraData()
		if len(d) < 4 {
			_ = nc.Reject(ssh.ConnectionFailed, "bad")
			continue
		}
		n := binary.BigEndian.Uint32(d)
		host := string(d[4 : 4+n])
		port := binary.BigEndian.Uint32(d[4+n:])
		up, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			_ = nc.Reject(ssh.ConnectionFailed, err.Error())
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			_ = up.Close()
			continue
		}
		go ssh.DiscardRequests(creqs)
		go func() { _, _ = io.Copy(ch, up); _ = ch.CloseWrite() }()
		go func() { _, _ = io.Copy(up, ch); _ = up.Close() }()
	}
}

// certFixture is a user key with its certificate next to it (<key>-cert.pub) and a
// known_hosts file trusting hostCA for every host.
type certFixture struct {
	dir, key, knownHosts string
	userCA, hostCA       ssh.Signer
	pub                  ssh.PublicKey
}

func newCertFixture(t *testing.T, after, before time.Time) *certFixture {
	t.Helper()
	f := &certFixture{dir: t.TempDir()}
	f.userCA, _ = newSigner(t)
	f.hostCA, _ = newSigner(t)
	s, priv := newSigner(t)
	f.pub = s.PublicKey()
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	f.key = filepath.Join(f.dir, "id_ed25519")
	writeFile(t, f.key, pem.EncodeToMemory(block))
	cert := signCert(t, f.userCA, f.pub, ssh.UserCert, []string{"root"}, after, before)
	writeFile(t, f.key+"-cert.pub", ssh.MarshalAuthorizedKey(cert))
	f.knownHosts = filepath.Join(f.dir, "known_hosts")
	writeFile(t, f.knownHosts, []byte("@cert-authority * "+string(ssh.MarshalAuthorizedKey(f.hostCA.PublicKey()))))
	return f
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *certFixture) config(port int) Config {
	return Config{Host: "t1", Address: "127.0.0.1", Port: port, User: "root", KeyPath: f.key,
		KnownHosts: &KnownHosts{Path: f.knownHosts}, ConnectTimeout: 5 * time.Second}
}

// A host accepting only certificates and presenting a host certificate: the login works with
// <key>-cert.pub found next to the key and the CA in known_hosts, and nothing is recorded.
func TestDialCertificatesBothWays(t *testing.T) {
	f := newCertFixture(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	srv := newCertServer(t, f.userCA, f.hostCA)
	before, _ := os.ReadFile(f.knownHosts)
	cfg := f.config(srv.port())
	recorded := false
	cfg.KnownHosts.OnRecord = func(string, string) { recorded = true }
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	_ = c.Close()
	after, _ := os.ReadFile(f.knownHosts)
	if recorded || !bytes.Equal(before, after) {
		t.Fatalf("known_hosts changed (trust on first use for a certificate host):\n%s", after)
	}

	// The same key without its certificate is refused by the host (proves the cert was used).
	if err := os.Rename(f.key+"-cert.pub", filepath.Join(f.dir, "elsewhere.pub")); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "auth failed") {
		t.Fatalf("without the certificate: want an auth failure, got %v", err)
	}
	// An explicit CertificatePaths entry (CertificateFile) is paired with the key.
	cfg.CertificatePaths = []string{filepath.Join(f.dir, "elsewhere.pub")}
	c, err = Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Dial with CertificatePaths: %v", err)
	}
	_ = c.Close()
}

// An expired or not-yet-valid certificate is refused locally, naming the file and the window.
func TestDialCertificateOutsideWindow(t *testing.T) {
	for name, w := range map[string][2]time.Time{
		"expired":       {time.Now().Add(-2 * time.Hour), time.Now().Add(-time.Hour)},
		"not yet valid": {time.Now().Add(time.Hour), time.Now().Add(2 * time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			f := newCertFixture(t, w[0], w[1])
			// Nothing listens: the error must come before any dial.
			_, err := Dial(context.Background(), f.config(1))
			var ce *CertificateError
			if !errors.As(err, &ce) || ce.Path != f.key+"-cert.pub" {
				t.Fatalf("want a CertificateError for %s, got %v", f.key+"-cert.pub", err)
			}
			want := fmt.Sprintf("valid from %s to %s", w[0].UTC().Format(time.RFC3339), w[1].UTC().Format(time.RFC3339))
			if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q and %q", err, name, want)
			}
		})
	}
}

// A host certificate from a CA known_hosts does not trust, or a user certificate from a CA
// the host does not trust: refused, quickly, never recorded.
func TestDialWrongCA(t *testing.T) {
	f := newCertFixture(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	otherCA, _ := newSigner(t)

	srv := newCertServer(t, f.userCA, otherCA) // host cert from a CA nobody trusts
	start := time.Now()
	_, err := Dial(context.Background(), f.config(srv.port()))
	var he *HostCertError
	if !errors.As(err, &he) || he.CA != ssh.FingerprintSHA256(otherCA.PublicKey()) {
		t.Fatalf("want a HostCertError naming CA %s, got %v", ssh.FingerprintSHA256(otherCA.PublicKey()), err)
	}
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Step != StepHostKey || time.Since(start) > 5*time.Second {
		t.Fatalf("want a host key step failure within the timeout, got %v after %s", err, time.Since(start))
	}
	if b, _ := os.ReadFile(f.knownHosts); strings.Count(string(b), "\n") != 1 {
		t.Fatalf("a certificate host was recorded:\n%s", b)
	}

	// A host the CA line covers that offers a plain key: refused, not recorded (no TOFU).
	plain := newCertServer(t, f.userCA, nil)
	_, err = Dial(context.Background(), f.config(plain.port()))
	if !errors.As(err, &he) || he.CA != "" || !strings.Contains(err.Error(), "presented a plain host key although") {
		t.Fatalf("plain key under a CA: want a HostCertError, got %v", err)
	}
	if b, _ := os.ReadFile(f.knownHosts); strings.Count(string(b), "\n") != 1 {
		t.Fatalf("a plain key under a CA was recorded:\n%s", b)
	}

	srv2 := newCertServer(t, otherCA, f.hostCA) // the host trusts another user CA
	start = time.Now()
	_, err = Dial(context.Background(), f.config(srv2.port()))
	if !errors.As(err, &ce) || ce.Step != StepAuth || time.Since(start) > 5*time.Second {
		t.Fatalf("want an auth failure within the timeout, got %v after %s", err, time.Since(start))
	}
	if want := "signed by CA " + ssh.FingerprintSHA256(f.userCA.PublicKey()) + " for principals [root]"; !strings.Contains(err.Error(), want) {
		t.Fatalf("the auth failure does not name the certificate's CA (%q): %v", want, err)
	}
}

// An encrypted key decrypted with the passphrase the callback gives; a wrong one is a clear
// error naming the key and the source, and no source without an agent says how to give one.
func TestDialEncryptedKey(t *testing.T) {
	f := newCertFixture(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	_, priv := newSigner(t)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("s3cret pass"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ssh.NewSignerFromKey(priv)
	key := filepath.Join(f.dir, "id_enc")
	writeFile(t, key, pem.EncodeToMemory(block))
	writeFile(t, key+"-cert.pub", ssh.MarshalAuthorizedKey(signCert(t, f.userCA, s.PublicKey(), ssh.UserCert, []string{"root"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))))
	srv := newCertServer(t, f.userCA, f.hostCA)
	t.Setenv("SSH_AUTH_SOCK", "")
	cfg := f.config(srv.port())
	cfg.KeyPath = key
	pass := "s3cret pass"
	cfg.Passphrase = func(_ context.Context, p string) ([]byte, string, error) {
		if p != key {
			t.Errorf("passphrase asked for %s", p)
		}
		return []byte(pass), "$TEST_PASS", nil
	}
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	_ = c.Close()

	pass = "wrong"
	_, err = Dial(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), key+": the passphrase from $TEST_PASS is wrong") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("wrong passphrase: got %v", err)
	}
	cfg.Passphrase = nil
	_, err = Dial(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "ssh.keyPassphraseEnv") {
		t.Fatalf("no passphrase source: got %v", err)
	}
}

// Every key file is offered in order: a first key the host refuses does not stop the second.
func TestDialEveryIdentityFile(t *testing.T) {
	f := newCertFixture(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	_, priv := newSigner(t)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	other := filepath.Join(f.dir, "id_other")
	writeFile(t, other, pem.EncodeToMemory(block))
	srv := newCertServer(t, f.userCA, f.hostCA)
	cfg := f.config(srv.port())
	cfg.KeyPath, cfg.KeyPaths = other, []string{f.key}
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Dial with the certified key second: %v", err)
	}
	_ = c.Close()
}

// TestHelperProxyProcess is not a test: run as a ProxyCommand by the tests below (with
// K3STRAP_TEST_PROXY=1), it connects to its two arguments host port and copies stdin/stdout.
func TestHelperProxyProcess(t *testing.T) {
	if os.Getenv("K3STRAP_TEST_PROXY") != "1" {
		t.Skip("helper process for the ProxyCommand tests")
	}
	args := flagArgs()
	c, err := net.Dial("tcp", net.JoinHostPort(args[0], args[1]))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	go func() { _, _ = io.Copy(c, os.Stdin); _ = c.Close() }()
	_, _ = io.Copy(os.Stdout, c)
	os.Exit(0)
}

// flagArgs returns the arguments after "--".
func flagArgs() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

// proxyCommandFor is a ProxyCommand running this test binary as an nc-like helper.
func proxyCommandFor(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return "env K3STRAP_TEST_PROXY=1 " + exe + " -test.run=TestHelperProxyProcess -- %h %p"
}

func TestDialProxyCommand(t *testing.T) {
	f := newCertFixture(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	srv := newCertServer(t, f.userCA, f.hostCA)
	cfg := f.config(srv.port())
	line, err := inventory.ExpandProxyCommand(proxyCommandFor(t), inventory.ProxyTokens{Host: "127.0.0.1", Port: srv.port(), User: "root", Alias: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProxyCommand = line
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Dial through ProxyCommand: %v", err)
	}
	pc := c.raw.Conn.(*proxyConn)
	_ = c.Close()
	select {
	case <-pc.exited:
	case <-time.After(3 * time.Second):
		t.Fatal("the ProxyCommand process still runs after Close")
	}

	// A proxy whose far end refuses: the command's own complaint, within the timeout.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	port := closed.Addr().(*net.TCPAddr).Port
	_ = closed.Close()
	cfg.ProxyCommand, _ = inventory.ExpandProxyCommand(proxyCommandFor(t), inventory.ProxyTokens{Host: "127.0.0.1", Port: port})
	start := time.Now()
	_, err = Dial(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "helper: dial tcp") || time.Since(start) > 5*time.Second {
		t.Fatalf("want the helper's error within the timeout, got %v after %s", err, time.Since(start))
	}

	// A command that never answers is killed at the connect deadline.
	cfg.ProxyCommand, cfg.ConnectTimeout = "sleep 60", time.Second
	start = time.Now()
	_, err = Dial(context.Background(), cfg)
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("want a failure at the 1s deadline, got %v after %s", err, time.Since(start))
	}
}

// Two jump hosts in a row (ProxyJump a,b): the target is dialed through the second, which is
// dialed through the first; every hop with its own certificate login.
func TestDialTwoHops(t *testing.T) {
	f := newCertFixture(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	hop1 := newCertServer(t, f.userCA, f.hostCA)
	hop2 := newCertServer(t, f.userCA, f.hostCA)
	target := newCertServer(t, f.userCA, f.hostCA)
	ctx := context.Background()
	c1, err := Dial(ctx, f.config(hop1.port()))
	if err != nil {
		t.Fatalf("hop 1: %v", err)
	}
	defer c1.Close()
	cfg2 := f.config(hop2.port())
	cfg2.Via = c1
	c2, err := Dial(ctx, cfg2)
	if err != nil {
		t.Fatalf("hop 2: %v", err)
	}
	defer c2.Close()
	cfg := f.config(target.port())
	cfg.Via = c2
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("target through two hops: %v", err)
	}
	_ = c.Close()
}
