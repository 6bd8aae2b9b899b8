// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/lock"
	"github.com/k3strap/k3strap/internal/atomicfile"
)

// StateVersion is the format version of state files; a file of another version is refused.
const StateVersion = 1

// State is a fleet's progress as one state file holds it (JSON, written atomically after
// every site transition; docs/fleet.md#state). It never holds a secret: digests do not depend
// on one (digest.go), messages are the events' (which carry none).
type State struct {
	Version int `json:"version"`
	// Fleet is the fleet's metadata.name; FleetFile the fleet file it came from.
	Fleet     string `json:"fleet"`
	FleetFile string `json:"fleetFile"`
	// Shard is the part of the fleet the file records ("2/4"), "" for the whole fleet.
	Shard string `json:"shard,omitempty"`
	// Updated is the last write.
	Updated time.Time `json:"updated"`
	// Sites by name.
	Sites map[string]*SiteState `json:"sites"`
}

// SiteState is what the state records of one site.
type SiteState struct {
	// Inventory is the site's inventory file.
	Inventory string `json:"inventory"`
	// Wave is the site's wave in the last run that planned it.
	Wave int `json:"wave,omitempty"`
	// Rollout is the last apply or upgrade: a site is done when Rollout.Status is done.
	Rollout *Record `json:"rollout,omitempty"`
	// Preflight, Check and Doctor are the last runs of these commands (Check also when a
	// rollout checked a done site).
	Preflight *Record `json:"preflight,omitempty"`
	Check     *Record `json:"check,omitempty"`
	Doctor    *Record `json:"doctor,omitempty"`
	// Cluster is the cluster as last seen (apply's node step, check).
	Cluster *Observed `json:"cluster,omitempty"`
	// Reached is when a host of the site last answered k3strap (any command's connect).
	Reached time.Time `json:"reached,omitzero"`
}

// Record is one command's outcome on a site.
type Record struct {
	Command string            `json:"command"`
	Status  events.SiteStatus `json:"status"`
	// Digest is the site's digest the command ran with (rollouts).
	Digest string `json:"digest,omitempty"`
	// ExitCode is the exit code the command ended with on the site, Exit its meaning.
	ExitCode int    `json:"exitCode"`
	Exit     string `json:"exit,omitempty"`
	// Host, Phase and Message say what failed, or what happened.
	Host    string `json:"host,omitempty"`
	Phase   string `json:"phase,omitempty"`
	Message string `json:"message,omitempty"`
	// Started and Finished bound the run (Finished is zero while it runs).
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	// Checked is the last time a rollout checked the done site instead of running it again.
	Checked time.Time `json:"checked,omitzero"`
	// Verdict is doctor's: healthy, warnings, errors, or failed (doctor did not finish).
	Verdict string `json:"verdict,omitempty"`
	// Attempts is how many times the run tried the site when it was unreachable (status
	// deferred, or failed with rollout.unreachable.countAsFailed).
	Attempts int `json:"attempts,omitempty"`
}

// Observed is a site's cluster as a run saw it.
type Observed struct {
	// Versions are the nodes' kubelet versions, distinct, sorted ("v1.36.3+k3s1").
	Versions []string `json:"versions,omitempty"`
	// Nodes and Ready count the nodes and those whose Ready condition is True.
	Nodes int       `json:"nodes"`
	Ready int       `json:"ready"`
	At    time.Time `json:"at"`
}

// StatePath returns the default state file of a fleet file: next to it, named after it
// ("fleet.yaml" → "fleet.state.json"; with a shard "fleet.shard-2-of-4.state.json").
func StatePath(fleetFile string, sh Shard) string {
	base := strings.TrimSuffix(fleetFile, filepath.Ext(fleetFile))
	if sh.N > 0 {
		return fmt.Sprintf("%s.shard-%d-of-%d.state.json", base, sh.I, sh.N)
	}
	return base + ".state.json"
}

// StatePaths returns every default state file of a fleet file that exists: the whole fleet's
// and each shard's (what `k3strap fleet status` merges when given no --state).
func StatePaths(fleetFile string) []string {
	base := strings.TrimSuffix(fleetFile, filepath.Ext(fleetFile))
	var out []string
	if _, err := os.Stat(base + ".state.json"); err == nil {
		out = append(out, base+".state.json")
	}
	m, _ := filepath.Glob(globEscape(base) + ".shard-*-of-*.state.json")
	return append(out, m...)
}

// globEscape escapes glob metacharacters of a literal path.
func globEscape(p string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)
	return r.Replace(p)
}

// StateError is a state file k3strap refuses: unreadable as a state (truncated, not JSON,
// another format version) or recording another fleet or shard. It names the file and the fix;
// the command layer reports it as invalid input (exit 2) whichever command read the file.
type StateError struct {
	// Path is the state file.
	Path string
	// Problem says what is wrong, Fix what to do.
	Problem, Fix string
}

