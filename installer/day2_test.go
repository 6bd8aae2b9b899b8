package installer

import (
	"strings"
	"testing"
)

func TestLiveMajority(t *testing.T) {
	for _, c := range []struct {
		left, live int
		want       bool
	}{{2, 2, true}, {2, 1, false}, {3, 2, true}, {3, 1, false}, {1, 1, true}, {1, 0, false}, {0, 0, false}, {4, 2, false}, {4, 3, true}} {
		if got := liveMajority(c.left, c.live); got != c.want {
			t.Errorf("liveMajority(%d left, %d live) = %v, want %v", c.left, c.live, got, c.want)
		}
	}
}

// The day-two commands take the run lock before changing anything, and restore reuses apply's
// supervised bring-up of the first server.
func TestDay2Commands(t *testing.T) {
	for _, name := range []string{"backup", "backup-list", "restore", "remove-node", "rotate-certificates", "rotate-token"} {
		var phases []string
		for _, st := range Steps(name) {
			phases = append(phases, string(st.Phase))
		}
		list := strings.Join(phases, " ")
		if name != "backup-list" && !strings.Contains(list, "lock") {
			t.Errorf("%s takes no lock: %s", name, list)
		}
		if name == "restore" && !strings.Contains(list, "cluster-reset supervise bring-up rejoin-servers restart-agents") {
			t.Errorf("restore steps: %s", list)
		}
	}
}
