// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// saDir is where the kubelet mounts a pod's service account token and cluster CA.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// kubeAPI reads the Kubernetes API as the pod's service account (the in-cluster configuration
// client-go uses: KUBERNETES_SERVICE_HOST/PORT, the mounted token and CA). The token is read
// for every request: the kubelet rotates bound tokens.
type kubeAPI struct {
	base      string
	tokenFile string
	client    *http.Client
}

// inCluster returns the pod's API client, or an error naming what is missing.
func inCluster() (*kubeAPI, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("KUBERNETES_SERVICE_HOST/PORT unset: not running in a pod")
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s/ca.crt holds no certificate", saDir)
	}
	return newKubeAPI("https://"+net.JoinHostPort(host, port), saDir+"/token", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), nil
}

func newKubeAPI(base, tokenFile string, tc *tls.Config) *kubeAPI {
	return &kubeAPI{base: base, tokenFile: tokenFile, client: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
	}}
}

// get decodes the JSON at API path p (with query q) into out.
func (k *kubeAPI) get(ctx context.Context, p string, q url.Values, out any) error {
	u := k.base + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if k.tokenFile != "" {
		tok, err := os.ReadFile(k.tokenFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", p, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}

// The few fields of the API objects the stand-ins read (k8s.io/api core/v1 Service and
// discovery/v1 EndpointSlice); the full k8s.io/api types would add megabytes to every image.
type (
	serviceList struct {
		Items []service `json:"items"`
	}
	service struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			Type         string   `json:"type"`
			ClusterIP    string   `json:"clusterIP"`
			ClusterIPs   []string `json:"clusterIPs"`
			ExternalName string   `json:"externalName"`
		} `json:"spec"`
	}
	endpointSliceList struct {
		Items []struct {
			Endpoints []struct {
				Addresses  []string `json:"addresses"`
				Conditions struct {
					Ready *bool `json:"ready"`
				} `json:"conditions"`
			} `json:"endpoints"`
		} `json:"items"`
	}
)
