package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix starts the name of every environment variable that sets a flag.
const envPrefix = "OUTBOX_"

// sensitiveAnnotation marks a flag whose value is a secret (or may contain
// one): error messages about it never repeat the value.
const sensitiveAnnotation = "outbox_sensitive"

// noEnv lists the flags that no environment variable sets.
var noEnv = map[string]bool{"help": true, "version": true}

// EnvName returns the environment variable that sets the flag called name:
// OUTBOX_ followed by the name in upper snake case (database-url gives
// OUTBOX_DATABASE_URL).
func EnvName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// LookupEnv is how the command line reads its environment, as os.LookupEnv.
type LookupEnv func(key string) (string, bool)

// bindEnv sets every flag of fs that was not given on the command line from
// its environment variable (see EnvName), if that is set and not empty. A
// slice flag takes a comma-separated list. A flag set this way counts as
// changed. The error names the variable and the flag of each bad value.
func bindEnv(fs *pflag.FlagSet, lookup LookupEnv) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || noEnv[f.Name] {
			return
		}
		name := EnvName(f.Name)
		v, ok := lookup(name)
		if !ok || v == "" {
			return
		}
		var err error
		if sv, isSlice := f.Value.(pflag.SliceValue); isSlice {
			err = sv.Replace(splitList(v))
		} else {
			err = f.Value.Set(v)
		}
		switch {
		case err != nil && isSensitive(f):
			// The parse error may quote the value: name only the type.
			errs = append(errs, fmt.Errorf("%s: invalid value for --%s: not a valid %s", name, f.Name, f.Value.Type()))
			return
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: invalid value %q for --%s: %w", name, v, f.Name, err))
			return
		}
		f.Changed = true
	})
	return errors.Join(errs...)
}

// splitList splits a comma-separated list, trimming blanks and dropping
// empty items.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// annotateEnv appends the environment variable to the help text of every
// flag in the command tree under root, so that --help shows it.
func annotateEnv(root *cobra.Command) {
	walkFlags(root, func(f *pflag.Flag) {
		if !noEnv[f.Name] {
			f.Usage += " [$" + EnvName(f.Name) + "]"
		}
	})
}

// Values of sensitiveAnnotation: how 'outbox config' shows the value.
const (
	sensitiveSecret = "secret" // not at all: "(set)"
	sensitiveURL    = "url"    // with its passwords replaced (RedactURL)
)

// markSensitive marks flags whose values must never be shown.
func markSensitive(fs *pflag.FlagSet, names ...string) {
	annotate(fs, sensitiveSecret, names)
}

// markSensitiveURL marks flags whose values are database URLs or DSNs:
// they are shown only with their passwords replaced (RedactURL).
func markSensitiveURL(fs *pflag.FlagSet, names ...string) {
	annotate(fs, sensitiveURL, names)
}

func annotate(fs *pflag.FlagSet, kind string, names []string) {
	for _, name := range names {
		if err := fs.SetAnnotation(name, sensitiveAnnotation, []string{kind}); err != nil {
			panic(fmt.Sprintf("cli: mark %s sensitive: %v", name, err))
		}
	}
}

func isSensitive(f *pflag.Flag) bool {
	return sensitivity(f) != ""
}

// sensitivity returns sensitiveSecret or sensitiveURL for a sensitive
// flag, "" for another.
func sensitivity(f *pflag.Flag) string {
	if kind := f.Annotations[sensitiveAnnotation]; len(kind) > 0 {
		return kind[0]
	}
	return ""
}

// shownValue returns f's value fit to print: a URL flag's with its
// passwords replaced, another sensitive flag's as "(set)" (or empty when
// it is), and whether it differs from the real one.
func shownValue(f *pflag.Flag) (string, bool) {
	v := f.Value.String()
	switch kind := sensitivity(f); {
	case kind == "" || v == "":
		return v, false
	case kind == sensitiveURL:
		shown := RedactURL(v)
		return shown, shown != v
	}
	return "(set)", true
}
