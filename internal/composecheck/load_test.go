package composecheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const composeFile = "../../docker-compose.yml"

// file is the part of docker-compose.yml that the tests read. It is decoded
// strictly: a key that no field names, a repeated key, or a value of another shape
// is an error, so the file holds nothing that these checks do not see.
type file struct {
	Services map[string]*service `yaml:"services"`
}

type service struct {
	Image       string                `yaml:"image"`
	Command     strList               `yaml:"command"`
	Ports       strList               `yaml:"ports"`
	Environment map[string]string     `yaml:"environment"`
	Healthcheck *healthcheck          `yaml:"healthcheck"`
	DependsOn   map[string]dependency `yaml:"depends_on"`
	NetworkMode string                `yaml:"network_mode"`
	Restart     string                `yaml:"restart"`
}

type healthcheck struct {
	Test          []string `yaml:"test"`
	Interval      string   `yaml:"interval"`
	Timeout       string   `yaml:"timeout"`
	Retries       int      `yaml:"retries"`
	StartPeriod   string   `yaml:"start_period"`
	StartInterval string   `yaml:"start_interval"`
}

type dependency struct {
	Condition string `yaml:"condition"`
}

// A strList is a YAML sequence of scalars that every YAML reader takes for strings.
// An item that YAML 1.2 reads as a number, a bool or null (6379, 1.5, true, ~), or
// YAML 1.1 as a bool (yes, off), must be quoted: Compose rejects or rewrites it.
type strList []string

// yaml11Bools are the plain scalars that YAML 1.1 reads as booleans and YAML 1.2
// as strings.
var yaml11Bools = []string{"y", "n", "yes", "no", "on", "off"}

func (l *strList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: want a list of strings", n.Line)
	}
	out := make(strList, 0, len(n.Content))
	for _, e := range n.Content {
		if e.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: want a string item", e.Line)
		}
		if e.ShortTag() != "!!str" || e.Style == 0 && slices.Contains(yaml11Bools, strings.ToLower(e.Value)) {
			return fmt.Errorf("line %d: item %q is not a string in YAML: quote it", e.Line, e.Value)
		}
		out = append(out, e.Value)
	}
	*l = out
	return nil
}

// parse decodes a compose file strictly; it must hold one document.
func parse(src []byte) (map[string]*service, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one document (%v)", err)
	}
	if len(f.Services) == 0 {
		return nil, errors.New("no services")
	}
	for name, s := range f.Services {
		if s == nil {
			return nil, fmt.Errorf("service %s is empty", name)
		}
	}
	return f.Services, nil
}

// A compose is the parsed file.
type compose struct {
	services map[string]*service
	names    []string          // sorted
	exports  map[string]string // the comment block's export NAME=value
	byPort   map[int]string    // host port -> service
}

func load(t *testing.T) *compose {
	t.Helper()
	src, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	services, err := parse(src)
	if err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	c := &compose{services: services, names: slices.Sorted(maps.Keys(services)), exports: map[string]string{}, byPort: map[int]string{}}
	for _, name := range c.names {
		for _, p := range services[name].Ports {
			parts := strings.Split(p, ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("service %s: port %q: want 127.0.0.1:HOST:CONTAINER (loopback only)", name, p)
				continue
			}
			hp, err1 := strconv.Atoi(parts[1])
			_, err2 := strconv.Atoi(parts[2])
			if err1 != nil || err2 != nil {
				t.Errorf("service %s: port %q is not numeric", name, p)
				continue
			}
			if other, dup := c.byPort[hp]; dup {
				t.Errorf("host port %d published by %s and %s", hp, other, name)
			}
			c.byPort[hp] = name
		}
	}
	exportRE := regexp.MustCompile(`^#\s+export\s+([A-Z_]+)=(.*)$`)
	for i, l := range strings.Split(string(src), "\n") {
		m := exportRE.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		v, err := shellWord(m[2])
		if err != nil {
			t.Errorf("%s:%d: export %s: %v", composeFile, i+1, m[1], err)
		}
		if _, dup := c.exports[m[1]]; dup {
			t.Errorf("%s:%d: %s exported twice", composeFile, i+1, m[1])
		}
		c.exports[m[1]] = v
	}
	return c
}

// shellWord returns the value of one shell word: unquoted, or in single quotes. An
// unquoted word must not hold characters that the shell would interpret.
func shellWord(s string) (string, error) {
	if strings.HasPrefix(s, "'") {
		if len(s) < 2 || !strings.HasSuffix(s, "'") || strings.Contains(s[1:len(s)-1], "'") {
			return "", fmt.Errorf("bad single quotes in %s", s)
		}
		return s[1 : len(s)-1], nil
	}
	if strings.ContainsAny(s, " \t()?*[]&;<>|$`\\\"'{}~#!") {
		return "", fmt.Errorf("%s needs single quotes for the shell", s)
	}
	return s, nil
}

func TestParseAccepts(t *testing.T) {
	services, err := parse([]byte(`services:
  a:
    image: redis:7.4
    command: ["redis-server", "--port", '6379', "yes"]
    ports:
      - "127.0.0.1:16379:6379"
      - 127.0.0.1:1:2
    environment:
      ID: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	a := services["a"]
	if got := strings.Join(a.Command, ","); got != "redis-server,--port,6379,yes" {
		t.Errorf("command %q", got)
	}
	if got := strings.Join(a.Ports, ","); got != "127.0.0.1:16379:6379,127.0.0.1:1:2" {
		t.Errorf("ports %q", got)
	}
	if a.Environment["ID"] != "1" {
		t.Errorf("environment %q", a.Environment)
	}
}

func TestParseRejects(t *testing.T) {
	const svc = "services:\n  a:\n    image: redis:7.4\n"
	for _, src := range []string{
		"",
		"services: {}\n",
		"services:\n  a:\n",
		"version: '3'\n" + svc,         // unknown top-level key
		svc + "    volumes: [x]\n",     // unknown service key
		svc + "    image: redis:7.2\n", // repeated key
		svc + "    healthcheck:\n      tests: []\n",  // unknown healthcheck key
		svc + "    command: redis-server --port 1\n", // a string, not a list
		svc + "    command:\n      - [a]\n",
		svc + "    environment:\n      - A=1\n",
		svc + "    depends_on:\n      - b\n",
		svc + "---\n" + svc,
	} {
		if _, err := parse([]byte(src)); err == nil {
			t.Errorf("parse(%q): no error", src)
		}
	}
	for _, item := range []string{"3", "yes", "No", "on", "~", "null", "true", "1.5", "0x1f", "-3", "1e3", ".inf"} {
		if _, err := parse([]byte(svc + "    command:\n      - " + item + "\n")); err == nil {
			t.Errorf("command item %s: no error (it is not a string in YAML)", item)
		}
	}
	for _, item := range []string{"127.0.0.1", "1s", "--port", "v3.6.16", "-c", `"3"`, "'yes'"} {
		if _, err := parse([]byte(svc + "    command:\n      - " + item + "\n")); err != nil {
			t.Errorf("command item %s: %v", item, err)
		}
	}
}
