// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsTTL is the TTL of every answer, CoreDNS's kubernetes plugin default (5 s).
const dnsTTL = 5

// clusterLookup finds what the cluster zone's names point at.
type clusterLookup interface {
	// service returns the Service ns/name, found false when it does not exist.
	service(ctx context.Context, ns, name string) (svc service, found bool, err error)
	// endpoints returns the ready addresses of the Service's EndpointSlices (headless Services).
	endpoints(ctx context.Context, ns, name string) ([]string, error)
}

// apiLookup reads Services and EndpointSlices through the Kubernetes API with list calls, the
// verbs K3s's system:coredns ClusterRole grants.
type apiLookup struct{ api *kubeAPI }

func (a apiLookup) service(ctx context.Context, ns, name string) (service, bool, error) {
	var l serviceList
	err := a.api.get(ctx, "/api/v1/namespaces/"+url.PathEscape(ns)+"/services", url.Values{"fieldSelector": {"metadata.name=" + name}}, &l)
	if err != nil || len(l.Items) == 0 {
		return service{}, false, err
	}
	return l.Items[0], true, nil
}

func (a apiLookup) endpoints(ctx context.Context, ns, name string) ([]string, error) {
	var l endpointSliceList
	err := a.api.get(ctx, "/apis/discovery.k8s.io/v1/namespaces/"+url.PathEscape(ns)+"/endpointslices", url.Values{"labelSelector": {"kubernetes.io/service-name=" + name}}, &l)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			out = append(out, e.Addresses...)
		}
	}
	return out, nil
}

// answer builds the response to the DNS message q, at most max bytes (truncated, TC set,
// beyond); nil when q is not a query worth answering.
func (s *dnsServer) answer(ctx context.Context, q []byte, max int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 || h.OpCode != 0 {
		resp.RCode = dnsmessage.RCodeFormatError
		if h.OpCode != 0 {
			resp.RCode = dnsmessage.RCodeNotImplemented
		}
		return build(resp, qs, nil, nil, max)
	}
	question := qs[0]
	res := s.resolve(ctx, question)
	resp.RCode, resp.Authoritative = res.rcode, res.authoritative
	var authority []dnsmessage.Resource
	if res.authoritative && len(res.answers) == 0 {
		authority = []dnsmessage.Resource{s.soa()}
	}
	return build(resp, qs, res.answers, authority, max)
}

// build packs a message; past max bytes it is sent without records and with TC set, so the
// client asks again over TCP.
func build(h dnsmessage.Header, qs []dnsmessage.Question, answers, authority []dnsmessage.Resource, max int) []byte {
	msg := dnsmessage.Message{Header: h, Questions: qs, Answers: answers, Authorities: authority}
	b, err := msg.Pack()
	if err != nil {
		h.RCode = dnsmessage.RCodeServerFailure
		b, _ = (&dnsmessage.Message{Header: h, Questions: qs}).Pack()
		return b
	}
	if len(b) > max {
		h.Truncated = true
		b, _ = (&dnsmessage.Message{Header: h, Questions: qs}).Pack()
	}
	return b
}

// result is the outcome of one question.
type result struct {
	rcode         dnsmessage.RCode
	authoritative bool
	answers       []dnsmessage.Resource
}

// resolve answers one question: the hosts file first (CoreDNS's K3s Corefile orders hosts
// after kubernetes, but their names never overlap), then the cluster zone, else REFUSED.
func (s *dnsServer) resolve(ctx context.Context, q dnsmessage.Question) result {
	name := strings.ToLower(q.Name.String())
	if ips := s.hosts(name); len(ips) > 0 {
		return result{authoritative: true, answers: addressRecords(q, ips)}
	}
	if name != s.zone && !strings.HasSuffix(name, "."+s.zone) {
		return result{rcode: dnsmessage.RCodeRefused}
	}
	nx := result{rcode: dnsmessage.RCodeNameError, authoritative: true}
	rel := strings.TrimSuffix(strings.TrimSuffix(name, s.zone), ".")
	if rel == "" {
		if q.Type == dnsmessage.TypeSOA {
			return result{authoritative: true, answers: []dnsmessage.Resource{s.soa()}}
		}
		return result{authoritative: true}
	}
	labels := strings.Split(rel, ".")
	switch {
	case len(labels) == 3 && labels[2] == "svc":
		svc, found, err := s.lookup.service(ctx, labels[1], labels[0])
		if err != nil {
			s.log.Printf("%s: %v", name, err)
			return result{rcode: dnsmessage.RCodeServerFailure}
		}
		if !found {
			return nx
		}
		return s.serviceAnswer(ctx, q, svc)
	case len(labels) == 3 && labels[2] == "pod":
		ip, err := netip.ParseAddr(strings.ReplaceAll(labels[0], "-", "."))
		if err != nil {
			return nx
		}
		return result{authoritative: true, answers: addressRecords(q, []netip.Addr{ip})}
	case len(labels) <= 2 && labels[len(labels)-1] == "svc", len(labels) == 1 && labels[0] == "pod":
		return result{authoritative: true} // an existing name without records of its own
	}
	return nx
}

