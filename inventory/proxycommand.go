// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"strconv"
	"strings"
)

// ProxyTokens are the values of the tokens OpenSSH expands in ProxyCommand: %h the host
// name (after HostName), %p the port, %r the remote user, %n the host as given (the alias).
type ProxyTokens struct {
	Host, User, Alias string
	Port              int
}

// ExpandProxyCommand expands the tokens ssh_config(5) allows in ProxyCommand — %%, %h, %n, %p
// and %r — in command. Any other token is an error naming it (OpenSSH refuses it too).
func ExpandProxyCommand(command string, t ProxyTokens) (string, error) {
	var b strings.Builder
	for i := 0; i < len(command); i++ {
		c := command[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(command) {
			return "", fmt.Errorf("ProxyCommand %q ends with a lone %%: write %%%% for a literal percent sign", command)
		}
		i++
		switch command[i] {
		case '%':
			b.WriteByte('%')
		case 'h':
			b.WriteString(t.Host)
		case 'p':
			b.WriteString(strconv.Itoa(t.Port))
		case 'r':
			b.WriteString(t.User)
		case 'n':
			b.WriteString(t.Alias)
		default:
			return "", fmt.Errorf("ProxyCommand %q has the unknown token %%%c: ProxyCommand accepts %%h, %%p, %%r, %%n and %%%% (ssh_config(5))", command, command[i])
		}
	}
	return b.String(), nil
}
