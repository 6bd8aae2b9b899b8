// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"context"
	"io"

	"github.com/pkg/sftp"
)

// Download returns the content of p on the host: over SFTP when the login user is root and the
// host offers SFTP, else read as root with cat (through sudo for another login user: SFTP runs
// as the login user, who cannot read root's 0600 files), within DownloadTimeout.
// The content may be secret: it is never logged here.
func (c *Client) Download(ctx context.Context, p string) ([]byte, error) {
	if !c.isRoot {
		return c.readFile(ctx, p, DownloadTimeout)
	}
	if m, err := c.FileMethod(ctx); err != nil {
		return nil, err
	} else if m == FileMethodSession {
		return c.readFile(ctx, p, DownloadTimeout)
	}
	var buf bytes.Buffer
	err := c.sftpDoWithin(ctx, DownloadTimeout, "download "+p, func(sc *sftp.Client) error {
		buf.Reset()
		f, err := sc.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = io.Copy(&buf, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.transfers.Add(1)
	return buf.Bytes(), nil
}
