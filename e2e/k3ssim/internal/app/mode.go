// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import "os"

func osMode(m uint32) os.FileMode { return os.FileMode(m) & os.ModePerm }
