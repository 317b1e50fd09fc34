// Package conf holds the helpers the packages' config structs share: the
// defaults of zero fields, and the checks that name a bad field and the
// rule it breaks, in one wording everywhere.
//
// A config's validate lists its checks in order and returns the first that
// fails, wrapped in the package's sentinel:
//
//	return conf.First(ErrInvalidConfig,
//		conf.Required("Store", c.Store != nil),
//		conf.AtLeast("BatchSize", c.BatchSize, 1),
//		conf.Positive("RetryBase", c.RetryBase),
//	)
//
// gives "relay: invalid config: BatchSize must be at least 1, not 0".
package conf

import (
	"cmp"
	"fmt"
	"os"

	"github.com/google/uuid"
)

// Default sets *field to def if it holds the zero value of its type.
func Default[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// InstanceID is the default name of a process's instance (a relay's ID):
// "<hostname>-<pid>-<8 random hex digits>".
func InstanceID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
}

// problem is a field that breaks a rule.
type problem struct{ field, rule string }

func (p *problem) Error() string { return p.field + " " + p.rule }

// Bad is the problem that field breaks rule (formatted with args):
// "Field <rule>".
func Bad(field, rule string, args ...any) error {
	return &problem{field, fmt.Sprintf(rule, args...)}
}

// Rule is nil if ok, and otherwise [Bad].
func Rule(field string, ok bool, rule string, args ...any) error {
	if ok {
		return nil
	}
	return Bad(field, rule, args...)
}

// Required checks that a required field is set: "Field is required".
func Required(field string, ok bool) error { return Rule(field, ok, "is required") }

// NotEmpty checks that a string is not empty: "Field must not be empty".
func NotEmpty(field, v string) error { return Rule(field, v != "", "must not be empty") }

// AtLeast checks v >= least: "Field must be at least 1, not 0".
func AtLeast[T cmp.Ordered](field string, v, least T) error {
	return Rule(field, v >= least, "must be at least %v, not %v", least, v)
}

// number is what Positive and NotNegative check: integers (time.Duration
// among them) and floats.
type number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Positive checks v > 0: "Field must be positive, not 0s".
func Positive[T number](field string, v T) error {
	var zero T
	return Rule(field, v > zero, "must be positive, not %v", v)
}

// NotNegative checks v >= 0: "Field must not be negative, not -1s".
func NotNegative[T number](field string, v T) error {
	var zero T
	return Rule(field, v >= zero, "must not be negative, not %v", v)
}

// Each checks every item of a list with check, which gets the item's field
// name: "Field[2]".
func Each[T any](field string, items []T, check func(field string, item T) error) error {
	for i, item := range items {
		if err := check(fmt.Sprintf("%s[%d]", field, i), item); err != nil {
			return err
		}
	}
	return nil
}

// First returns the first of problems that is not nil, wrapped in
// sentinel: "<sentinel>: Field rule"; nil if there is none. A problem may
// be any error (a nested config's, such as outbox.Limits.Validate's); it
// stays wrapped too.
func First(sentinel error, problems ...error) error {
	for _, p := range problems {
		if p != nil {
			return fmt.Errorf("%w: %w", sentinel, p)
		}
	}
	return nil
}
