package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"runtime"
	"slices"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// configFlag is the flag (and, through EnvName, the variable) that names the
// config file.
const configFlag = "config"

// notInFile are flags that a config file cannot set: the file itself, and
// the flags that only ask for help.
var notInFile = map[string]bool{configFlag: true, "help": true, "version": true}

// configFile is a parsed config file: a YAML mapping from flag names to
// values, shared by every command, in which a key that names a command and
// holds a mapping is that command's section: its keys apply to that command
// (and its subcommands) only, before the shared ones.
type configFile struct {
	path     string
	mode     fs.FileMode
	entries  []configEntry            // the shared keys, in file order
	sections map[string]configSection // by command name
}

// configSection is the section of one command.
type configSection struct {
	line    int // of the command's key
	entries []configEntry
}

// configEntry is one key of a config file and its value.
type configEntry struct {
	key, value *yaml.Node
}

// readConfigFile reads and parses the config file at path. The error names
// the file, and the line where the YAML library gives it.
func readConfigFile(path string) (*configFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	entries, err := parseConfig(path, data)
	if err != nil {
		return nil, err
	}
	c := &configFile{path: path, mode: info.Mode(), sections: map[string]configSection{}}
	for _, e := range entries {
		if e.value.Kind != yaml.MappingNode {
			c.entries = append(c.entries, e)
			continue
		}
		inner, err := mappingEntries(path, e.value)
		if err != nil {
			return nil, err
		}
		c.sections[e.key.Value] = configSection{line: e.key.Line, entries: inner}
	}
	return c, nil
}

// parseConfig parses the config file at path, which holds data: one YAML
// document, a mapping whose keys each appear once. An empty file has no
// entries.
func parseConfig(path string, data []byte) ([]configEntry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, fileError(path, next.Line, "more than one YAML document; a config file is one mapping of flag names to values")
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fileError(path, m.Line, "want a mapping of flag names to values")
	}
	return mappingEntries(path, m)
}

// mappingEntries returns the key-value pairs of the mapping m of the file
// at path, refusing a key that is not a plain name or that appears twice.
func mappingEntries(path string, m *yaml.Node) ([]configEntry, error) {
	var entries []configEntry
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fileError(path, k.Line, "a key must be a flag name")
		}
		if first, dup := seen[k.Value]; dup {
			return nil, fileError(path, k.Line, "key %q again (first on line %d)", k.Value, first)
		}
		seen[k.Value] = k.Line
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		entries = append(entries, configEntry{key: k, value: v})
	}
	return entries, nil
}

// fileError returns an error about line of the config file at path.
func fileError(path string, line int, format string, args ...any) error {
	return fmt.Errorf("config file %s:%d: %s", path, line, fmt.Sprintf(format, args...))
}

// checkKeys returns an error naming every shared key of the file that is
// no flag of any command (no key of k.all), every section that is no
// command, and every key of a section that is no flag of its command.
func (c *configFile) checkKeys(k fileKeys) error {
	errs := []error{c.checkEntries(c.entries, k.all, "no command has a flag --%s")}
	for _, name := range slices.Sorted(maps.Keys(c.sections)) {
		sec := c.sections[name]
		flags, ok := k.byCommand[name]
		switch _, flag := k.all[name]; {
		case !ok && flag:
			errs = append(errs, fileError(c.path, sec.line, "invalid value for key %s: takes a value or a list, not a mapping", name))
			continue
		case !ok:
			errs = append(errs, fileError(c.path, sec.line, "unknown section %q: no command %s", name, name))
			continue
		}
		errs = append(errs, c.checkEntries(sec.entries, flags, "command "+name+" has no flag --%s"))
	}
	return errors.Join(errs...)
}

// checkEntries returns an error naming every entry that is no key of
// known, saying why with unknown (a format of the key).
func (c *configFile) checkEntries(entries []configEntry, known map[string]string, unknown string) error {
	var errs []error
	for _, e := range entries {
		name := e.key.Value
		switch _, ok := known[name]; {
		case notInFile[name]:
			errs = append(errs, fileError(c.path, e.key.Line, "key %q cannot be set in a config file", name))
		case !ok:
			errs = append(errs, fileError(c.path, e.key.Line, "unknown key %q: "+unknown, name, name))
		}
	}
	return errors.Join(errs...)
}

