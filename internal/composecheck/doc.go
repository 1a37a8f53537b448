// Package composecheck validates the repository's docker-compose.yml without a
// Docker engine: its test decodes the file strictly (go.yaml.in/yaml/v3; no key the
// checks do not know, no repeated key, list items that are strings to every YAML
// reader) and checks that every server variable of internal/testenv
// (DISTLOCK_REDIS_ADDR, ...) is exported in the file's comment block and points at a
// service of the right image, on a published loopback port, with matching
// credentials and settings.
package composecheck
