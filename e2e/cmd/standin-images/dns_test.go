// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// k3sCorefile is the Corefile K3s v1.36.3+k3s1 writes (server/manifests/coredns.yaml).
const k3sCorefile = `.:53 {
    errors
    health
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
    }
    hosts /etc/coredns/NodeHosts {
      ttl 60
      reload 15s
      fallthrough
    }
    prometheus :9153
    cache 30
    loop
    reload
    loadbalance
    import /etc/coredns/custom/*.override
    forward . /etc/resolv.conf
}
import /etc/coredns/custom/*.server
`

func TestParseCorefileOfK3s(t *testing.T) {
	cf, err := parseCorefile(strings.NewReader(k3sCorefile))
	if err != nil {
		t.Fatal(err)
	}
	if cf.Port != 53 || !slices.Equal(cf.Zones, []string{"cluster.local.", "in-addr.arpa.", "ip6.arpa."}) ||
		cf.HostsFile != "/etc/coredns/NodeHosts" || cf.Health != ":8080" || cf.Ready != ":8181" || cf.Prometheus != ":9153" {
		t.Errorf("parsed %+v", cf)
	}
	for _, d := range []string{"forward", "cache"} {
		if !slices.Contains(cf.Ignored, d) {
			t.Errorf("ignored %v lacks %s", cf.Ignored, d)
		}
	}
}

func TestParseCorefileErrors(t *testing.T) {
	for _, c := range []string{"", "# only a comment\n", ".:fifty-three {\n}\n"} {
		if _, err := parseCorefile(strings.NewReader(c)); err == nil {
			t.Errorf("%q: no error", c)
		}
	}
	cf, err := parseCorefile(strings.NewReader("example.org:1053 {\n  kubernetes k8s.test\n  health :9090\n}\n"))
	if err != nil || cf.Port != 1053 || cf.Zones[0] != "k8s.test." || cf.Health != ":9090" || cf.Ready != "" {
		t.Errorf("%+v %v", cf, err)
	}
}

// fakeCluster is a clusterLookup over fixed Services.
type fakeCluster struct {
	svcs map[string]service // "ns/name"
	eps  map[string][]string
	err  error
}

func (f fakeCluster) service(_ context.Context, ns, name string) (service, bool, error) {
	if f.err != nil {
		return service{}, false, f.err
	}
	s, ok := f.svcs[ns+"/"+name]
	return s, ok, nil
}

func (f fakeCluster) endpoints(_ context.Context, ns, name string) ([]string, error) {
	return f.eps[ns+"/"+name], f.err
}

func svc(ns, name, typ string, ips ...string) service {
	var s service
	s.Metadata.Name, s.Metadata.Namespace, s.Spec.Type = name, ns, typ
	if typ == "ExternalName" {
		s.Spec.ExternalName = ips[0]
		return s
	}
	s.Spec.ClusterIPs = ips
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return s
}

func testDNS(t *testing.T) *dnsServer {
	hosts := filepath.Join(t.TempDir(), "NodeHosts")
	if err := os.WriteFile(hosts, []byte("10.133.0.11 cp1\n10.133.0.12 a1 # agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &dnsServer{zone: "cluster.local.", hostsFile: hosts, log: log.New(io.Discard, "", 0), lookup: fakeCluster{
		svcs: map[string]service{
			"default/kubernetes": svc("default", "kubernetes", "ClusterIP", "10.43.0.1"),
			"default/web":        svc("default", "web", "ClusterIP", "10.43.7.7", "fd00::7"),
			"default/db":         svc("default", "db", "ClusterIP", "None"),
			"default/ext":        svc("default", "ext", "ExternalName", "example.org"),
		},
		eps: map[string][]string{"default/db": {"10.42.1.5", "10.42.0.9"}},
	}}
}

// ask sends one question through answer and parses the reply.
func ask(t *testing.T, s *dnsServer, qname string, qtype dnsmessage.Type) dnsmessage.Message {
	t.Helper()
	q := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(qname), Type: qtype, Class: dnsmessage.ClassINET}}}
	b, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(s.answer(context.Background(), b, 512)); err != nil {
		t.Fatal(err)
	}
	if m.ID != 7 || !m.Response {
		t.Fatalf("reply header %+v", m.Header)
	}
	return m
}

func answers(m dnsmessage.Message) []string {
	var out []string
	for _, a := range m.Answers {
		switch b := a.Body.(type) {
		case *dnsmessage.AResource:
			out = append(out, net.IP(b.A[:]).String())
		case *dnsmessage.AAAAResource:
			out = append(out, net.IP(b.AAAA[:]).String())
		case *dnsmessage.CNAMEResource:
			out = append(out, "CNAME "+b.CNAME.String())
		}
	}
	return out
}

