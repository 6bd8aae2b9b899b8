// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package events defines what the installer tells its front-ends: typed events (phase started
// and finished, per-host steps, upload progress, preflight findings, bring-up milestones,
// warnings, errors with a fix, the final summary). The installer only emits; front-ends (the
// terminal UI, plain log lines, JSON lines) only consume. Events never carry secrets: secrets
// travel as inventory.Secret values that are never formatted into a message, and remote
// command lines never hold any.
package events

import (
	"sync"
	"time"
)

// SchemaVersion is the version of the JSON event schema (`--output json`); bumped on any
// incompatible change.
const SchemaVersion = 1

// Type names what an event is about.
type Type string

// Event types.
const (
	PhaseStarted   Type = "phase_started"
	PhaseFinished  Type = "phase_finished"
	HostStep       Type = "host_step"
	UploadProgress Type = "upload_progress"
	Finding        Type = "preflight_finding"
	Milestone      Type = "milestone"
	Warning        Type = "warning"
	Error          Type = "error"
	Info           Type = "info"
	// Debug carries remote command lines (secrets masked) for --verbose.
	Debug   Type = "debug"
	Summary Type = "summary"
)

// Status is the outcome of a step or phase.
type Status string

// Statuses.
const (
	StatusRunning   Status = "running"
	StatusOK        Status = "ok"
	StatusUnchanged Status = "unchanged"
	StatusChanged   Status = "changed"
	StatusSkipped   Status = "skipped"
	StatusFailed    Status = "failed"
)

// Event is one thing that happened. Exactly the payload matching Type is set.
type Event struct {
	// Version is SchemaVersion.
	Version int `json:"v"`
	// Time is when the event was emitted.
	Time time.Time `json:"time"`
	Type Type      `json:"type"`
	// Phase is the step or stage the event belongs to (see Phase); for the summary, the
	// command.
	Phase Phase `json:"phase,omitempty"`
	// Site is the fleet site the event belongs to (its inventory's metadata.name), "" outside
	// a fleet run and for the fleet's own events (fleet.go).
	Site string `json:"site,omitempty"`
	// Host is the inventory host name, "" for cluster-wide events.
	Host string `json:"host,omitempty"`
	// Step is the per-host step within the phase.
	Step string `json:"step,omitempty"`
	// Status is set for PhaseFinished and HostStep.
	Status Status `json:"status,omitempty"`
	// Message is one human sentence.
	Message string `json:"message,omitempty"`

	// Diff is a unified diff (apply --dry-run: a file on the host against what k3strap would
	// write; secrets masked).
	Diff string `json:"diff,omitempty"`
	// Change is one change a dry-run found pending, in machine-readable form (phase dry-run
	// and reconcile-nodes under --dry-run); the summary lists each host's (HostResult.Changes).
	Change *Change `json:"change,omitempty"`

	Upload    *Upload          `json:"upload,omitempty"`
	Finding   *PreflightResult `json:"finding,omitempty"`
	Milestone *MilestoneInfo   `json:"milestone,omitempty"`
	Error     *ErrorInfo       `json:"error,omitempty"`
	Summary   *SummaryInfo     `json:"summary,omitempty"`
	// Doctor is a `k3strap doctor` finding (type doctor_finding).
	Doctor *DoctorFinding `json:"doctor,omitempty"`
	// Wave and SiteResult are a fleet run's (types wave and site_result; fleet.go).
	Wave       *WaveInfo   `json:"wave,omitempty"`
	SiteResult *SiteResult `json:"siteResult,omitempty"`
}

// Upload is the progress of one file transfer.
type Upload struct {
	// File is the remote path.
	File string `json:"file"`
	// Bytes sent so far and Total size, in bytes.
	Bytes int64 `json:"bytes"`
	Total int64 `json:"total"`
	// Done is true on the last progress event of the file.
	Done bool `json:"done,omitempty"`
}

// PreflightResult is one preflight finding.
type PreflightResult struct {
	// Check is the stable check ID (e.g. "CloudController", "Port-6443").
	Check string `json:"check"`
	// Severity is "error", "warning" or "ignored" (an error turned into a warning by
	// --ignore-preflight-errors).
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Fix      string `json:"fix,omitempty"`
	// Evidence are the facts it rests on with their source; Commands the exact commands
	// that fix it by hand (k3strap never runs them). Both are set by the host-network checks
	// (docs/failure-modes.md "Host networks").
	Evidence []EvidenceLine `json:"evidence,omitempty"`
	Commands []string       `json:"commands,omitempty"`
}

