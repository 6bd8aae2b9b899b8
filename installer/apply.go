package installer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// Apply converges every host to the inventory: preflight, then the first server (files,
// install, start, supervised bring-up), further servers one at a time, agents in parallel, and
// the kubeconfig. A host whose files, unit and service already match is left alone (no
// upload, no rewrite, no restart) and reported "unchanged".
func (in *Installer) Apply(ctx context.Context) error {
	start := time.Now()
	s := in.newSession()
	defer s.close()
	kubeconfig, err := s.apply(ctx)
	if err != nil && ctx.Err() != nil {
		err = &Failure{Code: ExitCancelled, Phase: "apply", Info: events.ErrorInfo{
			Message: "cancelled; the step that was running finished or was stopped before anything was half-written",
			Resume:  "re-run `k3strap apply` to continue",
		}}
	}
	var f *Failure
	if errors.As(err, &f) && f.Code != ExitPreflight {
		in.emitter(f.Phase).Fail(f.Host, f.Phase, f.Info)
	} else if err != nil && !errors.As(err, &f) {
		in.emitter("apply").Fail("", "apply", events.ErrorInfo{Message: err.Error(), Resume: "re-run `k3strap apply`"})
	}
	s.summary("apply", start, err, kubeconfig)
	return err
}

func (s *session) apply(ctx context.Context) (string, error) {
	c := s.in.cluster
	first := c.FirstServer()
	if first == nil {
		return "", &Failure{Code: ExitInvalid, Phase: "plan", Info: events.ErrorInfo{Message: "the inventory has no server", Fix: "give at least one host role: server"}}
	}
	if s.state(first.Name) == nil {
		// --host selected only agents/joining servers: the first server is still needed for
		// the token and the API.
		s.hosts = append([]*hostState{{host: first}}, s.hosts...)
	}
	planner := &Planner{Cluster: c, APIAddress: s.in.opts.APIAddress}
	s.planner = planner
	s.connect(ctx)
	s.gather(ctx)
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if _, err := s.preflight(); err != nil {
		return "", err
	}
	em := s.in.emitter("plan")
	for _, hs := range s.hosts {
		p, err := planner.Plan(hs.host, hs.facts.Arch)
		if err != nil {
			hs.setResult(events.StatusFailed, err.Error())
			return "", &Failure{Code: ExitInstall, Phase: "plan", Host: hs.host.Name, Info: events.ErrorInfo{Message: err.Error(), Resume: "fix the inventory and re-run `k3strap apply`"}}
		}
		hs.plan = p
	}
	em.Finished(events.StatusOK, "")

	fs := s.state(first.Name)
	if err := s.firstServer(ctx, fs); err != nil {
		return "", err
	}
	if err := s.joinAll(ctx, fs); err != nil {
		return "", err
	}
	kubeconfig, err := s.kubeconfig(ctx, fs)
	if err != nil {
		return "", err
	}
	return kubeconfig, s.postInstall(ctx, fs)
}

// firstServer converges and supervises the server that initialises the cluster.
func (s *session) firstServer(ctx context.Context, hs *hostState) error {
	em := s.in.emitter("init-server")
	em.Started("first server " + hs.host.Name)
	if err := s.firstServerToken(ctx, hs); err != nil {
		return err
	}
	res, err := s.converge(ctx, hs)
	if err != nil {
		return err
	}
	sup := &supervisor{s: s, hs: hs, em: s.in.emitter("supervise")}
	if err := sup.run(ctx, res); err != nil {
		hs.setResult(events.StatusFailed, "bring-up: "+firstLine(err))
		return err
	}
	hs.setResult(res.status(), res.describe())
	em.Finished(events.StatusOK, "")
	return nil
}

func firstLine(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Info.Message
	}
	return err.Error()
}

