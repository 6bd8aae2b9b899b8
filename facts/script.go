// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	_ "embed"
	"strings"

	"al.essio.dev/pkg/shellescape"

	"github.com/k3strap/k3strap/k3s"
)

// gatherScript is the POSIX sh body of Script (gather.sh): it runs under dash, busybox ash and
// bash and prints one facts document (format FormatVersion).
//
//go:embed gather.sh
var gatherScript string

// hostScript is host.sh: the host facts preflight and doctor share (clock, memory, free disk
// under K3s's data root, addresses, hostname, the K3s binary's version), as sections of the
// facts document. gather.sh runs it, and so does the doctor's node script (DoctorNodeScript);
// both parse it with Parse's section parsers (ParseHostSections), so a judgement both make
// (ClockSkew / clock-skew, Disk / disk-pressure: checkid.Shared) reads one fact gathered and
// parsed one way.
//
//go:embed host.sh
var hostScript string

// HostScript is host.sh with the host paths it reads (k3s.ShellVars) before it: what the
// facts script and the doctor's node script run with `sh -c`.
func HostScript() string { return k3s.ShellVars() + hostScript }

// FormatVersion is the facts document format that Script prints and Parse reads.
const FormatVersion = 1

// ScriptInput is what the caller tells the facts script.
type ScriptInput struct {
	// Files are absolute paths whose sha256 the script reports (read as root, since some are
	// 0600 root: the K3s env file, config.yaml, registries.yaml). Empty entries and paths
	// containing a newline are skipped (the document is line based).
	Files []string
	// ResolvConf is the resolver file the host's K3s config names (resolv-conf), "" for none:
	// its content is gathered with the files K3s would otherwise choose from.
	ResolvConf string
	// SudoPasswordOnStdin makes the script read one line from stdin first: the sudo password,
	// used only when the login user is not root and `sudo -n true` fails. The caller writes the
	// password and a newline to the remote command's stdin; it never appears on a command line.
	SudoPasswordOnStdin bool
}

// Script returns the complete facts script for in, without its comment lines
// (WithoutComments): shell-quoted assignments of the inputs and the host paths
// (k3s.ShellVars), then the embedded gather.sh as a function whose output goes through
// `gzip -c` when the host has gzip. The caller runs it as `sh -c <shell-quoted script>` over
// one SSH channel (stdin carries the sudo password when in.SudoPasswordOnStdin) and passes
// stdout to Parse.
func Script(in ScriptInput) string { return WithoutComments(script(in)) }

// WithoutComments returns script without the lines that are only a comment (blanks, then
// '#'): a third of the facts script's bytes, and most of the path probe's launcher
// (netcheck.ProbeScript). A script travels on each host's command line,
// and the SSH library keeps a buffer the size of the largest packet it sent for as long as the
// connection lives (docs/preflight.md "Cost at scale"). The scripts hold no data line that
// starts with '#' (TestScriptWithoutComments).
func WithoutComments(script string) string {
	var b strings.Builder
	b.Grow(len(script))
	for line := range strings.Lines(script) {
		if t := strings.TrimLeft(line, " \t"); strings.HasPrefix(t, "#") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// script is Script with its comments.
func script(in ScriptInput) string {
	var b strings.Builder
	b.WriteString("# k3strap facts script inputs\n")
	b.WriteString(k3s.ShellVars())
	if in.SudoPasswordOnStdin {
		b.WriteString("K3STRAP_PW_STDIN=1\n")
	} else {
		b.WriteString("K3STRAP_PW_STDIN=0\n")
	}
	b.WriteString("K3STRAP_HOST_SH=" + shellescape.Quote(HostScript()) + "\n")
	b.WriteString("K3STRAP_NETWORK_SH=" + shellescape.Quote(NetworkScript()) + "\n")
	b.WriteString("K3STRAP_RESOLV_CONF=")
	if in.ResolvConf != "" && !strings.ContainsAny(in.ResolvConf, "\n\r") {
		b.WriteString(shellescape.Quote(in.ResolvConf))
	}
	b.WriteString("\n")
	b.WriteString("set --")
	for _, f := range in.Files {
		if f == "" || strings.ContainsAny(f, "\n\r") {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(shellescape.Quote(f))
	}
	b.WriteString("\n")
	// The document goes through gzip where the host has it (Parse reads either): a tenth of
	// the bytes on a slow link, and small SSH packets, so that the SSH library does not keep
	// a 32 KiB read buffer per connection for the rest of the run (docs/preflight.md "Cost at
	// scale").
	b.WriteString("k3strap_facts() {\n")
	b.WriteString(gatherScript)
	b.WriteString("}\n")
	b.WriteString(`if command -v gzip >/dev/null 2>&1; then k3strap_facts "$@" | gzip -c; else k3strap_facts "$@"; fi` + "\n")
	return b.String()
}
