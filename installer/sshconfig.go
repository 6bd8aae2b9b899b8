// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kevinburke/ssh_config"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// sshConfigFile is the user's OpenSSH client configuration, parsed once per run (nil when
// absent or disabled). The inventory wins over it, as a command line wins over OpenSSH's
// config: it only fills what the inventory leaves unset. It also holds the key passphrases
// typed on the terminal during the run (each asked once).
type sshConfigFile struct {
	once sync.Once
	path string
	cfg  *ssh_config.Config
	err  error

	passOnce sync.Once
	passTurn chan struct{} // one prompt at a time
	passMu   sync.Mutex
	typed    map[string][]byte
	// tty and ttyOut are the terminal the passphrase is read from and the prompt written to
	// (nil: os.Stdin and os.Stderr; tests give a pseudo-terminal).
	tty    *os.File
	ttyOut io.Writer
}

func (s *session) sshConfig() (*ssh_config.Config, error) {
	s.sshcfg.once.Do(func() {
		path := s.in.opts.SSHConfig
		if path == "none" {
			return
		}
		if path == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return
			}
			path = filepath.Join(home, ".ssh", "config")
		}
		s.sshcfg.path = path
		// Read only a regular file: a FIFO would block the run out of reach of Ctrl-C.
		b, err := remote.ReadRegularFile(path)
		if err != nil {
			if !os.IsNotExist(err) {
				s.sshcfg.err = fmt.Errorf("reading %s: %w", path, err)
			}
			return
		}
		s.sshcfg.cfg, s.sshcfg.err = ssh_config.Decode(bytes.NewReader(b))
		if s.sshcfg.err != nil {
			s.sshcfg.err = fmt.Errorf("parsing %s: %w", path, s.sshcfg.err)
		}
	})
	return s.sshcfg.cfg, s.sshcfg.err
}

// sshGet returns the ssh_config value of key for alias, "" when unset.
func sshGet(cfg *ssh_config.Config, alias, key string) string {
	if cfg == nil {
		return ""
	}
	v, err := cfg.Get(alias, key)
	if err != nil {
		return ""
	}
	return v
}

// sshGetAll returns every ssh_config value of key for alias, in file order (IdentityFile and
// CertificateFile accumulate, ssh_config(5)).
func sshGetAll(cfg *ssh_config.Config, alias, key string) []string {
	if cfg == nil {
		return nil
	}
	v, err := cfg.GetAll(alias, key)
	if err != nil {
		return nil
	}
	return v
}

// sshLine returns the line of the first key entry for alias in the top file (0 when it comes
// from an Include or is absent), for errors naming file and line.
func sshLine(cfg *ssh_config.Config, alias, key string) int {
	if cfg == nil {
		return 0
	}
	for _, h := range cfg.Hosts {
		if !h.Matches(alias) {
			continue
		}
		for _, n := range h.Nodes {
			if kv, ok := n.(*ssh_config.KV); ok && strings.EqualFold(kv.Key, key) {
				return kv.Pos().Line
			}
		}
	}
	return 0
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	if strings.HasPrefix(p, "%d/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "%d"))
		}
	}
	return p
}

// endpoint is one SSH destination after the inventory and ~/.ssh/config are combined.
type endpoint struct {
	// alias is the host as given (ssh_config's %n); address the name or IP dialed.
	alias, address, user, keyPath, knownHosts string
	// keyPaths are the further key files after keyPath (every IdentityFile, in order);
	// certPaths the user certificates (CertificateFile, ssh.certificatePath).
	keyPaths, certPaths []string
	// proxyCommand is the ProxyCommand with its tokens expanded ("" for none).
	proxyCommand string
	// passEnv and passFile are the inventory's passphrase sources for encrypted keys.
	passEnv, passFile string
	port              int
	timeout           time.Duration
	// jump is the hop this endpoint is reached through; its own jump the hop before it.
	jump *endpoint
}

// hop is one jump host as listed (inventory bastions or a ProxyJump entry).
type hop struct {
	address, user, keyPath string
	port                   int
}

// parseProxyJump splits an OpenSSH ProxyJump value ("[user@]host[:port],...") into hops.
func parseProxyJump(pj string) []hop {
	var out []hop
	for _, h := range strings.Split(pj, ",") {
		h = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(h), "ssh://"))
		if h == "" {
			continue
		}
		user, hostport, ok := strings.Cut(h, "@")
		if !ok {
			user, hostport = "", h
		}
		host, port := hostport, 0
		if hh, p, err := net.SplitHostPort(hostport); err == nil {
			host = hh
			port, _ = strconv.Atoi(p)
		}
		out = append(out, hop{address: host, user: user, port: port})
	}
	return out
}

