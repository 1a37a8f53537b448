package composecheck

import (
	"fmt"
	"regexp"
	"strings"
)

// yamlNumber matches what YAML reads as an int or a float.
var yamlNumber = regexp.MustCompile(`^([-+]?([0-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+)|[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$`)

// Kind is the kind of a Node.
type Kind int

// The kinds of Node.
const (
	Scalar Kind = iota
	Mapping
	Sequence
)

// A Node is a parsed YAML value.
type Node struct {
	Kind   Kind
	Line   int    // 1-based line of the value (of its key, for a mapping entry)
	Value  string // Scalar: the value, unquoted
	Quoted bool   // Scalar: it was single- or double-quoted
	Keys   []string
	Map    map[string]*Node // Mapping: by key; Keys has the order
	Seq    []*Node          // Sequence
}

// Get returns the value at the path of mapping keys, or nil.
func (n *Node) Get(path ...string) *Node {
	for _, k := range path {
		if n == nil || n.Kind != Mapping {
			return nil
		}
		n = n.Map[k]
	}
	return n
}

// Str returns the value of a scalar at path, or "".
func (n *Node) Str(path ...string) string {
	v := n.Get(path...)
	if v == nil || v.Kind != Scalar {
		return ""
	}
	return v.Value
}

// Strings returns the scalars of the sequence at path.
func (n *Node) Strings(path ...string) []string {
	v := n.Get(path...)
	if v == nil || v.Kind != Sequence {
		return nil
	}
	out := make([]string, 0, len(v.Seq))
	for _, e := range v.Seq {
		out = append(out, e.Value)
	}
	return out
}

type line struct {
	num    int
	indent int
	text   string // without indentation and comment
}

// Parse parses the YAML subset: block mappings whose values are scalars, mappings
// or sequences; block sequences of scalars; plain, 'single' and "double" quoted
// scalars; comments. The document must be a mapping.
func Parse(src []byte) (*Node, error) {
	var lines []line
	for i, raw := range strings.Split(string(src), "\n") {
		raw = strings.TrimRight(raw, " \r")
		body := strings.TrimLeft(raw, " ")
		if strings.HasPrefix(body, "\t") || strings.Contains(raw[:len(raw)-len(body)], "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", i+1)
		}
		text, err := stripComment(body)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		if text == "" {
			continue
		}
		if text == "---" || text == "..." {
			return nil, fmt.Errorf("line %d: document markers are not supported", i+1)
		}
		lines = append(lines, line{num: i + 1, indent: len(raw) - len(body), text: text})
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("empty document")
	}
	p := &parser{lines: lines}
	n, err := p.block(lines[0].indent)
	if err != nil {
		return nil, err
	}
	if p.i < len(p.lines) {
		return nil, fmt.Errorf("line %d: unexpected indentation", p.lines[p.i].num)
	}
	if n.Kind != Mapping {
		return nil, fmt.Errorf("line %d: the document is not a mapping", n.Line)
	}
	return n, nil
}

// stripComment removes a comment (a '#' at the start or after a space, outside
// quotes) and trailing spaces.
func stripComment(s string) (string, error) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				if quote == '\'' && i+1 < len(s) && s[i+1] == '\'' {
					i++
					continue
				}
				quote = 0
			}
		case c == '"' || c == '\'':
			// A quote opens a quoted scalar only at the start of a value.
			if i == 0 || s[i-1] == ' ' || s[i-1] == '-' && i == 1 {
				quote = c
			}
		case c == '#' && (i == 0 || s[i-1] == ' '):
			return strings.TrimRight(s[:i], " "), nil
		}
	}
	if quote != 0 {
		return "", fmt.Errorf("unterminated quoted scalar")
	}
	return s, nil
}

type parser struct {
	lines []line
	i     int
}

// block parses the mapping or sequence whose lines are at indent.
func (p *parser) block(indent int) (*Node, error) {
	first := p.lines[p.i]
	if first.indent != indent {
		return nil, fmt.Errorf("line %d: unexpected indentation", first.num)
	}
	if isSeqItem(first.text) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

func (p *parser) sequence(indent int) (*Node, error) {
	n := &Node{Kind: Sequence, Line: p.lines[p.i].num}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation", l.num)
		}
		if !isSeqItem(l.text) {
			if l.indent == indent {
				break // a mapping key after a sequence at the same indentation
			}
			return nil, fmt.Errorf("line %d: expected a sequence item", l.num)
		}
		item := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		if item == "" {
			return nil, fmt.Errorf("line %d: nested collections in sequences are not supported", l.num)
		}
		if _, _, ok, _ := cutKey(item); ok {
			return nil, fmt.Errorf("line %d: mappings in sequences are not supported", l.num)
		}
		v, err := scalar(item, l.num)
		if err != nil {
			return nil, err
		}
		n.Seq = append(n.Seq, v)
		p.i++
	}
	return n, nil
}

