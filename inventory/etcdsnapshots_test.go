// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"strings"
	"testing"
)

const etcdInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  k3s:
    version: v1.36.3+k3s1
    etcdSnapshots:
      schedule: "0 */6 * * *"
      retention: 10
      directory: /srv/snapshots
      s3: {endpoint: s3.example.com, bucket: backups, folder: lab, accessKeyEnv: LAB_S3_ACCESS, secretKeyEnv: LAB_S3_SECRET}
  hosts:
    - {name: cp1, address: 10.0.0.1, role: server}
    - {name: cp2, address: 10.0.0.2, role: server}
    - {name: cp3, address: 10.0.0.3, role: server}
    - {name: a1, address: 10.0.0.4, role: agent}
`

func TestEtcdSnapshotsRendered(t *testing.T) {
	t.Setenv("LAB_S3_ACCESS", "AKIAEXAMPLE")
	t.Setenv("LAB_S3_SECRET", "s3cr3t-value")
	c, err := Parse("lab.yaml", []byte(etcdInv), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.HostConfig(c.Host("cp2"))
	want := map[string]any{"etcd-snapshot-schedule-cron": "0 */6 * * *", "etcd-snapshot-retention": "10",
		"etcd-snapshot-dir": "/srv/snapshots", "etcd-s3": true, "etcd-s3-endpoint": "s3.example.com",
		"etcd-s3-bucket": "backups", "etcd-s3-folder": "lab", "etcd-s3-access-key": "AKIAEXAMPLE", "etcd-s3-secret-key": "s3cr3t-value"}
	for k, v := range want {
		if cfg.Extra[k] != v {
			t.Errorf("%s = %v, want %v", k, cfg.Extra[k], v)
		}
	}
	if a := c.HostConfig(c.Host("a1")); a.Extra["etcd-s3"] != nil {
		t.Errorf("agent got etcd settings: %v", a.Extra)
	}
}

func TestEtcdSnapshotsRefused(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	single := strings.Replace(strings.Replace(strings.Replace(etcdInv, "    - {name: cp2, address: 10.0.0.2, role: server}\n", "", 1),
		"    - {name: cp3, address: 10.0.0.3, role: server}\n", "", 1), ", accessKeyEnv: LAB_S3_ACCESS, secretKeyEnv: LAB_S3_SECRET", "", 1)
	_, err := Parse("lab.yaml", []byte(single), LoadOptions{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"need embedded etcd", "$AWS_SECRET_ACCESS_KEY, which is not set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