// resolveEndpoint combines the inventory's explicit settings (exp) with ~/.ssh/config for
// alias, then k3strap's defaults, as OpenSSH would: every IdentityFile and CertificateFile in
// order, ProxyCommand with its tokens expanded, and a chain of jump hosts (ssh.bastions,
// ssh.bastion or a comma-separated ProxyJump), each hop resolved with its own
// ~/.ssh/config entry (user, port, keys).
func (s *session) resolveEndpoint(alias string, exp inventory.SSH, depth int) (*endpoint, error) {
	cfg, err := s.sshConfig()
	if err != nil {
		return nil, err
	}
	e := &endpoint{alias: alias, address: alias, user: exp.User, port: exp.Port, keyPath: exp.KeyPath, knownHosts: exp.KnownHosts,
		timeout: exp.ConnectTimeout.D(), passEnv: exp.KeyPassphraseEnv, passFile: exp.KeyPassphraseFile}
	if v := sshGet(cfg, alias, "HostName"); v != "" {
		e.address = v
	}
	if e.user == "" {
		e.user = sshGet(cfg, alias, "User")
	}
	if e.port == 0 {
		if p, err := strconv.Atoi(sshGet(cfg, alias, "Port")); err == nil {
			e.port = p
		}
	}
	if e.keyPath == "" {
		for _, v := range sshGetAll(cfg, alias, "IdentityFile") {
			if v == "" || strings.EqualFold(v, "none") {
				continue
			}
			if e.keyPath == "" {
				e.keyPath = expandHome(v)
			} else {
				e.keyPaths = append(e.keyPaths, expandHome(v))
			}
		}
	}
	if exp.CertificatePath != "" {
		e.certPaths = []string{exp.CertificatePath}
	} else {
		for _, v := range sshGetAll(cfg, alias, "CertificateFile") {
			if v != "" && !strings.EqualFold(v, "none") {
				e.certPaths = append(e.certPaths, expandHome(v))
			}
		}
	}
	if e.knownHosts == "" {
		if v := strings.Fields(sshGet(cfg, alias, "UserKnownHostsFile")); len(v) > 0 {
			e.knownHosts = expandHome(v[0])
		}
	}
	if e.timeout == 0 {
		if sec, err := strconv.Atoi(sshGet(cfg, alias, "ConnectTimeout")); err == nil {
			e.timeout = time.Duration(sec) * time.Second
		}
	}
	if e.user == "" {
		e.user = "root"
	}
	if e.port == 0 {
		e.port = inventory.DefaultSSHPort
	}
	if e.timeout == 0 {
		e.timeout = inventory.DefaultConnectTimeout.D()
	}
	if e.knownHosts == "" {
		e.knownHosts = expandHome("~/.ssh/known_hosts")
	}

	// The path to the host: the inventory's jump hosts or ProxyCommand, else ~/.ssh/config's
	// ProxyJump or ProxyCommand. A hop's own ProxyJump is not followed (the list is the path).
	var hops []hop
	inventoryPath := exp.Bastion != nil || len(exp.Bastions) > 0 || exp.ProxyCommand != ""
	switch {
	case depth > 0 && (exp.Bastion != nil || len(exp.Bastions) > 0):
	case exp.Bastion != nil:
		hops = []hop{{address: exp.Bastion.Address, user: exp.Bastion.User, port: exp.Bastion.Port, keyPath: exp.Bastion.KeyPath}}
	case len(exp.Bastions) > 0:
		for _, b := range exp.Bastions {
			hops = append(hops, hop{address: b.Address, user: b.User, port: b.Port, keyPath: b.KeyPath})
		}
	case !inventoryPath && depth == 0:
		if pj := sshGet(cfg, alias, "ProxyJump"); pj != "" && !strings.EqualFold(pj, "none") {
			hops = parseProxyJump(pj)
		}
	}
	if len(hops) == 0 {
		pc, where := exp.ProxyCommand, "ssh.proxyCommand"
		if pc == "" && !inventoryPath {
			pc = sshGet(cfg, alias, "ProxyCommand")
			where = fmt.Sprintf("%s (Host %s", s.sshcfg.path, alias)
			if line := sshLine(cfg, alias, "ProxyCommand"); line > 0 {
				where += fmt.Sprintf(", line %d", line)
			}
			where += ")"
		}
		if pc != "" && !strings.EqualFold(pc, "none") {
			e.proxyCommand, err = inventory.ExpandProxyCommand(pc, inventory.ProxyTokens{Host: e.address, Port: e.port, User: e.user, Alias: alias})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	// Hop i is reached through hop i-1; the host through the last.
	var prev *endpoint
	for _, h := range hops {
		jexp := inventory.SSH{User: h.user, Port: h.port, KeyPath: h.keyPath, KnownHosts: e.knownHosts, ConnectTimeout: exp.ConnectTimeout,
			KeyPassphraseEnv: exp.KeyPassphraseEnv, KeyPassphraseFile: exp.KeyPassphraseFile}
		if exp.Bastion != nil || len(exp.Bastions) > 0 {
			// The inventory's jump hosts log in like the host unless told otherwise.
			if jexp.KeyPath == "" {
				jexp.KeyPath = e.keyPath
			}
			if jexp.User == "" {
				jexp.User = e.user
			}
		}
		j, err := s.resolveEndpoint(h.address, jexp, depth+1)
		if err != nil {
			return nil, err
		}
		if j.keyPath == "" {
			j.keyPath, j.keyPaths, j.certPaths = e.keyPath, e.keyPaths, e.certPaths
		}
		if prev != nil {
			// Only the first hop may use a ProxyCommand; the next ones go through the previous.
			j.proxyCommand = ""
		}
		j.jump = prev
		prev = j
	}
	if prev != nil {
		e.jump = prev
		e.proxyCommand = ""
	}
	return e, nil
}

// remoteConfig returns how to connect to h: inventory, ~/.ssh/config, defaults; through the
// bastion when there is one (dialed once per run and shared).
func (s *session) remoteConfig(ctx context.Context, h *inventory.Host) (remote.Config, error) {
	if h.IsLocal() {
		// Local mode: no SSH settings are read (dialLocal), but sudo is checked within the
		// connect timeout as over SSH (defaulted there as remote.Dial defaults it).
		return remote.Config{Host: h.Name, Address: h.Address, SudoPassword: s.in.opts.SudoPassword, CheckSudo: true,
			ConnectTimeout: s.in.cluster.HostSSHExplicit(h).ConnectTimeout.D()}, nil
	}
	c := s.in.cluster
	exp := c.HostSSHExplicit(h)
	// Local paths as the inventory means them ("~", relative to the inventory file); the
	// loader already resolved them for a file, a cluster built in code (the wizard) may not.
	exp.KeyPath, exp.KnownHosts = c.ResolvePath(exp.KeyPath), c.ResolvePath(exp.KnownHosts)
	exp.CertificatePath, exp.KeyPassphraseFile = c.ResolvePath(exp.CertificatePath), c.ResolvePath(exp.KeyPassphraseFile)
	if b := exp.Bastion; b != nil {
		bb := *b
		bb.KeyPath = c.ResolvePath(bb.KeyPath)
		exp.Bastion = &bb
	}
	if len(exp.Bastions) > 0 {
		bs := slices.Clone(exp.Bastions)
		for i := range bs {
			bs[i].KeyPath = c.ResolvePath(bs[i].KeyPath)
		}
		exp.Bastions = bs
	}
	e, err := s.resolveEndpoint(h.Address, exp, 0)
	if err != nil {
		return remote.Config{}, err
	}
	cfg := s.clientConfig(h.Name, e)
	cfg.SudoPassword = s.in.opts.SudoPassword
	// sudo is checked within the connect deadline (remote.Config.CheckSudo; docs/architecture.md
	// "Deadlines"): a host whose sudo hangs or wants a password fails at connect.
	cfg.CheckSudo = true
	if sc := s.in.cluster.HostSSH(h); sc.Agent != nil {
		cfg.UseAgent = *sc.Agent
	}
	if e.jump != nil {
		via, err := s.bastion(ctx, e.jump)
		if err != nil {
			return remote.Config{}, err
		}
		cfg.Via = via
	}
	if s.in.opts.InsecureIgnoreHostKey {
		s.in.emitter(events.PhaseConnect).Warn(h.Name, "host key NOT verified (--insecure-ignore-host-key): anyone on the path can impersonate this host")
	}
	return cfg, nil
}

func (s *session) clientConfig(name string, e *endpoint) remote.Config {
	cfg := remote.Config{
		Host:              name,
		Address:           e.address,
		Port:              e.port,
		User:              e.user,
		KeyPath:           e.keyPath,
		KeyPaths:          e.keyPaths,
		CertificatePaths:  e.certPaths,
		Passphrase:        s.passphrase(e.passEnv, e.passFile),
		ProxyCommand:      e.proxyCommand,
		ConnectTimeout:    e.timeout,
		KeepaliveInterval: s.in.opts.KeepaliveInterval,
		UseAgent:          os.Getenv("SSH_AUTH_SOCK") != "",
		// --verbose shows every remote command (Cmd.String: masked, no secrets) and file write.
		Debug: func(msg string) { s.in.emitter(events.PhaseSSH).Debug(name, msg) },
	}
	if s.in.opts.InsecureIgnoreHostKey {
		cfg.InsecureIgnoreHostKey = true
	} else {
		cfg.KnownHosts = s.knownHosts(e.knownHosts)
	}
	return cfg
}

// bastion returns the shared connection to a jump host, dialing it on first use — through
// the hop before it when there is one (ProxyJump a,b,c: c through b through a).
func (s *session) bastion(ctx context.Context, e *endpoint) (*remote.Client, error) {
	var via *remote.Client
	if e.jump != nil {
		v, err := s.bastion(ctx, e.jump)
		if err != nil {
			return nil, err
		}
		via = v
	}
	key := fmt.Sprintf("%s@%s:%d", e.user, e.address, e.port)
	if via != nil {
		key = via.Address() + ">" + key
	}
	s.bastionMu.Lock()
	defer s.bastionMu.Unlock()
	if c, ok := s.bastions[key]; ok {
		return c, nil
	}
	cfg := s.clientConfig("bastion "+e.address, e)
	cfg.Via = via
	c, err := remote.Dial(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("jump host %s: %w", key, err)
	}
	if s.bastions == nil {
		s.bastions = map[string]*remote.Client{}
	}
	s.bastions[key] = c
	s.in.emitter(events.PhaseConnect).Info("", "connected to jump host "+key)
	return c, nil
}
