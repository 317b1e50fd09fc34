package demo

import (
	"io"
	"log/slog"
	"testing"

	"github.com/outbox-dev/outbox/sink/kafka"
)

// Every Kafka client the demo creates is configured with Config's
// KafkaSecurity: the relays' producers and the consumers (the topic
// reader takes kafka.Security.Opts, see start).
func TestSystem_KafkaClientConfigsCarryTheSecurity(t *testing.T) {
	t.Parallel()
	sec := kafka.Security{TLS: true, ServerName: "kafka.internal", SASLMechanism: kafka.SASLScramSHA512, Username: "demo", Password: "pw"}
	brokers := []string{"kafka-1:9093"}
	s := &system{cfg: Config{KafkaBrokers: brokers, KafkaSecurity: sec}, brokers: brokers, log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	sink := s.sinkConfig("orders", TopicOrders)
	if sink.Security != sec || len(sink.Brokers) != 1 || sink.Brokers[0] != brokers[0] || sink.DefaultTopic != TopicOrders {
		t.Errorf("relay sink config: brokers %v, topic %s, security %v; want %v, %s, %v",
			sink.Brokers, sink.DefaultTopic, sink.Security, brokers, TopicOrders, sec)
	}
	cons := s.consumerConfig(GroupBilling, nil, (&consumerStats{}).hooks())
	if cons.Security != sec || len(cons.Brokers) != 1 || cons.Brokers[0] != brokers[0] || cons.Group != GroupBilling {
		t.Errorf("consumer config: brokers %v, group %s, security %v; want %v, %s, %v",
			cons.Brokers, cons.Group, cons.Security, brokers, GroupBilling, sec)
	}
}

// The start banner names TLS and the SASL mechanism and user, never the
// password.
func TestSecurityNote_ShowsNoPassword(t *testing.T) {
	t.Parallel()
	for sec, want := range map[kafka.Security]string{
		{}:          "",
		{TLS: true}: " with TLS",
		{TLS: true, SASLMechanism: "scram-sha-256", Username: "demo", Password: "pw"}: " with TLS, SASL SCRAM-SHA-256 as demo",
	} {
		if got := securityNote(sec); got != want {
			t.Errorf("securityNote(%v) = %q; want %q", sec, got, want)
		}
	}
}
