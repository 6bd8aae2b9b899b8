// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"errors"
	"testing"
)

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "c.yaml", Line: 3, Column: 7, Host: "cp1", Message: "bad", Fix: "good"}, "c.yaml:3:7: host cp1: bad — fix: good"},
		{FieldError{File: "c.yaml", Line: 3, Message: "bad"}, "c.yaml:3: bad"},
		{FieldError{File: "c.yaml", Message: "bad", Fix: "good"}, "c.yaml: bad — fix: good"},
		{FieldError{Host: "w1", Message: "bad"}, "host w1: bad"},
		{FieldError{Line: 2, Column: 1, Message: "bad"}, "2:1: bad"},
		{FieldError{Message: "bad"}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorList(t *testing.T) {
	var empty ErrorList
	if empty.Err() != nil {
		t.Errorf("empty Err() is not nil")
	}
	l := ErrorList{
		{File: "f", Message: "override"},
		{File: "f", Line: 9, Column: 2, Message: "late"},
		{File: "f", Line: 2, Column: 5, Message: "b"},
		{File: "f", Line: 2, Column: 1, Message: "a"},
		{File: "f", Line: 2, Column: 1, Message: "a2"},
	}
	l.Sort()
	want := "f:2:1: a\nf:2:1: a2\nf:2:5: b\nf:9:2: late\nf: override"
	if got := l.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	var fe *FieldError
	if err := l.Err(); !errors.As(err, &fe) || fe.Message != "a" {
		t.Errorf("errors.As found %v", fe)
	}
}