// MilestoneInfo is one bring-up milestone of a server.
type MilestoneInfo struct {
	// Name is a stable identifier: service-active, api-ready, node-registered,
	// uninitialized-taint-gone, podcidr-set, subnet-env, node-ready, or skipped:<name>.
	Name string `json:"name"`
	// Seconds since the service was started.
	Seconds float64 `json:"seconds"`
	// Detail is extra data (the PodCIDR, subnet.env's network/subnet/MTU, ...).
	Detail string `json:"detail,omitempty"`
	// Skipped is true when the milestone does not apply (e.g. subnet.env with flannel off).
	Skipped bool `json:"skipped,omitempty"`
}

// ErrorInfo explains a failure.
type ErrorInfo struct {
	// Message says what went wrong.
	Message string `json:"message"`
	// Fix says what to do about it.
	Fix string `json:"fix,omitempty"`
	// Diagnosis is a stable ID when the failure was recognised (e.g. "F1-cloud-controller").
	Diagnosis string `json:"diagnosis,omitempty"`
	// Evidence are the facts the diagnosis rests on (journal lines, settings), one per item.
	Evidence []string `json:"evidence,omitempty"`
	// Resume says how to continue after fixing (usually: re-run apply).
	Resume string `json:"resume,omitempty"`
}

// HostResult is one host's outcome in the summary.
type HostResult struct {
	Host    string `json:"host"`
	Role    string `json:"role"`
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
	// SSHCommands and FileTransfers count the round trips the run made to the host (exec
	// channels; files written or read) — what costs time on slow edge links.
	SSHCommands   int64 `json:"sshCommands"`
	FileTransfers int64 `json:"fileTransfers"`
	// Changes are what a dry-run would change on the host (or its node), in order: the plan of
	// `apply --dry-run -o json`.
	Changes []Change `json:"changes,omitempty"`
}

// Change kinds (Change.Kind).
const (
	ChangeFile    = "file"    // a file written (Path, Mode, Size, checksums)
	ChangeInstall = "install" // the install script run (Path: the script)
	ChangeService = "service" // the unit started, restarted or enabled (Unit)
	ChangeNode    = "node"    // the node's taints or labels (Detail)
)

// Change is one change a dry-run would make. Checksums are sha256 hex; a secret file has
// neither checksum nor size (a digest of a secret lets anyone test guesses at it).
type Change struct {
	// Kind is ChangeFile, ChangeInstall, ChangeService or ChangeNode.
	Kind string `json:"kind"`
	// Action is what would be done: upload (a new file), replace, run, start, restart,
	// enable, repair or report (node drift; report when --reconcile-taints is not given).
	Action string `json:"action"`
	Path   string `json:"path,omitempty"`
	// Mode is the file's permission bits in octal ("0600").
	Mode string `json:"mode,omitempty"`
	Size int64  `json:"size,omitempty"`
	// OldSHA256 is the file on the host ("" when it is missing), NewSHA256 what k3strap writes.
	OldSHA256 string `json:"oldSha256,omitempty"`
	NewSHA256 string `json:"newSha256,omitempty"`
	Secret    bool   `json:"secret,omitempty"`
	// Restart is true for a file whose change needs the service restarted.
	Restart bool   `json:"restart,omitempty"`
	Unit    string `json:"unit,omitempty"`
	// Detail says the rest in words (node drift, the install script's source).
	Detail string `json:"detail,omitempty"`
}