func (s *dnsServer) serviceAnswer(ctx context.Context, q dnsmessage.Question, svc service) result {
	hdr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
	if svc.Spec.Type == "ExternalName" {
		target, err := dnsmessage.NewName(fqdn(svc.Spec.ExternalName))
		if err != nil {
			return result{rcode: dnsmessage.RCodeServerFailure}
		}
		hdr.Type = dnsmessage.TypeCNAME
		return result{authoritative: true, answers: []dnsmessage.Resource{{Header: hdr, Body: &dnsmessage.CNAMEResource{CNAME: target}}}}
	}
	addrs := svc.Spec.ClusterIPs
	if len(addrs) == 0 && svc.Spec.ClusterIP != "" {
		addrs = []string{svc.Spec.ClusterIP}
	}
	if len(addrs) > 0 && addrs[0] == "None" {
		var err error
		if addrs, err = s.lookup.endpoints(ctx, svc.Metadata.Namespace, svc.Metadata.Name); err != nil {
			s.log.Printf("%s: %v", q.Name, err)
			return result{rcode: dnsmessage.RCodeServerFailure}
		}
	}
	var ips []netip.Addr
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil {
			ips = append(ips, ip)
		}
	}
	return result{authoritative: true, answers: addressRecords(q, ips)}
}

// addressRecords are the A or AAAA records of ips that answer q (none: NODATA).
func addressRecords(q dnsmessage.Question, ips []netip.Addr) []dnsmessage.Resource {
	var out []dnsmessage.Resource
	for _, ip := range ips {
		hdr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
		switch {
		case ip.Is4() && (q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeALL):
			hdr.Type = dnsmessage.TypeA
			out = append(out, dnsmessage.Resource{Header: hdr, Body: &dnsmessage.AResource{A: ip.As4()}})
		case ip.Is6() && !ip.Is4In6() && (q.Type == dnsmessage.TypeAAAA || q.Type == dnsmessage.TypeALL):
			hdr.Type = dnsmessage.TypeAAAA
			out = append(out, dnsmessage.Resource{Header: hdr, Body: &dnsmessage.AAAAResource{AAAA: ip.As16()}})
		}
	}
	return out
}

// soa is the zone's SOA record, sent with negative answers so resolvers cache them briefly.
func (s *dnsServer) soa() dnsmessage.Resource {
	zone := dnsmessage.MustNewName(s.zone)
	return dnsmessage.Resource{
		Header: dnsmessage.ResourceHeader{Name: zone, Type: dnsmessage.TypeSOA, Class: dnsmessage.ClassINET, TTL: dnsTTL},
		Body: &dnsmessage.SOAResource{NS: dnsmessage.MustNewName("ns.dns." + s.zone), MBox: dnsmessage.MustNewName("hostmaster." + s.zone),
			Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, MinTTL: dnsTTL},
	}
}

// hosts returns the addresses the hosts file gives name (fully qualified, lower case); the
// file is read for every query, so K3s's NodeHosts updates apply at once.
func (s *dnsServer) hosts(name string) []netip.Addr {
	if s.hostsFile == "" {
		return nil
	}
	f, err := os.Open(s.hostsFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		ip, err := netip.ParseAddr(fields[0])
		if err != nil {
			continue
		}
		for _, h := range fields[1:] {
			if fqdn(h) == name {
				out = append(out, ip)
			}
		}
	}
	return out
}
