package cli

// The 'outbox config' command: the configuration a command would run with,
// as a config file.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

func newConfigCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "config [command] [flags]",
		GroupID: "operate",
		Short:   "Print the configuration a command would run with, and where each value comes from",
		Long: `config prints the configuration that the command it names would run with,
given the same flags, environment and config file: each of the command's
flags as a key of a config file, with its value and, as a comment, where the
value comes from: the command line (flag), an environment variable (env
OUTBOX_X), the config file (file F:LINE) or the flag's default. Without a
command it prints the keys every command shares.

Secrets are not shown: the password of a database URL is replaced by xxxxx,
and the value of another secret (--kafka-sasl-password, --status-token) by
(set). The keys at their defaults come last, commented out. Without secrets,
the output is a config file that gives the command the same configuration.

Put the flags after the command: 'outbox config relay --config FILE'.`,
		Example: `  outbox config relay --config /etc/outbox/outbox.yaml
  OUTBOX_CONFIG=/etc/outbox/outbox.yaml outbox config dlq replay
  outbox config`,
		DisableFlagParsing: true,
		Annotations:        map[string]string{selfConfigured: ""},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.printConfig(cmd, args)
		},
	}
}

// printConfig prints the configuration of the command that args name,
// configured by the flags in args, the environment and the config file.
func (a *app) printConfig(cmd *cobra.Command, args []string) error {
	if wantsHelp(args) {
		return cmd.Help()
	}
	target, flagArgs, err := cmd.Root().Find(args)
	if err != nil {
		return &usageError{err}
	}
	if err := target.ParseFlags(flagArgs); err != nil {
		return &usageError{err}
	}
	c, err := a.configure(target)
	if err != nil {
		return err
	}
	if err := a.setLogger(); err != nil {
		return err
	}
	c.warn(a.logger, a.fileKeys.all)
	doc, err := configDocument(target, c)
	if err != nil {
		return err
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("print the configuration: %w", err)
	}
	_, err = a.stdout.Write(out)
	return err
}

// wantsHelp reports whether args ask for help before any "--".
func wantsHelp(args []string) bool {
	end := len(args)
	if i := slices.Index(args, "--"); i >= 0 {
		end = i
	}
	return slices.Contains(args[:end], "-h") || slices.Contains(args[:end], "--help")
}

// configDocument is the configuration of target as a config file: a
// heading comment, then each of its flags that a file may set and that is
// not at its default, the shared ones first, with its value and its source
// as a comment; then, commented out, the flags at their defaults, so that
// the document read back as a config file sets only what was set.
func configDocument(target *cobra.Command, c *configuration) (*yaml.Node, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	var defaults []string
	var err error
	add := func(f *pflag.Flag) {
		if notInFile[f.Name] || err != nil {
			return
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: f.Name}
		value, redacted := valueNode(f)
		src, set := c.sources[f.Name]
		if !set {
			var line string
			line, err = commentedOut(key, value)
			defaults = append(defaults, line)
			return
		}
		value.LineComment = src.String()
		if redacted {
			value.LineComment += ", redacted"
		}
		m.Content = append(m.Content, key, value)
	}
	target.InheritedFlags().VisitAll(add)
	target.LocalFlags().VisitAll(add)
	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: heading(target, c), Content: []*yaml.Node{m}}
	if len(defaults) > 0 {
		doc.FootComment = "# " + defaultsHeading + "\n" + strings.Join(defaults, "\n")
	}
	return doc, err
}

// defaultsHeading precedes the flags at their defaults in configDocument.
const defaultsHeading = "At their defaults (uncomment a key to set it):"

// commentedOut returns key: value as a YAML comment line.
func commentedOut(key, value *yaml.Node) (string, error) {
	out, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{key, value}})
	if err != nil {
		return "", fmt.Errorf("print the configuration: %w", err)
	}
	return "# " + strings.TrimSuffix(string(out), "\n"), nil
}

// heading says what configDocument shows and which config file it read.
func heading(target *cobra.Command, c *configuration) string {
	lines := []string{fmt.Sprintf("The configuration of '%s': each key's value, then where it comes from.", target.CommandPath())}
	if target == target.Root() {
		lines[0] = fmt.Sprintf("The keys every %s command shares: each key's value, then where it comes from.", target.Name())
	}
	switch {
	case c.file == nil:
		lines = append(lines, "No config file: --config or "+EnvName(configFlag)+" names one.")
	case c.sources[configFlag].kind == fromEnv:
		lines = append(lines, fmt.Sprintf("Config file: %s, from %s.", c.file.path, EnvName(configFlag)))
	default:
		lines = append(lines, fmt.Sprintf("Config file: %s, from --%s.", c.file.path, configFlag))
	}
	lines = append(lines, `Secrets are not shown: xxxxx stands for a password in a URL, (set) for a secret.`)
	return "# " + strings.Join(lines, "\n# ")
}

// valueNode returns f's value as a YAML value that f's parser reads back
// (a list as a list), with secrets hidden (shownValue), and whether one is.
func valueNode(f *pflag.Flag) (*yaml.Node, bool) {
	if list, ok := f.Value.(pflag.SliceValue); ok && !isSensitive(f) {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, item := range list.GetSlice() {
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: item})
		}
		return seq, false
	}
	v, redacted := shownValue(f)
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	switch f.Value.Type() {
	case "bool", "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		n.Tag = "" // plain, as YAML reads it
	}
	return n, redacted
}