func TestDNSAnswers(t *testing.T) {
	s := testDNS(t)
	for _, c := range []struct {
		name  string
		qtype dnsmessage.Type
		rcode dnsmessage.RCode
		want  []string
	}{
		{"kubernetes.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.43.0.1"}},
		{"KUBERNETES.Default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.43.0.1"}},
		// NODATA, not NXDOMAIN: the name exists (resolvers ask A and AAAA together)
		{"kubernetes.default.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, nil},
		{"web.default.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, []string{"fd00::7"}},
		{"db.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.42.1.5", "10.42.0.9"}},
		{"ext.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"CNAME example.org."}},
		{"10-42-1-5.default.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.42.1.5"}},
		{"a1.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.133.0.12"}},
		{"missing.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		// the search path's first tries for an already qualified name
		{"kubernetes.default.svc.cluster.local.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, nil},
		{"cluster.local.", dnsmessage.TypeSOA, dnsmessage.RCodeSuccess, nil},
		// nothing is forwarded
		{"example.org.", dnsmessage.TypeA, dnsmessage.RCodeRefused, nil},
		{"1.0.43.10.in-addr.arpa.", dnsmessage.TypePTR, dnsmessage.RCodeRefused, nil},
	} {
		m := ask(t, s, c.name, c.qtype)
		if m.RCode != c.rcode || !slices.Equal(answers(m), c.want) {
			t.Errorf("%s %v: %v %v, want %v %v", c.name, c.qtype, m.RCode, answers(m), c.rcode, c.want)
		}
		if c.rcode != dnsmessage.RCodeRefused && !m.Authoritative {
			t.Errorf("%s: not authoritative", c.name)
		}
		if c.rcode == dnsmessage.RCodeNameError && (len(m.Authorities) != 1 || m.Authorities[0].Header.Type != dnsmessage.TypeSOA) {
			t.Errorf("%s: NXDOMAIN without the zone's SOA: %v", c.name, m.Authorities)
		}
	}
}

func TestDNSServerFailureWhenTheAPIFails(t *testing.T) {
	s := testDNS(t)
	s.lookup = fakeCluster{err: errors.New("connection refused")}
	if m := ask(t, s, "kubernetes.default.svc.cluster.local.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeServerFailure {
		t.Errorf("rcode %v", m.RCode)
	}
}

func TestDNSTruncatesForUDP(t *testing.T) {
	s := testDNS(t)
	many := make([]string, 60)
	for i := range many {
		many[i] = "10.42.0." + string(rune('0'+i%10))
	}
	s.lookup = fakeCluster{svcs: map[string]service{"default/big": svc("default", "big", "ClusterIP", "None")},
		eps: map[string][]string{"default/big": many}}
	m := ask(t, s, "big.default.svc.cluster.local.", dnsmessage.TypeA)
	if !m.Truncated || len(m.Answers) != 0 {
		t.Errorf("truncated=%v answers=%d", m.Truncated, len(m.Answers))
	}
}

// TestGoResolverThroughTheServer: the Go resolver (what netprobe uses) over UDP and TCP, with a
// search path as a pod's resolv.conf has.
func TestGoResolverThroughTheServer(t *testing.T) {
	s := testDNS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	go s.serveUDP(ctx, pc)
	go s.serveTCP(ctx, ln)
	for _, network := range []string{"udp", "tcp"} {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, pc.LocalAddr().String())
		}}
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err := r.LookupHost(lctx, "web.default.svc.cluster.local")
		lcancel()
		slices.Sort(addrs)
		if err != nil || !slices.Equal(addrs, []string{"10.43.7.7", "fd00::7"}) {
			t.Errorf("%s: web: %v %v", network, addrs, err)
		}
		lctx, lcancel = context.WithTimeout(ctx, 5*time.Second)
		_, err = r.LookupHost(lctx, "missing.default.svc.cluster.local")
		lcancel()
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("%s: missing: %v, want not found", network, err)
		}
	}
}

// TestAPILookup: the list calls the coredns service account is allowed (list, not get), with
// the token read from its file.
func TestAPILookup(t *testing.T) {
	var paths []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-1" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		paths = append(paths, r.URL.Path+"?"+r.URL.RawQuery)
		switch r.URL.Path {
		case "/api/v1/namespaces/default/services":
			if r.URL.Query().Get("fieldSelector") == "metadata.name=web" {
				io.WriteString(w, `{"items":[{"metadata":{"name":"web","namespace":"default"},"spec":{"type":"ClusterIP","clusterIP":"10.43.7.7","clusterIPs":["10.43.7.7"]}}]}`)
				return
			}
			io.WriteString(w, `{"items":[]}`)
		case "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices":
			io.WriteString(w, `{"items":[{"endpoints":[{"addresses":["10.42.0.4"],"conditions":{"ready":true}},{"addresses":["10.42.0.5"],"conditions":{"ready":false}},{"addresses":["10.42.0.6"],"conditions":{}}]}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := apiLookup{newKubeAPI(srv.URL, tok, &tls.Config{InsecureSkipVerify: true})}
	ctx := context.Background()
	s, found, err := a.service(ctx, "default", "web")
	if err != nil || !found || s.Spec.ClusterIP != "10.43.7.7" {
		t.Errorf("web: %+v %v %v", s, found, err)
	}
	if _, found, err := a.service(ctx, "default", "nope"); err != nil || found {
		t.Errorf("nope: found=%v %v", found, err)
	}
	eps, err := a.endpoints(ctx, "default", "db")
	if err != nil || !slices.Equal(eps, []string{"10.42.0.4", "10.42.0.6"}) {
		t.Errorf("endpoints %v %v (not-ready ones left out)", eps, err)
	}
	if want := "labelSelector=kubernetes.io%2Fservice-name%3Ddb"; !strings.HasSuffix(paths[len(paths)-1], want) {
		t.Errorf("endpointslices asked as %s", paths[len(paths)-1])
	}
	if err := os.WriteFile(tok, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.service(ctx, "default", "web"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with a rotated-away token: %v (the token must be read per request)", err)
	}
}
