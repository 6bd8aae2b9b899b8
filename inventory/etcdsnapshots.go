// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// EtcdSnapshots is spec.k3s.etcdSnapshots: K3s's scheduled etcd snapshots (embedded etcd
// only), rendered into every server's config.yaml under K3s's own flag names
// (k3s/k3s-flags-v1.36.3.tsv): etcd-snapshot-schedule-cron, etcd-snapshot-retention,
// etcd-snapshot-dir, etcd-snapshot-compress, etcd-disable-snapshots and etcd-s3*.
type EtcdSnapshots struct {
	// Schedule is a cron expression (K3s default "0 */12 * * *").
	Schedule string `yaml:"schedule,omitempty"`
	// Retention is how many scheduled snapshots each server keeps (K3s default 5).
	Retention int `yaml:"retention,omitempty"`
	// Directory is where snapshots are written (K3s default
	// /var/lib/rancher/k3s/server/db/snapshots).
	Directory string `yaml:"directory,omitempty"`
	// Compress zips the snapshots.
	Compress bool `yaml:"compress,omitempty"`
	// Disable turns scheduled snapshots off (on-demand `k3strap backup` still works).
	Disable bool `yaml:"disable,omitempty"`
	// S3 uploads the snapshots to an S3-compatible store as well.
	S3 *EtcdS3 `yaml:"s3,omitempty"`
}

// EtcdS3 is spec.k3s.etcdSnapshots.s3. The credentials are never in the inventory: they are
// read from the environment variables named here on the machine running k3strap and written
// only into the servers' config.yaml (0600; masked in render and dry-run diffs as every
// k3s.IsSecretKey key is). ConfigSecret names a kube-system Secret holding them instead.
type EtcdS3 struct {
	Endpoint      string `yaml:"endpoint,omitempty"`
	EndpointCA    string `yaml:"endpointCA,omitempty"`
	SkipSSLVerify bool   `yaml:"skipSSLVerify,omitempty"`
	Insecure      bool   `yaml:"insecure,omitempty"`
	Bucket        string `yaml:"bucket,omitempty"`
	Region        string `yaml:"region,omitempty"`
	Folder        string `yaml:"folder,omitempty"`
	Retention     int    `yaml:"retention,omitempty"`
	// AccessKeyEnv and SecretKeyEnv name the environment variables holding the keys
	// (default AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, as K3s itself reads).
	AccessKeyEnv string `yaml:"accessKeyEnv,omitempty"`
	SecretKeyEnv string `yaml:"secretKeyEnv,omitempty"`
	// ConfigSecret is etcd-s3-config-secret: a Secret in kube-system with the S3 settings.
	ConfigSecret string `yaml:"configSecret,omitempty"`
}

func (s *EtcdS3) keyEnvs() (access, secret string) {
	access, secret = s.AccessKeyEnv, s.SecretKeyEnv
	if access == "" {
		access = "AWS_ACCESS_KEY_ID"
	}
	if secret == "" {
		secret = "AWS_SECRET_ACCESS_KEY"
	}
	return access, secret
}

// etcdSnapshotConfig adds spec.k3s.etcdSnapshots to a server's config (keys the user set in
// spec.k3s.config win).
func (c *Cluster) etcdSnapshotConfig(cfg *K3sConfig) {
	e := c.Spec.K3s.EtcdSnapshots
	if e == nil {
		return
	}
	set := func(k string, v any) {
		if cfg.Extra == nil {
			cfg.Extra = map[string]any{}
		}
		if _, ok := cfg.Extra[k]; !ok {
			cfg.Extra[k] = v
		}
	}
	if e.Schedule != "" {
		set("etcd-snapshot-schedule-cron", e.Schedule)
	}
	if e.Retention > 0 {
		set("etcd-snapshot-retention", strconv.Itoa(e.Retention))
	}
	if e.Directory != "" {
		set("etcd-snapshot-dir", e.Directory)
	}
	if e.Compress {
		set("etcd-snapshot-compress", true)
	}
	if e.Disable {
		set("etcd-disable-snapshots", true)
	}
	s := e.S3
	if s == nil {
		return
	}
	set("etcd-s3", true)
	for k, v := range map[string]string{"etcd-s3-endpoint": s.Endpoint, "etcd-s3-endpoint-ca": s.EndpointCA,
		"etcd-s3-bucket": s.Bucket, "etcd-s3-region": s.Region, "etcd-s3-folder": s.Folder, "etcd-s3-config-secret": s.ConfigSecret} {
		if v != "" {
			set(k, v)
		}
	}
	if s.Retention > 0 {
		set("etcd-s3-retention", strconv.Itoa(s.Retention))
	}
	if s.SkipSSLVerify {
		set("etcd-s3-skip-ssl-verify", true)
	}
	if s.Insecure {
		set("etcd-s3-insecure", true)
	}
	if s.ConfigSecret == "" {
		access, secret := s.keyEnvs()
		if v := os.Getenv(access); v != "" {
			set("etcd-s3-access-key", v)
		}
		if v := os.Getenv(secret); v != "" {
			set("etcd-s3-secret-key", v)
		}
	}
}

func (v *validator) etcdSnapshots() {
	e := v.c.Spec.K3s.EtcdSnapshots
	if e == nil {
		return
	}
	const base = "spec.k3s.etcdSnapshots"
	if e.Schedule != "" && len(strings.Fields(e.Schedule)) != 5 {
		v.add(base+".schedule", atValue, "", fmt.Sprintf("schedule %q is not a cron expression of 5 fields", e.Schedule), `write e.g. schedule: "0 */6 * * *"`)
	}
	if e.Retention < 0 {
		v.add(base+".retention", atValue, "", "retention must not be negative", "write the number of snapshots to keep, e.g. retention: 10")
	}
	if len(v.c.Servers()) < 2 {
		v.add(base, atKey, "", "etcd snapshots need embedded etcd, which k3strap enables (cluster-init) only with more than one server; a single server runs SQLite",
			"add servers, or remove etcdSnapshots and back up /var/lib/rancher/k3s/server/db and the token with K3s stopped (docs/day2.md)")
	}
	s := e.S3
	if s == nil {
		return
	}
	if s.Bucket == "" && s.ConfigSecret == "" {
		v.add(base+".s3", atKey, "", "s3 needs a bucket (or configSecret)", "add bucket: NAME")
	}
	if s.ConfigSecret == "" {
		access, secret := s.keyEnvs()
		for _, env := range []string{access, secret} {
			if os.Getenv(env) == "" {
				v.add(base+".s3", atKey, "", "the S3 credentials are read from $"+env+", which is not set",
					"export "+env+" before running k3strap (the keys never go in the inventory), or name a kube-system Secret in configSecret")
			}
		}
	}
}