func (p *parser) mapping(indent int) (*Node, error) {
	n := &Node{Kind: Mapping, Line: p.lines[p.i].num, Map: make(map[string]*Node)}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation", l.num)
		}
		key, rest, ok, err := cutKey(l.text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", l.num, err)
		}
		if !ok {
			return nil, fmt.Errorf("line %d: expected key: value", l.num)
		}
		if _, dup := n.Map[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate key %q", l.num, key)
		}
		p.i++
		var v *Node
		switch {
		case rest != "":
			if v, err = scalar(rest, l.num); err != nil {
				return nil, err
			}
		case p.i < len(p.lines) && (p.lines[p.i].indent > indent ||
			p.lines[p.i].indent == indent && isSeqItem(p.lines[p.i].text)):
			if v, err = p.block(p.lines[p.i].indent); err != nil {
				return nil, err
			}
		default:
			v = &Node{Kind: Scalar, Line: l.num} // null
		}
		v.Line = l.num
		n.Keys = append(n.Keys, key)
		n.Map[key] = v
	}
	return n, nil
}

// cutKey splits "key: value" (or "key:") at the first ": " outside quotes.
func cutKey(s string) (key, rest string, ok bool, err error) {
	if s[0] == '"' || s[0] == '\'' {
		end := closingQuote(s)
		if end < 0 {
			return "", "", false, fmt.Errorf("unterminated quoted key")
		}
		after := s[end+1:]
		if after != ":" && !strings.HasPrefix(after, ": ") {
			return "", "", false, nil
		}
		k, err := scalar(s[:end+1], 0)
		if err != nil {
			return "", "", false, err
		}
		return k.Value, strings.TrimSpace(strings.TrimPrefix(after, ":")), true, nil
	}
	if i := strings.Index(s, ": "); i >= 0 {
		return s[:i], strings.TrimSpace(s[i+2:]), true, nil
	}
	if strings.HasSuffix(s, ":") {
		return s[:len(s)-1], "", true, nil
	}
	return "", "", false, nil
}

// closingQuote returns the index of the quote that closes the quoted scalar at the
// start of s, or -1.
func closingQuote(s string) int {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q:
			if q == '\'' && i+1 < len(s) && s[i+1] == '\'' {
				i++
				continue
			}
			return i
		}
	}
	return -1
}

// scalar parses a plain or quoted scalar.
func scalar(s string, num int) (*Node, error) {
	n := &Node{Kind: Scalar, Line: num}
	switch s[0] {
	case '"', '\'':
		end := closingQuote(s)
		if end != len(s)-1 {
			return nil, fmt.Errorf("line %d: text after the quoted scalar %s", num, s)
		}
		n.Quoted = true
		body := s[1:end]
		if s[0] == '\'' {
			n.Value = strings.ReplaceAll(body, "''", "'")
			return n, nil
		}
		var b strings.Builder
		for i := 0; i < len(body); i++ {
			if body[i] != '\\' {
				b.WriteByte(body[i])
				continue
			}
			i++
			switch body[i] {
			case '\\', '"', '/':
				b.WriteByte(body[i])
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				return nil, fmt.Errorf(`line %d: unsupported escape \%c`, num, body[i])
			}
		}
		n.Value = b.String()
		return n, nil
	case '[', '{':
		return nil, fmt.Errorf("line %d: flow collections are not supported: %s", num, s)
	case '&', '*', '!':
		return nil, fmt.Errorf("line %d: anchors, aliases and tags are not supported: %s", num, s)
	case '|', '>':
		return nil, fmt.Errorf("line %d: block scalars are not supported: %s", num, s)
	case '@', '`', '%':
		return nil, fmt.Errorf("line %d: a plain scalar cannot start with %c: %s", num, s[0], s)
	}
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") {
		return nil, fmt.Errorf("line %d: plain scalar with ': ' (quote it): %s", num, s)
	}
	n.Value = s
	return n, nil
}

// Typed reports whether a plain scalar would be read by YAML as something other
// than a string (a boolean, a number, null), as "yes" or 2000 would.
func (n *Node) Typed() bool {
	if n.Kind != Scalar || n.Quoted {
		return false
	}
	switch strings.ToLower(n.Value) {
	case "", "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n":
		return true
	}
	return yamlNumber.MatchString(n.Value)
}
