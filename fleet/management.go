// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/fleet/sitestatus"
)

// DefaultStaleAfter is how long a site may go unseen before `fleet status` marks it stale.
const DefaultStaleAfter = time.Hour

// MergeManagement adds the management cluster's SiteStatus objects (sitestatus.Read of server)
// to the report of the state files (docs/fleet.md "Status in a management cluster"):
//   - a site both know keeps its state-file records; its status as reported is added, its
//     cluster view is the reported one when that is newer, its doctor verdict the reported one
//     when the state files have none;
//   - a site only the management cluster knows (a pull site, or a push site of another
//     operator's state files) is added after the others: its rollout status is done or failed
//     by its last result's exit code (pending before its first report);
//   - every site's LastSeen is the latest of when k3strap last reached it and its reported
//     LastSeen; a site never seen, or not seen within staleAfter before now, is stale.
//
// Source is the reported source, else push for a site the state or fleet files know, else
// pull. The totals are counted again, stale sites among them.
func (rep *Report) MergeManagement(server string, sites []sitestatus.Site, staleAfter time.Duration, now time.Time) {
	rep.Management, rep.StaleAfter = server, staleAfter.String()
	idx := map[string]int{}
	for i, s := range rep.Sites {
		idx[s.Site] = i
	}
	known := len(rep.Sites)
	for _, ms := range sites {
		i, ok := idx[ms.Name]
		if !ok {
			rep.Sites = append(rep.Sites, SiteReport{Site: ms.Name, Status: string(events.SitePending)})
			i = len(rep.Sites) - 1
			idx[ms.Name] = i
		}
		if ms.Reported {
			st := ms.Status
			rep.Sites[i].Reported = &st
		}
	}
	for i := range rep.Sites {
		m := &rep.Sites[i]
		m.Source = sitestatus.SourcePush
		if i >= known {
			m.Source = sitestatus.SourcePull
		}
		m.LastSeen = m.Reached
		if r := m.Reported; r != nil {
			if r.Source != "" {
				m.Source = r.Source
			}
			if r.LastSeen.After(m.LastSeen) {
				m.LastSeen = r.LastSeen
			}
			if (r.NodesTotal > 0 || r.Version != "") && (m.Cluster == nil || r.LastSeen.After(m.Cluster.At)) {
				m.Cluster = &Observed{Nodes: r.NodesTotal, Ready: r.NodesReady, At: r.LastSeen}
				if r.Version != "" {
					m.Cluster.Versions = strings.Split(r.Version, ",")
				}
			}
			if m.Verdict == "" {
				m.Verdict = r.DoctorVerdict
			}
			if m.Rollout == nil && m.Status == string(events.SitePending) && r.LastResult != nil {
				m.Status = string(events.SiteDone)
				if r.LastResult.ExitCode != 0 {
					m.Status = string(events.SiteFailed)
				}
			}
		}
		m.Stale = sitestatus.IsStale(m.LastSeen, now, staleAfter)
	}
	rep.total()
}