// Error formats the problem as "state file PATH: PROBLEM — fix: FIX".
func (e *StateError) Error() string {
	return fmt.Sprintf("state file %s: %s — fix: %s", e.Path, e.Problem, e.Fix)
}

// ReadState reads a state file. A missing file is fs.ErrNotExist (wrapped); a file that is
// not a state file of this format (truncated, not JSON, another version) is a *StateError.
func ReadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		problem := "is not valid JSON"
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			problem = fmt.Sprintf("is not valid JSON (at byte %d of %d)", se.Offset, len(b))
		case len(b) == 0 || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON input"):
			problem = fmt.Sprintf("is truncated (%d bytes)", len(b))
		}
		return nil, &StateError{Path: path, Problem: problem,
			Fix: "move it away (mv " + path + " " + path + ".bad) to start the rollout's record afresh; done sites are then checked again, not re-run blindly"}
	}
	if st.Version != StateVersion {
		return nil, &StateError{Path: path, Problem: fmt.Sprintf("has format version %d; this k3strap reads version %d", st.Version, StateVersion),
			Fix: "use the k3strap release that wrote it, or move it away to start afresh"}
	}
	if st.Sites == nil {
		st.Sites = map[string]*SiteState{}
	}
	return &st, nil
}

// CheckStates refuses state files that do not belong together: each records the fleet it
// belongs to (State.Fleet), which must be f's metadata.name when f is given, and the same for
// every file. The first mismatch is a *StateError naming the file.
func CheckStates(f *Fleet, states map[string]*State) error {
	want, from := "", ""
	if f != nil {
		want, from = f.Metadata.Name, "the fleet file "+f.Source
	}
	paths := make([]string, 0, len(states))
	for p := range states {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		got := states[p].Fleet
		switch {
		case got == "":
			continue
		case want == "":
			want, from = got, "state file "+p
		case got != want:
			return &StateError{Path: p, Problem: fmt.Sprintf("records fleet %s, not %s (%s)", got, want, from),
				Fix: "give the state files of one fleet only (--state), or the fleet file they belong to (-f)"}
		}
	}
	return nil
}

// Journal is a state file a run holds (under its lock) and writes after every change.
type Journal struct {
	path string
	now  func() time.Time

	// mu guards st and gen, the number of changes made to st.
	mu  sync.Mutex
	st  *State
	gen uint64
	// wmu serializes writes; written is the gen the file holds.
	wmu     sync.Mutex
	written uint64
}

// OpenJournal reads the state file at path (a new state when it does not exist) for fleet f
// and shard sh. The caller holds the lock (Lock).
func OpenJournal(path string, f *Fleet, sh Shard, now func() time.Time) (*Journal, error) {
	if now == nil {
		now = time.Now
	}
	st, err := ReadState(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st = &State{Version: StateVersion, Sites: map[string]*SiteState{}}
	case err != nil:
		return nil, err
	}
	if st.Fleet != "" && st.Fleet != f.Metadata.Name {
		return nil, &StateError{Path: path, Problem: fmt.Sprintf("records fleet %s, not %s", st.Fleet, f.Metadata.Name), Fix: "give each fleet its own --state"}
	}
	if st.Shard != sh.String() && len(st.Sites) > 0 {
		return nil, &StateError{Path: path, Problem: fmt.Sprintf("records shard %q, not %q", st.Shard, sh.String()), Fix: "give each shard its own --state (the default names them apart)"}
	}
	abs, _ := filepath.Abs(f.Source)
	st.Fleet, st.FleetFile, st.Shard = f.Metadata.Name, abs, sh.String()
	return &Journal{path: path, now: now, st: st}, nil
}

// Path is the state file's path.
func (j *Journal) Path() string { return j.path }

// Site returns a copy of site's state (zero when the state has none).
func (j *Journal) Site(name string) SiteState {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s := j.st.Sites[name]; s != nil {
		return *s
	}
	return SiteState{}
}

// Update changes site's state with change and returns once the file holds the change, written
// atomically (a temporary file in the same directory, synced, renamed over the state file): a
// reader — or the next run after a crash — sees the state before or after the change, never
// half of it. Concurrent updates share writes: an update that waited for another's write
// finds its change already in the file when that write took it along.
func (j *Journal) Update(name string, change func(s *SiteState)) error {
	j.mu.Lock()
	s := j.st.Sites[name]
	if s == nil {
		s = &SiteState{}
		j.st.Sites[name] = s
	}
	change(s)
	j.st.Updated = j.now().UTC()
	j.gen++
	mine := j.gen
	j.mu.Unlock()

	j.wmu.Lock()
	defer j.wmu.Unlock()
	if j.written >= mine {
		return nil
	}
	j.mu.Lock()
	b, err := json.MarshalIndent(j.st, "", "  ")
	gen := j.gen
	j.mu.Unlock()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(j.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the state file: %w", err)
	}
	j.written = gen
	return nil
}

// holderLine describes this process as a lock's holder (lock.Holder: the user name, not a
// uid).
func holderLine(command string, now time.Time) string {
	return lock.Holder(command, now)
}
