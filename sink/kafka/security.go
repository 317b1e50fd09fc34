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
	var opts []kgo.Opt
	if !s.TLS {
		if err := s.checkNoTLSFields(); err != nil {
			return nil, err
		}
	} else {
		tc, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	sasl, err := s.saslOpt()
	if err != nil {
		return nil, err
	}
	if sasl != nil {
		opts = append(opts, sasl)
	}
	return opts, nil
}

// badSecurity is the error for a Security field that breaks a rule.
func badSecurity(field, format string, args ...any) error {
	return conf.First(ErrInvalidConfig, conf.Bad("Security."+field, format, args...))
}

// checkNoTLSFields returns an error naming the first TLS setting that is
// set while TLS is off.
func (s Security) checkNoTLSFields() error {
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
			return badSecurity(f.name, "is set but Security.TLS is false")
		}
	}
	return nil
}

// tlsConfig is the TLS configuration of the connections to the brokers:
// at least TLS 1.2, with the CA file's roots and the client certificate
// when set.
func (s Security) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         s.ServerName,
		InsecureSkipVerify: s.InsecureSkipVerify, //nolint:gosec // opt-in, documented as development only
	}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, badSecurity("CAFile", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, badSecurity("CAFile", "%s holds no PEM certificate", s.CAFile)
		}
		tc.RootCAs = pool
	}
	cert, err := s.clientCert()
	if err != nil {
		return nil, err
	}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return tc, nil
}

// clientCert loads the client certificate for mutual TLS: nil when
// neither CertFile nor KeyFile is set, an error when only one is.
func (s Security) clientCert() (*tls.Certificate, error) {
	switch {
	case s.CertFile != "" && s.KeyFile == "":
		return nil, badSecurity("KeyFile", "is required with Security.CertFile")
	case s.CertFile == "" && s.KeyFile != "":
		return nil, badSecurity("CertFile", "is required with Security.KeyFile")
	case s.CertFile == "":
		return nil, nil
	}
	if _, err := os.Stat(s.CertFile); err != nil {
		return nil, badSecurity("CertFile", "%v", err)
	}
	if _, err := os.Stat(s.KeyFile); err != nil {
		return nil, badSecurity("KeyFile", "%v", err)
	}
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return nil, badSecurity("CertFile", "loading the key pair %s, %s: %v", s.CertFile, s.KeyFile, err)
	}
	return &cert, nil
}

// saslOpt is the kgo.SASL option of the mechanism, nil when none is set.
// The mechanism needs Username and Password, and they need a mechanism.
func (s Security) saslOpt() (kgo.Opt, error) {
	mech := strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	if mech == "" {
		if s.Username != "" || s.Password != "" {
			return nil, badSecurity("SASLMechanism", "is required when Security.Username or Security.Password is set")
		}
		return nil, nil
	}
	if mech != SASLPlain && mech != SASLScramSHA256 && mech != SASLScramSHA512 {
		return nil, badSecurity("SASLMechanism", "%q is not one of %s, %s, %s", s.SASLMechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if s.Username == "" {
		return nil, badSecurity("Username", "is required with Security.SASLMechanism %s", mech)
	}
	if s.Password == "" {
		return nil, badSecurity("Password", "is required with Security.SASLMechanism %s", mech)
	}
	switch mech {
	case SASLPlain:
		return kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()), nil
	case SASLScramSHA256:
		return kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()), nil
	default:
		return kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()), nil
	}
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
