package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/events"
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

// ReadState reads a state file. A missing file is fs.ErrNotExist (wrapped).
func ReadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state file %s is not valid JSON (%v): move it away to start the rollout's record afresh", path, err)
	}
	if st.Version != StateVersion {
		return nil, fmt.Errorf("state file %s has format version %d; this k3strap reads version %d", path, st.Version, StateVersion)
	}
	if st.Sites == nil {
		st.Sites = map[string]*SiteState{}
	}
	return &st, nil
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
		return nil, fmt.Errorf("state file %s records fleet %s, not %s: give each fleet its own --state", path, st.Fleet, f.Metadata.Name)
	}
	if st.Shard != sh.String() && len(st.Sites) > 0 {
		return nil, fmt.Errorf("state file %s records shard %q, not %q: give each shard its own --state (the default names them apart)", path, st.Shard, sh.String())
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
	if err := writeFileAtomic(j.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the state file: %w", err)
	}
	j.written = gen
	return nil
}

// holderLine describes this process as a lock's holder: "user@host pid N since T (k3strap
// COMMAND)".
func holderLine(command string, now time.Time) string {
	u := os.Getenv("USER")
	if u == "" {
		u = strconv.Itoa(os.Getuid())
	}
	h, _ := os.Hostname()
	return fmt.Sprintf("%s@%s pid %d since %s (k3strap %s)", u, h, os.Getpid(), now.UTC().Format(time.RFC3339), command)
}
