// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/objects"
)

func splitObjects(data []byte) ([]map[string]any, error) { return objects.Split(data) }

// get implements `kubectl get`.
func (k *kubectl) get() error {
	if raw := k.in.flag("raw"); raw != "" {
		data, err := k.do("GET", raw, "", nil)
		if err != nil {
			return serverErr(err, "")
		}
		_, _ = k.opts.Stdout.Write(data)
		return nil
	}
	if k.in.bool("watch") || k.in.bool("watch-only") {
		return k.watch()
	}
	if len(k.in.pos) == 0 {
		return failf("You must specify the type of resource to get. Use \"kubectl api-resources\" for a complete list of supported resources.\n\nerror: Required resource not specified.")
	}
	type req struct {
		res  resInfo
		name string
	}
	var reqs []req
	args := k.in.pos
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			typ, name, _ := strings.Cut(a, "/")
			r, err := k.resolve(typ)
			if err != nil {
				return err
			}
			reqs = append(reqs, req{r, name})
		}
	} else {
		for _, typ := range strings.Split(args[0], ",") {
			r, err := k.resolve(typ)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				reqs = append(reqs, req{r, ""})
			}
			for _, n := range args[1:] {
				reqs = append(reqs, req{r, n})
			}
		}
	}
	allNS := k.in.bool("all-namespaces")
	ns := k.namespace()
	var items []map[string]any
	var kinds []resInfo
	single := len(reqs) == 1 && reqs[0].name != ""
	var notFound []string
	for _, rq := range reqs {
		if rq.name != "" {
			data, err := k.do("GET", rq.res.path(ns, rq.name), "", nil)
			if err != nil {
				if isNotFound(err) && !single {
					notFound = append(notFound, serverErr(err, "").Error())
					continue
				}
				if isNotFound(err) && k.in.bool("ignore-not-found") {
					continue
				}
				return serverErr(err, "")
			}
			var o map[string]any
			if err := json.Unmarshal(data, &o); err != nil {
				return err
			}
			items = append(items, o)
			kinds = append(kinds, rq.res)
			continue
		}
		lns := ns
		if allNS {
			lns = ""
		}
		q := url.Values{}
		if s := k.in.flag("selector"); s != "" {
			q.Set("labelSelector", s)
		}
		if s := k.in.flag("field-selector"); s != "" {
			q.Set("fieldSelector", s)
		}
		path := rq.res.path(lns, "")
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		data, err := k.do("GET", path, "", nil)
		if err != nil {
			return serverErr(err, "")
		}
		var list struct {
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			return err
		}
		for _, it := range list.Items {
			items = append(items, it)
			kinds = append(kinds, rq.res)
		}
	}
	for _, it := range items {
		if !k.in.bool("show-managed-fields") {
			delete(objects.Meta(it), "managedFields")
		}
	}
	err := k.print(items, kinds, single, allNS)
	if len(notFound) > 0 {
		return failf("%s", strings.Join(notFound, "\n"))
	}
	return err
}

func (k *kubectl) print(items []map[string]any, kinds []resInfo, single, allNS bool) error {
	out := k.in.flag("output")
	w := k.opts.Stdout
	var doc any
	if single && len(items) == 1 {
		doc = items[0]
	} else {
		list := make([]any, len(items))
		for i := range items {
			list[i] = items[i]
		}
		doc = map[string]any{"apiVersion": "v1", "kind": "List", "items": list, "metadata": map[string]any{"resourceVersion": ""}}
	}
	switch {
	case out == "json":
		return writeJSON(w, doc)
	case out == "yaml":
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, _ = w.Write(y)
		return nil
	case out == "name":
		for i, it := range items {
			fmt.Fprintf(w, "%s/%s\n", kinds[i].typeName(), objects.Str(objects.Meta(it), "name"))
		}
		return nil
	case strings.HasPrefix(out, "jsonpath="), strings.HasPrefix(out, "jsonpath-as-json="):
		tmpl := out[strings.Index(out, "=")+1:]
		jp := jsonpath.New("out").AllowMissingKeys(true)
		if err := jp.Parse(tmpl); err != nil {
			return failf("error: error parsing jsonpath %s, %v", tmpl, err)
		}
		return jp.Execute(w, normalize(doc))
	case out == "" || out == "wide":
		if len(items) == 0 {
			if allNS || k.in.flag("namespace") == "" {
				fmt.Fprintln(k.opts.Stderr, "No resources found")
			} else {
				fmt.Fprintf(k.opts.Stderr, "No resources found in %s namespace.\n", k.namespace())
			}
			return nil
		}
		return k.table(items, kinds, allNS, out == "wide")
	}
	return failf("error: unable to match a printer suitable for the output format %q", out)
}