// apply sets each flag of fs, the flags of command, that is still at its
// default from the key of the same name in command's section, else from the
// shared key, if the file has one with a value (a key without a value, as
// an empty environment variable, sets nothing), and records it in sources.
// A key that is a flag of another command only is no flag of fs: it is
// skipped. The errors name the key, the file and the line.
func (c *configFile) apply(fs *pflag.FlagSet, command string, sources map[string]source) error {
	return errors.Join(
		c.applyEntries(fs, c.sections[command].entries, sources),
		c.applyEntries(fs, c.entries, sources))
}

// applyEntries sets the flags of fs still at their defaults from entries.
func (c *configFile) applyEntries(fs *pflag.FlagSet, entries []configEntry, sources map[string]source) error {
	var errs []error
	for _, e := range entries {
		f := fs.Lookup(e.key.Value)
		if f == nil || f.Changed || isNull(e.value) {
			continue
		}
		if err := setFromNode(f, e.value); err != nil {
			errs = append(errs, c.valueError(f, e.value, err))
			continue
		}
		f.Changed = true
		sources[f.Name] = source{kind: fromFile, name: c.path, line: e.key.Line}
	}
	return errors.Join(errs...)
}

// isNull reports whether v is YAML's null: a key with no value.
func isNull(v *yaml.Node) bool {
	return v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null"
}

// setFromNode sets f from a YAML value with the flag's own parser: a scalar
// as on the command line; for a list flag, a YAML list or a comma-separated
// string.
func setFromNode(f *pflag.Flag, v *yaml.Node) error {
	list, isList := f.Value.(pflag.SliceValue)
	switch {
	case v.Kind == yaml.ScalarNode && isList:
		return list.Replace(splitList(v.Value))
	case v.Kind == yaml.ScalarNode:
		return f.Value.Set(v.Value)
	case v.Kind == yaml.SequenceNode && isList:
		items, err := scalars(v)
		if err != nil {
			return err
		}
		return list.Replace(items)
	case v.Kind == yaml.SequenceNode:
		return errors.New("takes one value, not a list")
	}
	return errors.New("takes a value or a list, not a mapping")
}

// scalars returns the items of the YAML list v, each a single value.
func scalars(v *yaml.Node) ([]string, error) {
	items := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		if item.Kind == yaml.AliasNode {
			item = item.Alias
		}
		if item.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: a list item must be a single value", item.Line)
		}
		items = append(items, item.Value)
	}
	return items, nil
}

// valueError describes a value of the file that f's parser refused; the
// value of a sensitive flag is not repeated.
func (c *configFile) valueError(f *pflag.Flag, v *yaml.Node, err error) error {
	at := fmt.Sprintf("config file %s:%d", c.path, v.Line)
	switch {
	case isSensitive(f):
		return fmt.Errorf("%s: invalid value for key %s: not a valid %s", at, f.Name, f.Value.Type())
	case v.Kind == yaml.ScalarNode:
		return fmt.Errorf("%s: invalid value %q for key %s: %w", at, v.Value, f.Name, err)
	}
	return fmt.Errorf("%s: invalid value for key %s: %w", at, f.Name, err)
}

// exposedSecrets returns the keys of the file that hold a secret (keys maps
// each flag name to its sensitivity: a secret, or a URL with a password)
// when other users than its owner may read it; none on Windows, whose
// permission bits say nothing about that.
func (c *configFile) exposedSecrets(keys map[string]string) []string {
	if runtime.GOOS == "windows" || c.mode.Perm()&0o077 == 0 {
		return nil
	}
	var secrets []string
	add := func(prefix string, entries []configEntry) {
		for _, e := range entries {
			if holdsSecret(keys[e.key.Value], e.value) {
				secrets = append(secrets, prefix+e.key.Value)
			}
		}
	}
	add("", c.entries)
	for _, name := range slices.Sorted(maps.Keys(c.sections)) {
		add(name+".", c.sections[name].entries)
	}
	return secrets
}

// holdsSecret reports whether v, the value of a key of that sensitivity,
// holds a secret: any value of a secret but the empty one, a URL with a
// password.
func holdsSecret(sensitivity string, v *yaml.Node) bool {
	switch {
	case sensitivity == "" || isNull(v) || v.Kind == yaml.ScalarNode && v.Value == "":
		return false
	case sensitivity == sensitiveURL && v.Kind == yaml.ScalarNode:
		return RedactURL(v.Value) != v.Value
	}
	return true
}
