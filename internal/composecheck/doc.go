// Package composecheck validates the repository's docker-compose.yml without a
// Docker engine: its test parses the file and checks that every server variable of
// internal/testenv (DISTLOCK_REDIS_ADDR, ...) is exported in the file's comment
// block and points at a service of the right image, on a published loopback port,
// with matching credentials and settings.
//
// The package holds a parser for the subset of YAML that the file uses (block
// mappings and sequences of scalars, plain and quoted scalars, comments), so that
// the module needs no YAML dependency. Anything outside that subset (flow
// collections, anchors, tags, block scalars, tabs) is an error, which keeps the file
// simple enough for that parser.
package composecheck
