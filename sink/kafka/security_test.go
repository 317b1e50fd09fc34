package kafka_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

const secret = "s3cr3t-Pa55"

func TestSecurityOpts_ErrorsNameTheField(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		sec   kafka.Security
		field string
	}{
		{"missing CA file", kafka.Security{TLS: true, CAFile: filepath.Join(dir, "missing.pem")}, "Security.CAFile"},
		{"CA file without certificates", kafka.Security{TLS: true, CAFile: notPEM}, "Security.CAFile"},
		{"CA file without TLS", kafka.Security{CAFile: notPEM}, "Security.CAFile"},
		{"cert without key", kafka.Security{TLS: true, CertFile: notPEM}, "Security.KeyFile"},
		{"key without cert", kafka.Security{TLS: true, KeyFile: notPEM}, "Security.CertFile"},
		{"missing cert file", kafka.Security{TLS: true, CertFile: filepath.Join(dir, "c.pem"), KeyFile: notPEM}, "Security.CertFile"},
		{"unknown mechanism", kafka.Security{SASLMechanism: "KERBEROS", Username: "u", Password: secret}, "Security.SASLMechanism"},
		{"credentials without mechanism", kafka.Security{Username: "u", Password: secret}, "Security.SASLMechanism"},
		{"mechanism without user", kafka.Security{SASLMechanism: "PLAIN", Password: secret}, "Security.Username"},
		{"mechanism without password", kafka.Security{SASLMechanism: "scram-sha-256", Username: "u"}, "Security.Password"},
	} {
		_, err := tc.sec.Opts()
		if !errors.Is(err, kafka.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig naming %s", tc.name, err, tc.field)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: err = %v shows the password", tc.name, err)
		}
	}
	if opts, err := (kafka.Security{}).Opts(); err != nil || len(opts) != 0 {
		t.Errorf("zero Security: opts %d, err %v, want none", len(opts), err)
	}
}

func TestSecurity_PrintedWithoutPassword(t *testing.T) {
	t.Parallel()
	sec := kafka.Security{TLS: true, SASLMechanism: "PLAIN", Username: "alice", Password: secret}
	cfg := kafka.Config{Brokers: []string{"b:9092"}, Security: sec}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "security", sec)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "security", sec, "cfg", cfg)
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", sec), "%+v": fmt.Sprintf("%+v", sec), "%#v": fmt.Sprintf("%#v", sec),
		"%s": fmt.Sprintf("%s", sec), "%q": fmt.Sprintf("%q", sec), "%x": fmt.Sprintf("%x", sec),
		"Config %v": fmt.Sprintf("%v", cfg), "Config %+v": fmt.Sprintf("%+v", cfg), "Config %#v": fmt.Sprintf("%#v", cfg),
		"slog": logged.String(),
	}
	for how, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("%s shows the password: %s", how, out)
		}
		if !strings.Contains(out, "alice") && how != "%x" {
			t.Errorf("%s lost the other fields: %s", how, out)
		}
	}
}

func TestSecurity_SASL_PublishesEndToEnd(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, kfake.EnableSASL(), kfake.Superuser(mech, "u", secret), kfake.SeedTopics(1, "orders"))
			s := newSink(t, c, kafka.Config{DefaultTopic: "orders", Security: kafka.Security{
				SASLMechanism: mech, Username: "u", Password: secret,
			}})
			publish(t, s, rec("a", 0))
		})
	}
}

func TestSecurity_SASLWrongPassword_Unavailable(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "u", secret), kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders", Security: kafka.Security{
		SASLMechanism: "PLAIN", Username: "u", Password: "wrong",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A bad password fails every record alike: not the messages' fault, so
	// never a dead letter.
	for i, err := range s.Publish(ctx, []outbox.Record{rec("a", 0)}) {
		if !errors.Is(err, sink.ErrUnavailable) {
			t.Errorf("record %d: err = %v, want ErrUnavailable", i, err)
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// kfake drops the connection (real Kafka answers SASL_AUTHENTICATION_FAILED,
	// which ClassifyError also makes ErrUnavailable).
	if err := s.Ping(ctx); !errors.Is(err, sink.ErrUnavailable) {
		t.Errorf("Ping: err = %v, want ErrUnavailable", err)
	}
}

func TestSecurity_MutualTLS_PublishesEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := newCA(t)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	serverCert := newLeaf(t, ca, caKey, "kafka", x509.ExtKeyUsageServerAuth)
	clientCert := newLeaf(t, ca, caKey, "relay", x509.ExtKeyUsageClientAuth)
	writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", clientCert.Certificate[0])
	keyDER, err := x509.MarshalPKCS8PrivateKey(clientCert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "client.key"), "PRIVATE KEY", keyDER)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	c := newCluster(t, kfake.SeedTopics(1, "orders"), kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}))

	withCert := newSink(t, c, kafka.Config{DefaultTopic: "orders", Security: kafka.Security{
		TLS: true, CAFile: filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key"),
	}})
	publish(t, withCert, rec("a", 0))

	withoutCert := newSink(t, c, kafka.Config{DefaultTopic: "orders", Security: kafka.Security{
		TLS: true, CAFile: filepath.Join(dir, "ca.pem"),
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := withoutCert.Ping(ctx); !errors.Is(err, sink.ErrUnavailable) {
		t.Errorf("Ping without a client certificate: err = %v, want ErrUnavailable", err)
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// newLeaf returns a certificate for 127.0.0.1 signed by ca.
func newLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
