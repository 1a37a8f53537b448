package composecheck

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	src := `# comment
top:
  plain: value with spaces # trailing comment
  "quoted key": 'it''s'
  dq: "a \"b\" # not a comment"
  url: http://h:1/x
  empty:
  list:
    - one
    - "2"
    - 3
  same-indent-list:
  - a
  - b
  nested:
    deeper:
      k: v
after: x
`
	n, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"top.plain":           "value with spaces",
		"top.quoted key":      "it's",
		"top.dq":              `a "b" # not a comment`,
		"top.url":             "http://h:1/x",
		"top.empty":           "",
		"top.nested.deeper.k": "v",
		"after":               "x",
	} {
		if got := n.Str(strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if got := n.Strings("top", "list"); strings.Join(got, ",") != "one,2,3" {
		t.Errorf("list = %q", got)
	}
	if got := n.Strings("top", "same-indent-list"); strings.Join(got, ",") != "a,b" {
		t.Errorf("same-indent-list = %q", got)
	}
	if keys := n.Get("top").Keys; strings.Join(keys, ",") != "plain,quoted key,dq,url,empty,list,same-indent-list,nested" {
		t.Errorf("keys in order: %q", keys)
	}
	list := n.Get("top", "list").Seq
	if list[0].Typed() || list[1].Typed() || !list[2].Typed() {
		t.Errorf("Typed: one %v, \"2\" %v, 3 %v", list[0].Typed(), list[1].Typed(), list[2].Typed())
	}
	for _, s := range []string{"yes", "No", "~", "1.5", "0x1f", "-3", "1e3"} {
		if !(&Node{Kind: Scalar, Value: s}).Typed() {
			t.Errorf("%q should be typed", s)
		}
	}
	for _, s := range []string{"127.0.0.1", "1s", "--port", "v3.6.16", "-c"} {
		if (&Node{Kind: Scalar, Value: s}).Typed() {
			t.Errorf("%q should be a string", s)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, src := range []string{
		"",
		"a: 1\na: 2\n",
		"a:\n\tb: 1\n",
		"a: [1, 2]\n",
		"a: {b: 1}\n",
		"a: &x 1\n",
		"a: *x\n",
		"a: |\n  text\n",
		"a:\n  - b: 1\n",
		"a:\n  -\n    - x\n",
		"a: 'open\n",
		"- a\n",
		"a: 1\n  b: 2\n",
		"a:\n    b: 1\n  c: 2\n",
		"a: b: c\n",
		"---\na: 1\n",
	} {
		if _, err := Parse([]byte(src)); err == nil {
			t.Errorf("Parse(%q): no error", src)
		}
	}
}