// writeJSON prints like kubectl -o json: 4-space indent, sorted keys, trailing newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func (k *kubectl) table(items []map[string]any, kinds []resInfo, allNS, wide bool) error {
	tw := tabwriter.NewWriter(k.opts.Stdout, 6, 4, 3, ' ', 0)
	lastKind := ""
	for i, it := range items {
		r := kinds[i]
		if r.plural != lastKind {
			if lastKind != "" {
				fmt.Fprintln(tw)
			}
			lastKind = r.plural
			hdr := headers(r.plural, wide)
			if allNS && r.namespaced {
				hdr = append([]string{"NAMESPACE"}, hdr...)
			}
			if !k.in.bool("no-headers") {
				fmt.Fprintln(tw, strings.Join(hdr, "\t"))
			}
		}
		row := columns(r.plural, it, wide)
		if len(kinds) > 1 && kinds[0].plural != kinds[len(kinds)-1].plural {
			row[0] = r.typeName() + "/" + row[0]
		}
		if allNS && r.namespaced {
			row = append([]string{objects.Str(objects.Meta(it), "namespace")}, row...)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func headers(plural string, wide bool) []string {
	switch plural {
	case "nodes":
		if wide {
			return []string{"NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"}
		}
		return []string{"NAME", "STATUS", "ROLES", "AGE", "VERSION"}
	case "pods":
		if wide {
			return []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"}
		}
		return []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	case "deployments":
		return []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"}
	case "daemonsets":
		return []string{"NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"}
	case "jobs":
		return []string{"NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"}
	case "namespaces":
		return []string{"NAME", "STATUS", "AGE"}
	case "services":
		return []string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"}
	}
	return []string{"NAME", "AGE"}
}

// get walks a path of map keys.
func get(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}

func gs(o any, path ...string) string {
	v := get(o, path...)
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func gi(o any, path ...string) int {
	if f, ok := get(o, path...).(float64); ok {
		return int(f)
	}
	return 0
}

func age(o map[string]any) string {
	t, err := time.Parse(time.RFC3339, gs(o, "metadata", "creationTimestamp"))
	if err != nil {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func columns(plural string, o map[string]any, wide bool) []string {
	name := gs(o, "metadata", "name")
	switch plural {
	case "nodes":
		status := "Unknown"
		conds, _ := get(o, "status", "conditions").([]any)
		for _, c := range conds {
			if gs(c, "type") == "Ready" {
				switch gs(c, "status") {
				case "True":
					status = "Ready"
				default:
					status = "NotReady"
				}
			}
		}
		if b, _ := get(o, "spec", "unschedulable").(bool); b {
			status += ",SchedulingDisabled"
		}
		var roles []string
		labels, _ := get(o, "metadata", "labels").(map[string]any)
		for l := range labels {
			if r, ok := strings.CutPrefix(l, "node-role.kubernetes.io/"); ok {
				roles = append(roles, r)
			}
		}
		sort.Strings(roles)
		row := []string{name, status, orNone(strings.Join(roles, ",")), age(o), gs(o, "status", "nodeInfo", "kubeletVersion")}
		if wide {
			internal, external := "", ""
			addrs, _ := get(o, "status", "addresses").([]any)
			for _, a := range addrs {
				switch gs(a, "type") {
				case "InternalIP":
					internal = gs(a, "address")
				case "ExternalIP":
					external = gs(a, "address")
				}
			}
			row = append(row, orNone(internal), orNone(external), gs(o, "status", "nodeInfo", "osImage"),
				gs(o, "status", "nodeInfo", "kernelVersion"), gs(o, "status", "nodeInfo", "containerRuntimeVersion"))
		}
		return row
	case "pods":
		ctrs, _ := get(o, "spec", "containers").([]any)
		statuses, _ := get(o, "status", "containerStatuses").([]any)
		ready, restarts := 0, 0
		reason := gs(o, "status", "phase")
		for _, cs := range statuses {
			if b, _ := get(cs, "ready").(bool); b {
				ready++
			}
			restarts += gi(cs, "restartCount")
			if r := gs(cs, "state", "waiting", "reason"); r != "" {
				reason = r
			}
			if r := gs(cs, "state", "terminated", "reason"); r != "" {
				reason = r
			}
		}
		row := []string{name, fmt.Sprintf("%d/%d", ready, len(ctrs)), reason, fmt.Sprint(restarts), age(o)}
		if wide {
			row = append(row, orNone(gs(o, "status", "podIP")), orNone(gs(o, "spec", "nodeName")), "<none>", "<none>")
		}
		return row
	case "deployments":
		return []string{name, fmt.Sprintf("%d/%d", gi(o, "status", "readyReplicas"), specReplicas(o)),
			fmt.Sprint(gi(o, "status", "updatedReplicas")), fmt.Sprint(gi(o, "status", "availableReplicas")), age(o)}
	case "daemonsets":
		sel, _ := get(o, "spec", "template", "spec", "nodeSelector").(map[string]any)
		var parts []string
		for k2, v := range sel {
			parts = append(parts, fmt.Sprintf("%s=%v", k2, v))
		}
		sort.Strings(parts)
		return []string{name, fmt.Sprint(gi(o, "status", "desiredNumberScheduled")), fmt.Sprint(gi(o, "status", "currentNumberScheduled")),
			fmt.Sprint(gi(o, "status", "numberReady")), fmt.Sprint(gi(o, "status", "updatedNumberScheduled")),
			fmt.Sprint(gi(o, "status", "numberAvailable")), orNone(strings.Join(parts, ",")), age(o)}
	case "jobs":
		status := "Running"
		conds, _ := get(o, "status", "conditions").([]any)
		for _, c := range conds {
			if gs(c, "status") == "True" && (gs(c, "type") == "Complete" || gs(c, "type") == "Failed") {
				status = gs(c, "type")
			}
		}
		return []string{name, status, fmt.Sprintf("%d/1", gi(o, "status", "succeeded")), "-", age(o)}
	case "namespaces":
		return []string{name, orNone(gs(o, "status", "phase")), age(o)}
	case "services":
		ports, _ := get(o, "spec", "ports").([]any)
		var ps []string
		for _, p := range ports {
			ps = append(ps, fmt.Sprintf("%d/%s", gi(p, "port"), gs(p, "protocol")))
		}
		return []string{name, gs(o, "spec", "type"), orNone(gs(o, "spec", "clusterIP")), "<none>", orNone(strings.Join(ps, ",")), age(o)}
	}
	return []string{name, age(o)}
}

func specReplicas(o map[string]any) int {
	if v := get(o, "spec", "replicas"); v != nil {
		return gi(o, "spec", "replicas")
	}
	return 1
}

// watch implements `kubectl get RESOURCE [NAME] --watch -o json [--output-watch-events]`, the
// subset k3strap uses: the current objects first (unless --watch-only), then every change, each
// printed as indented JSON (wrapped in {"type": ..., "object": ...} with
// --output-watch-events), until the server ends the watch or kubectl is killed.
func (k *kubectl) watch() error {
	if o := k.in.flag("output"); o != "json" {
		return failf("error: the k3strap K3s simulator's kubectl watches only with -o json (got %q)", o)
	}
	if len(k.in.pos) == 0 || len(k.in.pos) > 2 || strings.Contains(k.in.pos[0], ",") {
		return failf("error: watch is only supported on individual resources and resource object names")
	}
	r, err := k.resolve(k.in.pos[0])
	if err != nil {
		return err
	}
	ns := k.namespace()
	if k.in.bool("all-namespaces") {
		ns = ""
	}
	q := url.Values{}
	if len(k.in.pos) == 2 {
		q.Set("fieldSelector", "metadata.name="+k.in.pos[1])
	}
	if sel := k.in.flag("selector"); sel != "" {
		q.Set("labelSelector", sel)
	}
	data, err := k.do("GET", r.path(ns, "")+"?"+q.Encode(), "", nil)
	if err != nil {
		return serverErr(err, "")
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return err
	}
	events := k.in.bool("output-watch-events")
	print := func(typ string, obj json.RawMessage) error {
		var v any = obj
		if events {
			v = struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}{typ, obj}
		}
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(k.opts.Stdout, "%s\n", b)
		return err
	}
	if !k.in.bool("watch-only") {
		for _, it := range list.Items {
			if err := print("ADDED", it); err != nil {
				return err
			}
		}
	}
	q.Set("watch", "true")
	q.Set("resourceVersion", list.Metadata.ResourceVersion)
	req, err := http.NewRequestWithContext(k.ctx, "GET", k.base+r.path(ns, "")+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return failf("Unable to connect to the server: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return serverErr(&apiError{code: resp.StatusCode, body: string(b)}, "")
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) || k.ctx.Err() != nil {
				return nil
			}
			return failf("error: watch stream: %v", err)
		}
		if ev.Type == "BOOKMARK" {
			continue
		}
		if err := print(ev.Type, ev.Object); err != nil {
			return err
		}
	}
}
