// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// field is one row of a form: a text input or a choice among fixed options.
type field struct {
	key, label, hint string
	// choices makes the field a choice (←/→ or space cycle); empty means text.
	choices []string
	choice  int
	input   textinput.Model
	// show hides the field when it returns false (e.g. airgap paths for an online install).
	show func() bool
}

func (f *field) visible() bool { return f.show == nil || f.show() }

func (f *field) value() string {
	if len(f.choices) > 0 {
		return f.choices[f.choice]
	}
	return strings.TrimSpace(f.input.Value())
}

// form is a column of fields with one focused; enter moves on and submits after the last.
type form struct {
	fields []*field
	focus  int
}

func textField(key, label, value, placeholder, hint string) *field {
	in := textinput.New()
	in.Prompt = ""
	in.Placeholder = placeholder
	in.SetValue(value)
	st := in.Styles()
	st.Cursor.Blink = false
	in.SetStyles(st)
	in.SetWidth(48)
	return &field{key: key, label: label, hint: hint, input: in}
}

func choiceField(key, label, hint string, choices ...string) *field {
	return &field{key: key, label: label, hint: hint, choices: choices}
}

func newForm(fields ...*field) *form {
	f := &form{fields: fields}
	f.focusOn(0)
	return f
}

func (f *form) get(key string) *field {
	for _, x := range f.fields {
		if x.key == key {
			return x
		}
	}
	panic("tui: no form field " + key) // a programming error: keys are constants of this package
}

func (f *form) value(key string) string { return f.get(key).value() }

func (f *form) set(key, v string) {
	x := f.get(key)
	if len(x.choices) > 0 {
		for i, c := range x.choices {
			if c == v {
				x.choice = i
			}
		}
		return
	}
	x.input.SetValue(v)
}

func (f *form) focusOn(i int) {
	for j, x := range f.fields {
		switch {
		case len(x.choices) > 0: // no text input
		case j == i:
			x.input.Focus()
		default:
			x.input.Blur()
		}
	}
	f.focus = i
}

// move focuses the next (+1) or previous (-1) visible field; it reports false at either end.
func (f *form) move(dir int) bool {
	for i := f.focus + dir; i >= 0 && i < len(f.fields); i += dir {
		if f.fields[i].visible() {
			f.focusOn(i)
			return true
		}
	}
	return false
}

// key handles a key press; submit is true when enter was pressed on the last visible field.
func (f *form) key(k tea.KeyPressMsg) (cmd tea.Cmd, submit bool) {
	cur := f.fields[f.focus]
	switch k.String() {
	case "tab", "down":
		f.move(1)
		return nil, false
	case "shift+tab", "up":
		f.move(-1)
		return nil, false
	case "enter":
		if !f.move(1) {
			return nil, true
		}
		return nil, false
	}
	if len(cur.choices) > 0 {
		switch k.String() {
		case "right", "space", "l":
			cur.choice = (cur.choice + 1) % len(cur.choices)
		case "left", "h":
			cur.choice = (cur.choice + len(cur.choices) - 1) % len(cur.choices)
		}
		return nil, false
	}
	cur.input, cmd = cur.input.Update(k)
	return cmd, false
}

// view renders the visible fields, the focused one marked, and its hint.
func (f *form) view(st styles, width int) []string {
	labelW := 0
	for _, x := range f.fields {
		labelW = max(labelW, len(x.label))
	}
	var lines []string
	hint := ""
	for i, x := range f.fields {
		if !x.visible() {
			continue
		}
		focused := i == f.focus
		mark, label := "  ", fmt.Sprintf("%-*s", labelW, x.label)
		if focused {
			mark, label = st.accent.Render("› "), st.bold.Render(label)
			hint = x.hint
		}
		var val string
		switch {
		case len(x.choices) > 0:
			var opts []string
			for j, c := range x.choices {
				switch {
				case j == x.choice && focused:
					opts = append(opts, st.selected.Render(" "+c+" "))
				case j == x.choice:
					opts = append(opts, st.bold.Render("["+c+"]"))
				default:
					opts = append(opts, st.dim.Render(" "+c+" "))
				}
			}
			val = strings.Join(opts, " ")
			if focused {
				val += st.dim.Render("  ←/→")
			}
		case focused:
			val = x.input.View()
		case x.input.Value() == "":
			val = st.dim.Render(x.input.Placeholder)
		default:
			val = x.input.Value()
		}
		lines = append(lines, ansi.Truncate(mark+label+"  "+val, width, "…"))
	}
	if hint != "" {
		lines = append(lines, "")
		for _, l := range wrapWords(hint, max(20, width-4)) {
			lines = append(lines, "  "+st.dim.Render(l))
		}
	}
	return lines
}