// firstServerToken decides the first server's token file: the inventory's token; else the
// one already on the host (never regenerated); else the token of a K3s installed without
// k3strap (read back); else a new one from crypto/rand.
func (s *session) firstServerToken(ctx context.Context, hs *hostState) error {
	if t := s.in.cluster.Spec.K3s.Token; t != "" {
		hs.plan.SetToken(t, false)
		return nil
	}
	if hs.facts.K3s.Files[PathTokenFile] != "" {
		hs.plan.SetToken("existing", true)
		return nil
	}
	if hs.facts.K3s.TokenPresent {
		b, err := hs.client.ReadFile(ctx, PathServerToken)
		if err != nil {
			return s.hostFailure(hs, "token", ExitInstall, fmt.Errorf("reading the existing K3s token: %w", err))
		}
		hs.plan.SetToken(inventory.Secret(TokenPassword(strings.TrimSpace(string(b)))), false)
		return nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	hs.plan.SetToken(inventory.Secret(hex.EncodeToString(buf)), false)
	return nil
}

// TokenPassword returns the password part of a K3s token: the text after "::server:" of a
// full token K10<ca hash>::server:<password> (fixtures token-format.txt), or the token itself.
func TokenPassword(token string) string {
	if _, p, ok := strings.Cut(token, "::server:"); ok {
		return p
	}
	if _, p, ok := strings.Cut(token, "::node:"); ok {
		return p
	}
	return token
}

// convergeResult says what converge changed on a host.
type convergeResult struct {
	uploaded  []string
	installed bool
	restarted bool
	started   time.Time // when the service was (re)started; zero when left running
}

func (r convergeResult) changed() bool { return len(r.uploaded) > 0 || r.installed || r.restarted }

func (r convergeResult) status() events.Status {
	if r.changed() {
		return events.StatusChanged
	}
	return events.StatusUnchanged
}

func (r convergeResult) describe() string {
	if !r.changed() {
		return "files, unit and service already match the inventory"
	}
	var parts []string
	if len(r.uploaded) > 0 {
		parts = append(parts, "wrote "+strings.Join(r.uploaded, ", "))
	}
	if r.installed {
		parts = append(parts, "ran the install script")
	}
	if r.restarted {
		parts = append(parts, "restarted the service")
	}
	return strings.Join(parts, "; ")
}

// converge makes one host match its plan: files whose checksum differs are uploaded
// (atomically), the install script runs when the unit is missing or the binary/script changed,
// and the service is (re)started when a file that needs it changed or it is not running.
func (s *session) converge(ctx context.Context, hs *hostState) (convergeResult, error) {
	var res convergeResult
	p, f := hs.plan, hs.facts
	em := s.in.emitter("upload")
	restart := false
	needInstall := f.K3s.Service != p.Service || f.K3s.ServiceEnabled != "enabled"
	for i := range p.Files {
		file := &p.Files[i]
		have := f.K3s.Files[file.Path]
		if have == file.SHA256 || (file.Keep && have != "") {
			continue
		}
		if err := s.upload(ctx, hs, file, em); err != nil {
			return res, s.hostFailure(hs, "upload", ExitInstall, err)
		}
		res.uploaded = append(res.uploaded, file.Path)
		if file.Restart {
			restart = true
		}
		if file.Path == PathBinary || file.Path == PathInstallScript {
			needInstall = true
		}
	}
	if !p.Airgap && s.in.cluster.Spec.K3s.Version != "" && f.K3s.BinaryVersion != s.in.cluster.Spec.K3s.Version {
		needInstall = true
		restart = true
	}
	if !p.Airgap && f.K3s.BinaryVersion == "" {
		needInstall = true
	}
	if needInstall {
		unitChanged, err := s.install(ctx, hs)
		if err != nil {
			return res, s.hostFailure(hs, "install", ExitInstall, err)
		}
		res.installed = true
		restart = restart || unitChanged
	}
	active := f.K3s.ServiceActive == "active" && f.K3s.Service == p.Service
	if restart || !active {
		verb := "restart"
		if !active {
			verb = "start"
		}
		res.started = time.Now()
		if _, err := hs.client.Check(ctx, startCommand(hs, verb)); err != nil {
			return res, s.hostFailure(hs, "start", ExitInstall, err)
		}
		res.restarted = true
		s.in.emitter("install").Step(hs.host.Name, "start", events.StatusChanged, fmt.Sprintf("%sed %s", verb, p.Service))
	}
	st := res.status()
	s.in.emitter("configure").Step(hs.host.Name, "converge", st, res.describe())
	return res, nil
}

// startCommand (re)starts the unit without waiting for it to become ready (the supervisor
// watches): systemd `--no-block`, OpenRC's rc-service in the background.
func startCommand(hs *hostState, verb string) remote.Cmd {
	if hs.facts.InitSystem == "openrc" {
		return remote.Script("start "+hs.plan.Service, `rc-service "$1" "$2" >/dev/null 2>&1 &`, hs.plan.Service, verb).AsRoot()
	}
	return remote.Command("systemctl", verb, "--no-block", hs.plan.Service).AsRoot()
}

func (s *session) upload(ctx context.Context, hs *hostState, f *File, em events.Emitter) error {
	r, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	last := time.Time{}
	progress := func(sent int64) {
		if now := time.Now(); now.Sub(last) > 200*time.Millisecond || sent == f.Size {
			last = now
			em.Progress(hs.host.Name, events.Upload{File: f.Path, Bytes: sent, Total: f.Size})
		}
	}
	if err := hs.client.WriteFile(ctx, f.Path, f.Mode, r, f.Size, progress); err != nil {
		return err
	}
	em.Progress(hs.host.Name, events.Upload{File: f.Path, Bytes: f.Size, Total: f.Size, Done: true})
	return nil
}

// installCmd verifies uploaded artifacts on the host, runs the install script, and says whether
// the unit or env file changed.
const installCmd = `set -e
script=$1; shift
if [ "$#" -gt 0 ]; then
  for line in "$@"; do printf '%s\n' "$line"; done | sha256sum -c --quiet --strict - \
    || { echo "uploaded file does not match its checksum (corrupted in transit?)" >&2; exit 3; }
fi
units() { cat /etc/systemd/system/k3s.service /etc/systemd/system/k3s.service.env \
  /etc/systemd/system/k3s-agent.service /etc/systemd/system/k3s-agent.service.env /etc/init.d/k3s /etc/init.d/k3s-agent 2>/dev/null || true; }
before=$(units | sha256sum)
sh "$script"
after=$(units | sha256sum)
if [ "$before" = "$after" ]; then echo "@k3strap unit-unchanged"; else echo "@k3strap unit-changed"; fi`

func (s *session) install(ctx context.Context, hs *hostState) (unitChanged bool, err error) {
	args := []string{PathInstallScript}
	for _, f := range hs.plan.Files {
		if f.LocalPath != "" {
			args = append(args, f.SHA256+"  "+f.Path)
		}
	}
	cmd := remote.Script("install K3s", installCmd, args...).AsRoot().WithEnv(hs.plan.InstallEnv...)
	s.in.emitter("install").Debug(hs.host.Name, cmd.String()+" with "+strings.Join(hs.plan.InstallEnv, " "))
	res, err := hs.client.Check(ctx, cmd)
	if err != nil {
		return false, err
	}
	changed := strings.Contains(string(res.Stdout), "@k3strap unit-changed")
	s.in.emitter("install").Step(hs.host.Name, "install", events.StatusChanged, "install script ran ("+map[bool]string{true: "unit written", false: "unit unchanged"}[changed]+")")
	return changed, nil
}

// hostFailure records err as hs's failure in step and returns the Failure.
func (s *session) hostFailure(hs *hostState, step string, code ExitCode, err error) error {
	hs.setResult(events.StatusFailed, step+": "+err.Error())
	fix := ""
	if errors.Is(err, remote.ErrSudoPassword) {
		fix = "allow NOPASSWD sudo for the SSH user, or give the sudo password (ssh.sudoPasswordEnv, ssh.sudoPasswordFile or --ask-sudo-password)"
	}
	return &Failure{Code: code, Phase: step, Host: hs.host.Name, Info: events.ErrorInfo{
		Message: fmt.Sprintf("%s failed: %v", step, err),
		Fix:     fix,
		Resume:  "fix the cause and re-run `k3strap apply`: finished steps are skipped, nothing is left half-written",
	}}
}
