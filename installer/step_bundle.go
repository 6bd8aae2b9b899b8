// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// bundleStep writes doctor --bundle's support bundle (a .tar.gz, mode 0600) of what doctor
// read — the cluster view (nodes, pods, events, DaemonSets, Deployments, Jobs, HelmCharts),
// per node the evidence (journal tail, config files, subnet.env, certificate dates, unit
// state) — and the findings, every text redacted (Redact); then reports doctor's verdict.
//
// Reads: s.doctor (view, nodes, report, req). Writes: the bundle file, s.doctor.report.Bundle;
// returns the verdict.
type bundleStep struct{}

func (bundleStep) Phase() events.Phase { return events.PhaseBundle }

func (bundleStep) Summary() string {
	return "write the support bundle (--bundle FILE.tar.gz, secrets redacted) and report the verdict"
}

// Preview changes nothing but the local file, which it does not write.
func (b bundleStep) Preview(_ context.Context, s *session) error {
	if s.doctor.req.Bundle != "" {
		s.in.emitter(events.PhaseBundle).Info("", "would write the support bundle "+s.doctor.req.Bundle)
	}
	return s.doctorVerdict()
}

func (bundleStep) Run(_ context.Context, s *session) error {
	ds := s.doctor
	if ds.req.Bundle != "" {
		em := s.in.emitter(events.PhaseBundle)
		n, err := s.writeBundle(ds.req.Bundle)
		if err != nil {
			return &Failure{Kind: KindError, Phase: events.PhaseBundle, Info: events.ErrorInfo{
				Message: "writing the support bundle: " + err.Error(), Fix: "give --bundle a writable path"}}
		}
		ds.report.Bundle = ds.req.Bundle
		em.Info("", fmt.Sprintf("support bundle written: %s (%d files, secrets redacted)", ds.req.Bundle, n))
	}
	return s.doctorVerdict()
}

// doctorVerdict returns the outcome of doctor: nil when healthy, a Failure of
// KindFindingsError or KindFindingsWarning otherwise (the exit codes 8 and 7).
func (s *session) doctorVerdict() error {
	ds := s.doctor
	var errs, warns []string
	for _, f := range ds.findings {
		id := f.ID
		if f.Host != "" {
			id += " (" + f.Host + ")"
		}
		switch f.Severity {
		case finding.Error:
			errs = append(errs, id)
		case finding.Warning:
			warns = append(warns, id)
		}
	}
	switch {
	case len(errs) > 0:
		return &Failure{Kind: KindFindingsError, Phase: events.PhaseFindings, Info: events.ErrorInfo{
			Message: fmt.Sprintf("doctor found %d errors: %s", len(errs), strings.Join(errs, ", ")),
			Fix:     "see each finding's evidence and fix above", Resume: "re-run `k3strap doctor` once fixed"}}
	case len(warns) > 0:
		return &Failure{Kind: KindFindingsWarning, Phase: events.PhaseFindings, Info: events.ErrorInfo{
			Message: fmt.Sprintf("doctor found %d warnings: %s", len(warns), strings.Join(warns, ", ")),
			Fix:     "see each finding's evidence and fix above"}}
	}
	return nil
}

