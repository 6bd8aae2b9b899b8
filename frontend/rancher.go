// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"os"
	"strings"

	"github.com/k3strap/k3strap/events"
)

// RancherPasswordLines returns what a front-end says about Rancher's bootstrap password at the
// end of a run, without the line prefix. reveal is true only for a terminal a person
// reads: when this run generated the password (SummaryInfo.RancherPasswordNew), the password is
// read from its 0600 file and shown — once, in the summary. Otherwise, and whenever the file
// cannot be read, the line names the file. nil when the summary names no file (no Rancher
// install, or a password the inventory sets). Events never carry the password itself.
func RancherPasswordLines(s *events.SummaryInfo, reveal bool) []string {
	if s == nil || s.RancherPasswordFile == "" {
		return nil
	}
	if reveal && s.RancherPasswordNew {
		if b, err := os.ReadFile(s.RancherPasswordFile); err == nil {
			if pw := strings.TrimSpace(string(b)); pw != "" && !strings.ContainsAny(pw, "\n\x1b") {
				return []string{"rancher bootstrap password: " + pw + "   (shown once; also in " + s.RancherPasswordFile + ", mode 0600)"}
			}
		}
	}
	return []string{"rancher bootstrap password: in " + s.RancherPasswordFile + " (mode 0600)"}
}
