// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"encoding/base64"
	"fmt"
	"os"
)

// Kubeconfig renders an admin kubeconfig shaped exactly like K3s's /etc/rancher/k3s/k3s.yaml
// (fixture k3s.yaml.redacted): cluster, context and user all named "default".
func Kubeconfig(server string, caPEM, certPEM, keyPEM []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return []byte(fmt.Sprintf(`apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
kind: Config
users:
- name: default
  user:
    client-certificate-data: %s
    client-key-data: %s
`, b64(caPEM), server, b64(certPEM), b64(keyPEM)))
}

// WriteKubeconfig writes the kubeconfig atomically with the given mode and then chmods it
// (so an existing file also gets the mode, as write-kubeconfig-mode does).
func WriteKubeconfig(path string, mode os.FileMode, content []byte) error {
	if err := WriteFileAtomic(path, content, mode); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}