// writeBundle writes the bundle and returns how many files it holds.
func (s *session) writeBundle(file string) (int, error) {
	ds := s.doctor
	files := map[string][]byte{}
	put := func(name string, data []byte) { files[name] = data }
	putJSON := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		put(name, Redact(b))
		return nil
	}
	for res, raw := range ds.view.Raw {
		put("cluster/"+strings.SplitN(res, ".", 2)[0]+".json", Redact(raw))
	}
	if len(ds.view.Errors) > 0 {
		if err := putJSON("cluster/errors.json", ds.view.Errors); err != nil {
			return 0, err
		}
	}
	for host, ne := range ds.nodes {
		dir := "nodes/" + safeName(host) + "/"
		if ne.Err != "" {
			put(dir+"error.txt", []byte(k3s.Mask(ne.Err)+"\n"))
		}
		if ne.Facts == nil {
			continue
		}
		f := *ne.Facts
		put(dir+"journal.txt", []byte(k3s.Mask(strings.Join(f.Journal, "\n"))+"\n"))
		for _, p := range f.ConfigPaths {
			put(dir+"config"+p, []byte(k3s.Mask(f.ConfigFiles[p])))
		}
		if f.SubnetEnv != "" {
			put(dir+"subnet.env", []byte(f.SubnetEnv))
		}
		f.Journal, f.ConfigFiles = nil, nil
		if err := putJSON(dir+"evidence.json", struct {
			Host, Node       string
			ClockSkewSeconds float64
			Facts            any
		}{host, ne.Node, ne.ClockSkew.Seconds(), f}); err != nil {
			return 0, err
		}
	}
	var fs []events.DoctorFinding
	for _, f := range ds.report.Findings {
		fs = append(fs, doctorEvent(f))
	}
	if err := putJSON("findings.json", fs); err != nil {
		return 0, err
	}
	put("README.txt", []byte(fmt.Sprintf("k3strap doctor support bundle, %s\n\n"+
		"cluster/   the cluster view read through %s (kubectl get ... -A -o json)\n"+
		"nodes/     per host: evidence.json (unit, restarts, certificates, disk, memory, clock), journal.txt (K3s unit, tail),\n"+
		"           config/ (K3s config files; secret keys left out on the host), subnet.env\n"+
		"findings.json  what doctor found\n\n"+
		"Secrets are redacted: config keys holding secrets are never read, every text is masked (tokens, passwords,\n"+
		"secret environment values, private keys, kubeconfig credentials). No Secret object, token file, key file or\n"+
		"kubeconfig is read.\n", time.Now().UTC().Format(time.RFC3339), viewHostName(ds))))
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	now := time.Now()
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: path.Join("k3strap-doctor", n), Mode: 0o600, Size: int64(len(files[n])), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return 0, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	if err := gz.Close(); err != nil {
		return 0, err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return 0, err
	}
	return len(names), os.Rename(tmp, file)
}

func viewHostName(ds *doctorState) string {
	if ds.viewHost == nil {
		return "(no server answered)"
	}
	return ds.viewHost.host.Name
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

// privateKeyRE matches a PEM private key block.
var privateKeyRE = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----`)

// Redact returns JSON document raw with every secret removed: values of secret keys
// (k3s.IsSecretKey: token, *password*, ...; kubeconfig credentials *-key-data,
// client-certificate-data, and "data" of Secrets), the value of an environment entry whose name
// is secret ({"name": "CATTLE_BOOTSTRAP_PASSWORD", "value": ...}), private keys, and k3s.Mask
// over every other string (K3s tokens, NAME=value pairs, --token flags, YAML lines of embedded
// values such as a HelmChart's valuesContent). Not JSON: k3s.Mask of the text.
func Redact(raw []byte) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return []byte(k3s.Mask(privateKeyRE.ReplaceAllString(string(raw), k3s.Masked)))
	}
	v = redactValue(v, "")
	out, err := json.Marshal(v)
	if err != nil {
		return []byte(k3s.Masked)
	}
	return out
}

func secretField(k string) bool {
	lk := strings.ToLower(k)
	return k3s.IsSecretKey(k) || strings.HasSuffix(lk, "-key-data") || strings.HasSuffix(lk, "keydata") ||
		lk == "client-certificate-data" || lk == "privatekey" || lk == "private-key" || strings.Contains(lk, "secretkey") ||
		(k == strings.ToUpper(k) && k3s.IsSecretEnv(k))
}

func redactValue(v any, key string) any {
	switch t := v.(type) {
	case map[string]any:
		// An environment entry: {"name": SECRET_NAME, "value": ...}.
		if n, ok := t["name"].(string); ok && k3s.IsSecretEnv(n) {
			if _, ok := t["value"]; ok {
				t["value"] = k3s.Masked
			}
		}
		// A Secret's data never leaves the host.
		if t["kind"] == "Secret" {
			delete(t, "data")
			delete(t, "stringData")
		}
		for k, x := range t {
			if secretField(k) {
				if _, isStr := x.(string); isStr || x == nil {
					t[k] = k3s.Masked
					continue
				}
			}
			t[k] = redactValue(x, k)
		}
		return t
	case []any:
		for i := range t {
			t[i] = redactValue(t[i], key)
		}
		return t
	case string:
		// JSON inside a string (kubectl's last-applied-configuration annotation, a
		// HelmChart's values) is redacted as JSON.
		if ts := strings.TrimSpace(t); strings.HasPrefix(ts, "{") || strings.HasPrefix(ts, "[") {
			var inner any
			if json.Unmarshal([]byte(ts), &inner) == nil {
				if b, err := json.Marshal(redactValue(inner, key)); err == nil {
					return string(b)
				}
			}
		}
		return k3s.Mask(privateKeyRE.ReplaceAllString(t, k3s.Masked))
	}
	return v
}
