package installer

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
// config: it only fills what the inventory leaves unset.
type sshConfigFile struct {
	once sync.Once
	cfg  *ssh_config.Config
	err  error
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

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// endpoint is one SSH destination after the inventory and ~/.ssh/config are combined.
type endpoint struct {
	address, user, keyPath, knownHosts string
	port                               int
	timeout                            time.Duration
	jump                               *endpoint
}

// resolveEndpoint combines the inventory's explicit settings (exp) with ~/.ssh/config for
// alias, then k3strap's defaults.
func (s *session) resolveEndpoint(alias string, exp inventory.SSH, depth int) (*endpoint, error) {
	cfg, err := s.sshConfig()
	if err != nil {
		return nil, err
	}
	e := &endpoint{address: alias, user: exp.User, port: exp.Port, keyPath: exp.KeyPath, knownHosts: exp.KnownHosts, timeout: exp.ConnectTimeout.D()}
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
		if v := sshGet(cfg, alias, "IdentityFile"); v != "" {
			e.keyPath = expandHome(v)
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
	// The jump host: the inventory's bastion, else ProxyJump from ~/.ssh/config.
	if depth > 0 {
		return e, nil
	}
	if b := exp.Bastion; b != nil {
		jexp := inventory.SSH{User: b.User, Port: b.Port, KeyPath: b.KeyPath, KnownHosts: e.knownHosts, ConnectTimeout: exp.ConnectTimeout}
		if jexp.KeyPath == "" {
			jexp.KeyPath = e.keyPath
		}
		if jexp.User == "" {
			jexp.User = e.user
		}
		if e.jump, err = s.resolveEndpoint(b.Address, jexp, depth+1); err != nil {
			return nil, err
		}
	} else if pj := sshGet(cfg, alias, "ProxyJump"); pj != "" && pj != "none" {
		if strings.Contains(pj, ",") {
			return nil, fmt.Errorf("ProxyJump %q in ~/.ssh/config has several hops; k3strap supports one (set ssh.bastion)", pj)
		}
		user, hostport, ok := strings.Cut(pj, "@")
		if !ok {
			user, hostport = "", pj
		}
		host, port := hostport, 0
		if h, p, err := net.SplitHostPort(hostport); err == nil {
			host = h
			port, _ = strconv.Atoi(p)
		}
		if e.jump, err = s.resolveEndpoint(host, inventory.SSH{User: user, Port: port, KnownHosts: e.knownHosts, KeyPath: "", ConnectTimeout: exp.ConnectTimeout}, depth+1); err != nil {
			return nil, err
		}
		if e.jump.keyPath == "" {
			e.jump.keyPath = e.keyPath
		}
	}
	return e, nil
}

// remoteConfig returns how to connect to h: inventory, ~/.ssh/config, defaults; through the
// bastion when there is one (dialed once per run and shared).
func (s *session) remoteConfig(ctx context.Context, h *inventory.Host) (remote.Config, error) {
	c := s.in.cluster
	exp := c.HostSSHExplicit(h)
	// Local paths as the inventory means them ("~", relative to the inventory file); the
	// loader already resolved them for a file, a cluster built in code (the wizard) may not.
	exp.KeyPath, exp.KnownHosts = c.ResolvePath(exp.KeyPath), c.ResolvePath(exp.KnownHosts)
	if b := exp.Bastion; b != nil {
		bb := *b
		bb.KeyPath = c.ResolvePath(bb.KeyPath)
		exp.Bastion = &bb
	}
	e, err := s.resolveEndpoint(h.Address, exp, 0)
	if err != nil {
		return remote.Config{}, err
	}
	cfg := s.clientConfig(h.Name, e)
	cfg.SudoPassword = s.in.opts.SudoPassword
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

// bastion returns the shared connection to a jump host, dialing it on first use.
func (s *session) bastion(ctx context.Context, e *endpoint) (*remote.Client, error) {
	key := fmt.Sprintf("%s@%s:%d", e.user, e.address, e.port)
	s.bastionMu.Lock()
	defer s.bastionMu.Unlock()
	if c, ok := s.bastions[key]; ok {
		return c, nil
	}
	cfg := s.clientConfig("bastion "+e.address, e)
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
