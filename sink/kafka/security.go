package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/outbox-dev/outbox/internal/conf"
)

// The SASL mechanisms Security.SASLMechanism accepts.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Security configures how the client connects and authenticates. The zero
// value is plaintext without authentication.
//
// Printing a Security with fmt or log/slog shows whether a password is set,
// never the password itself.
type Security struct {
	// TLS dials the brokers with TLS (minimum TLS 1.2). Defaults to false.
	TLS bool
	// CAFile is a PEM file of the CA certificates that sign the brokers'
	// certificates. Requires TLS. Defaults to the system's roots.
	CAFile string
	// CertFile is the PEM client certificate for mutual TLS; KeyFile is its
	// private key. Set both or neither. Require TLS. Default to none.
	CertFile string
	KeyFile  string
	// InsecureSkipVerify turns off verification of the brokers'
	// certificates. For development only. Requires TLS. Defaults to false.
	InsecureSkipVerify bool
	// ServerName is the name verified in the brokers' certificates.
	// Requires TLS. Defaults to the host of each broker's address.
	ServerName string
	// SASLMechanism is "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512"
	// (case-insensitive). PLAIN sends the password as is: use it with TLS.
	// Defaults to "", no authentication.
	SASLMechanism string
	// Username and Password are the SASL credentials. Both are required
	// with a SASLMechanism. Default to none.
	Username string
	Password string
}

// Opts returns the franz-go options for s: kgo.DialTLSConfig when TLS is on
// and kgo.SASL when a mechanism is set. An error wraps [ErrInvalidConfig]
// and names the Security field at fault.
func (s Security) Opts() ([]kgo.Opt, error) {
	bad := func(field, format string, args ...any) error {
		return conf.First(ErrInvalidConfig, conf.Bad("Security."+field, format, args...))
	}
	var opts []kgo.Opt
	if !s.TLS {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"CAFile", s.CAFile != ""},
			{"CertFile", s.CertFile != ""},
			{"KeyFile", s.KeyFile != ""},
			{"InsecureSkipVerify", s.InsecureSkipVerify},
			{"ServerName", s.ServerName != ""},
		} {
			if f.set {
				return nil, bad(f.name, "is set but Security.TLS is false")
			}
		}
	} else {
		tc := &tls.Config{
			MinVersion:         tls.VersionTLS12,
			ServerName:         s.ServerName,
			InsecureSkipVerify: s.InsecureSkipVerify, //nolint:gosec // opt-in, documented as development only
		}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, bad("CAFile", "%v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, bad("CAFile", "%s holds no PEM certificate", s.CAFile)
			}
			tc.RootCAs = pool
		}
		switch {
		case s.CertFile != "" && s.KeyFile == "":
			return nil, bad("KeyFile", "is required with Security.CertFile")
		case s.CertFile == "" && s.KeyFile != "":
			return nil, bad("CertFile", "is required with Security.KeyFile")
		case s.CertFile != "":
			if _, err := os.Stat(s.CertFile); err != nil {
				return nil, bad("CertFile", "%v", err)
			}
			if _, err := os.Stat(s.KeyFile); err != nil {
				return nil, bad("KeyFile", "%v", err)
			}
			cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				return nil, bad("CertFile", "loading the key pair %s, %s: %v", s.CertFile, s.KeyFile, err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}

	mech := strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	if mech == "" {
		if s.Username != "" || s.Password != "" {
			return nil, bad("SASLMechanism", "is required when Security.Username or Security.Password is set")
		}
		return opts, nil
	}
	if mech != SASLPlain && mech != SASLScramSHA256 && mech != SASLScramSHA512 {
		return nil, bad("SASLMechanism", "%q is not one of %s, %s, %s", s.SASLMechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if s.Username == "" {
		return nil, bad("Username", "is required with Security.SASLMechanism %s", mech)
	}
	if s.Password == "" {
		return nil, bad("Password", "is required with Security.SASLMechanism %s", mech)
	}
	switch mech {
	case SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	case SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
	case SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
	}
	return opts, nil
}

// redacted stands for a password that is set.
const redacted = "[REDACTED]"

func (s Security) password() string {
	if s.Password == "" {
		return ""
	}
	return redacted
}

// String describes s with the password redacted.
func (s Security) String() string {
	return fmt.Sprintf("{TLS:%t CAFile:%s CertFile:%s KeyFile:%s InsecureSkipVerify:%t ServerName:%s SASLMechanism:%s Username:%s Password:%s}",
		s.TLS, s.CAFile, s.CertFile, s.KeyFile, s.InsecureSkipVerify, s.ServerName, s.SASLMechanism, s.Username, s.password())
}

// GoString is String for the %#v verb, so that it redacts too.
func (s Security) GoString() string { return "kafka.Security" + s.String() }

// Format prints s with the password redacted, whatever the verb.
func (s Security) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, s.GoString())
		return
	}
	fmt.Fprint(f, s.String())
}

// LogValue describes s for log/slog with the password redacted.
func (s Security) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Bool("tls", s.TLS),
		slog.String("caFile", s.CAFile),
		slog.String("certFile", s.CertFile),
		slog.String("keyFile", s.KeyFile),
		slog.Bool("insecureSkipVerify", s.InsecureSkipVerify),
		slog.String("serverName", s.ServerName),
		slog.String("saslMechanism", s.SASLMechanism),
		slog.String("username", s.Username),
		slog.String("password", s.password()),
	)
}
