// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"time"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// The uninitialized taint that stays (docs/failure-modes.md F1).

// checkF1: the uninitialized taint present longer than the grace (docs/failure-modes.md F1),
// explained by UninitializedStall; with how long, the Pending pods and K3s's restarts.
func checkF1(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		t, ok := hasTaint(n, k3s.TaintUninitialized)
		if !ok {
			continue
		}
		age := in.Now.Sub(n.CreationTimestamp.Time)
		if t.TimeAdded != nil {
			age = in.Now.Sub(t.TimeAdded.Time)
		}
		ne := in.evidenceOf(n.Name)
		if age < in.TaintGrace {
			// Too young to judge: say it is there and since when, so the user knows what to
			// look at again (the embedded cloud controller removes it within seconds).
			since := n.CreationTimestamp.Time
			if t.TimeAdded != nil {
				since = t.TimeAdded.Time
			}
			out = append(out, finding.Finding{ID: checkid.UninitializedTaint, Severity: finding.Info, Host: n.Name,
				Title: fmt.Sprintf("%s still carries the uninitialized taint", n.Name),
				Message: fmt.Sprintf("%s has carried %s since %s (%s ago); a cloud controller removes it within seconds of registration. "+
					"It is judged after %s (--stall-grace): run doctor again after %s if it is still there.",
					n.Name, k3s.TaintUninitialized, since.UTC().Format(time.RFC3339), age.Round(time.Second), in.TaintGrace,
					since.Add(in.TaintGrace).UTC().Format(time.RFC3339)),
				Evidence: []finding.Evidence{{Text: fmt.Sprintf("taint %s=%s:%s", t.Key, t.Value, t.Effect), Source: nodeSrc(n.Name)}}})
			continue
		}
		ev := Evidence{NodeName: n.Name, Node: n, Pods: in.View.Pods, ExternalCloudController: in.ExternalCloudController, TaintAge: age}
		if ne != nil {
			ev.Journal, ev.ConfigArgs, ev.ServiceState = ne.Facts.Journal, configArgs(ne.Facts), ne.Facts.ActiveState
			ev.SubnetEnvPresent = ptrTrue(ne.Facts.SubnetEnvPresent)
		} else if srv := in.evidenceOf(in.ViewHostNode()); srv != nil {
			// An agent not reached: the server's journal still shows the embedded controller.
			ev.Journal = srv.Facts.Journal
		}
		d := UninitializedStall(ev)
		sev := finding.Error
		if d.ID == "manifest-deployer-stall" {
			sev = finding.Warning
		}
		f := fromDiagnosis(d, sev, n.Name, ne)
		if ne != nil {
			if WaitingForUntaintedNode(ne.Facts.Journal) {
				f.Evidence = append(f.Evidence, finding.Evidence{Text: "K3s waits for an untainted node (the embedded cloud controller's own wait)", Source: hostSrc(ne, "journalctl -u "+unitOf(ne))})
			}
			shutdowns, _ := ev.journalMatches(k3s.LineShutdownTaint)
			f.Evidence = append(f.Evidence, finding.Evidence{Text: fmt.Sprintf("systemd restarted %s %s; the journal shows %s on this taint", unitOf(ne),
				plural(ne.Facts.Restarts, "time", "times"), plural(shutdowns, "shutdown", "shutdowns")), Source: hostSrc(ne, "systemctl show "+unitOf(ne))})
		}
		f.Commands = []string{fmt.Sprintf("kubectl taint nodes %s %s-   # last resort, see the fixes", n.Name, k3s.TaintUninitialized)}
		out = append(out, f)
	}
	return out
}

// ViewHostNode is the node name of the host the cluster view came from.
func (in *Input) ViewHostNode() string {
	for _, ne := range in.Nodes {
		if ne.Host == in.ViewHost {
			return ne.Node
		}
	}
	return ""
}
