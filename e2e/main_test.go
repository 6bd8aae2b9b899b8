// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"testing"

	"github.com/k3strap/k3strap/e2e/harness"
)

// TestMain puts the machine sysctls of the real-K3s lane back when the tests are interrupted.
func TestMain(m *testing.M) {
	harness.ReleaseOnInterrupt()
	os.Exit(m.Run())
}
