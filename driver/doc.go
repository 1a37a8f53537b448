// Package driver is for the authors of backends: the helpers every backend uses to
// validate its input and make its tokens, and the contracts a backend's one-attempt
// operations keep. Applications do not need it; they use a backend's package and
// the root package distlock.
package driver