// SummaryInfo closes a run.
type SummaryInfo struct {
	// Command is the k3strap command that ran (apply, preflight, ...).
	Command string `json:"command"`
	// OK is true when the run succeeded.
	OK bool `json:"ok"`
	// ExitCode is the process exit code the run ends with; ExitMeaning says what it means
	// (the command layer's table of exit codes), for front-ends to show beside it.
	ExitCode    int          `json:"exitCode"`
	ExitMeaning string       `json:"exitMeaning,omitempty"`
	Hosts       []HostResult `json:"hosts,omitempty"`
	// Kubeconfig is the path written, if any.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// RancherURL is the Rancher address, if installed.
	RancherURL string `json:"rancherURL,omitempty"`
	// RancherPasswordFile is the local file (mode 0600) holding the Rancher bootstrap password
	// k3strap generated. The password itself is never in an event.
	RancherPasswordFile string `json:"rancherPasswordFile,omitempty"`
	// RancherPasswordNew is true when this run wrote that file: a terminal front-end shows the
	// password once (read from the file, frontend.RancherPasswordLines); others name the file.
	RancherPasswordNew bool `json:"rancherPasswordNew,omitempty"`
	// Changes counts the changes a dry-run found pending (0 outside a dry-run).
	Changes int `json:"changes,omitempty"`
	// Next are suggested next commands.
	Next []string `json:"next,omitempty"`
	// Sites are a fleet run's sites in wave order, each with its outcome (pending when the run
	// did not reach it); Waves is how many waves the run planned.
	Sites []SiteResult `json:"sites,omitempty"`
	Waves int          `json:"waves,omitempty"`
	// Seconds is the run's wall time.
	Seconds float64 `json:"seconds"`
}

// Sink receives events. Implementations must be safe for concurrent use: hosts run in parallel.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// Discard drops every event.
var Discard Sink = SinkFunc(func(Event) {})

// Recorder keeps every event; for tests and for front-ends that render at the end.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Emit records e.
func (r *Recorder) Emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of what was recorded.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Tee sends every event to all sinks in order.
func Tee(sinks ...Sink) Sink {
	return SinkFunc(func(e Event) {
		for _, s := range sinks {
			s.Emit(e)
		}
	})
}

// Emitter stamps and sends events for one phase; it is what installer code holds.
type Emitter struct {
	Sink  Sink
	Phase Phase
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

func (em Emitter) send(e Event) {
	if em.Sink == nil {
		return
	}
	e.Version = SchemaVersion
	if em.Now != nil {
		e.Time = em.Now()
	} else {
		e.Time = time.Now()
	}
	if e.Phase == "" {
		e.Phase = em.Phase
	}
	em.Sink.Emit(e)
}

// Emit stamps and sends a prepared event (Version, Time and, when empty, Phase are set).
func (em Emitter) Emit(e Event) { em.send(e) }

// WithPhase returns a copy of em for another phase.
func (em Emitter) WithPhase(p Phase) Emitter { em.Phase = p; return em }

// Started emits PhaseStarted.
func (em Emitter) Started(msg string) { em.send(Event{Type: PhaseStarted, Message: msg}) }

// Finished emits PhaseFinished with status.
func (em Emitter) Finished(st Status, msg string) {
	em.send(Event{Type: PhaseFinished, Status: st, Message: msg})
}

// Step emits HostStep for host.
func (em Emitter) Step(host, step string, st Status, msg string) {
	em.send(Event{Type: HostStep, Host: host, Step: step, Status: st, Message: msg})
}

// Info emits an Info message.
func (em Emitter) Info(host, msg string) { em.send(Event{Type: Info, Host: host, Message: msg}) }

// Debug emits a Debug message (shown with --verbose).
func (em Emitter) Debug(host, msg string) { em.send(Event{Type: Debug, Host: host, Message: msg}) }

// Warn emits a Warning.
func (em Emitter) Warn(host, msg string) { em.send(Event{Type: Warning, Host: host, Message: msg}) }

// Fail emits an Error with its explanation.
func (em Emitter) Fail(host, step string, info ErrorInfo) {
	em.send(Event{Type: Error, Host: host, Step: step, Message: info.Message, Error: &info})
}

// Progress emits UploadProgress.
func (em Emitter) Progress(host string, u Upload) {
	em.send(Event{Type: UploadProgress, Host: host, Upload: &u})
}

// Finding emits a preflight finding.
func (em Emitter) Finding(host string, f PreflightResult) {
	em.send(Event{Type: Finding, Host: host, Message: f.Message, Finding: &f})
}

// Milestone emits a bring-up milestone.
func (em Emitter) Milestone(host string, m MilestoneInfo) {
	em.send(Event{Type: Milestone, Host: host, Milestone: &m})
}

// Summary emits the run's summary.
func (em Emitter) Summary(s SummaryInfo) {
	em.send(Event{Type: Summary, Summary: &s, Message: summaryMessage(s)})
}

func summaryMessage(s SummaryInfo) string {
	if s.OK {
		return s.Command + " succeeded"
	}
	return s.Command + " failed"
}
