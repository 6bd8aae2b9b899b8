package inventory

import (
	"strings"
	"testing"
)

func TestExpandProxyCommand(t *testing.T) {
	got, err := ExpandProxyCommand("ssh -W %h:%p %r@bastion # %n 100%%", ProxyTokens{Host: "10.0.0.5", Port: 2222, User: "ops", Alias: "node1"})
	if err != nil || got != "ssh -W 10.0.0.5:2222 ops@bastion # node1 100%" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := ExpandProxyCommand("connect %h %C", ProxyTokens{}); err == nil || !strings.Contains(err.Error(), "unknown token %C") {
		t.Fatalf("unknown token: got %v", err)
	}
	if _, err := ExpandProxyCommand("nc %h 22 %", ProxyTokens{}); err == nil {
		t.Fatal("a lone % must be refused")
	}
}
