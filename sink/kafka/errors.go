package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/sink"
)

// codeClass is how a Kafka error code is treated, and, for the codes that
// concern a topic, what an operator does about it.
type codeClass struct {
	class sink.Class
	fix   string
}

// Fixes of the topic-level errors, as TopicError.Fix says them.
const (
	fixMissingTopic = "create the topic, or fix the route that names it; with the development broker (outbox broker) topics are created on first use"
	fixTopicACL     = "grant the relay's principal WRITE and DESCRIBE on the topic"
	fixReplicas     = "bring the partition's replicas back (its leader, min.insync.replicas)"
	fixFormat       = "the topic's message.format.version is older than 0.11: raise it, since records carry headers"
)

// codeClasses are the produce errors whose class does not follow from
// Kafka's retriable flag alone. The rule: only a record that is itself at
// fault is Permanent; a topic that cannot take records now is
// TopicUnavailable (the record waits, and other topics flow); a problem of
// the client as a whole (credentials, cluster ACLs, settings) is
// Unavailable (the relay pauses). A code not listed is Unavailable when
// Kafka flags it retriable (a transient state of the cluster, which
// franz-go already retried) and Retriable otherwise: an error nobody
// expected counts an attempt, so that a record it concerns ends as a dead
// letter after the relay's maximum attempts rather than blocking forever.
var codeClasses = map[int16]codeClass{
	// The record itself.
	kerr.MessageTooLarge.Code:             {class: sink.Permanent},
	kerr.RecordListTooLarge.Code:          {class: sink.Permanent},
	kerr.InvalidRecord.Code:               {class: sink.Permanent},
	kerr.CorruptMessage.Code:              {class: sink.Permanent},
	kerr.InvalidTimestamp.Code:            {class: sink.Permanent},
	kerr.InvalidTopicException.Code:       {class: sink.Permanent},
	kerr.PolicyViolation.Code:             {class: sink.Permanent},
	kerr.DuplicateSequenceNumber.Code:     {class: sink.Retriable},
	kerr.UnknownServerError.Code:          {class: sink.Retriable},
	kerr.OutOfOrderSequenceNumber.Code:    {class: sink.Retriable},
	kerr.InvalidProducerEpoch.Code:        {class: sink.Retriable},
	kerr.UnknownProducerID.Code:           {class: sink.Retriable},
	kerr.InvalidProducerIDMapping.Code:    {class: sink.Retriable},
	kerr.ProducerFenced.Code:              {class: sink.Retriable},
	kerr.UnsupportedForMessageFormat.Code: {class: sink.TopicUnavailable, fix: fixFormat},

	// The topic.
	kerr.UnknownTopicOrPartition.Code:      {class: sink.TopicUnavailable, fix: fixMissingTopic},
	kerr.UnknownTopicID.Code:               {class: sink.TopicUnavailable, fix: fixMissingTopic},
	kerr.TopicAuthorizationFailed.Code:     {class: sink.TopicUnavailable, fix: fixTopicACL},
	kerr.LeaderNotAvailable.Code:           {class: sink.TopicUnavailable, fix: fixReplicas},
	kerr.NotLeaderForPartition.Code:        {class: sink.TopicUnavailable, fix: fixReplicas},
	kerr.NotEnoughReplicas.Code:            {class: sink.TopicUnavailable, fix: fixReplicas},
	kerr.NotEnoughReplicasAfterAppend.Code: {class: sink.TopicUnavailable, fix: fixReplicas},
	kerr.KafkaStorageError.Code:            {class: sink.TopicUnavailable, fix: fixReplicas},

	// The client as a whole.
	kerr.SaslAuthenticationFailed.Code:           {class: sink.Unavailable},
	kerr.UnsupportedSaslMechanism.Code:           {class: sink.Unavailable},
	kerr.IllegalSaslState.Code:                   {class: sink.Unavailable},
	kerr.ClusterAuthorizationFailed.Code:         {class: sink.Unavailable},
	kerr.TransactionalIDAuthorizationFailed.Code: {class: sink.Unavailable},
	kerr.InvalidRequiredAcks.Code:                {class: sink.Unavailable},
	kerr.UnsupportedVersion.Code:                 {class: sink.Unavailable},
}

// classOf returns how ke is treated.
func classOf(ke *kerr.Error) codeClass {
	if c, ok := codeClasses[ke.Code]; ok {
		return c
	}
	if ke.Retriable {
		return codeClass{class: sink.Unavailable}
	}
	return codeClass{class: sink.Retriable}
}

// ClassifyError tells the relay how to treat a produce error (see the
// package doc of sink). It returns:
//
//   - an error wrapping [sink.ErrPermanent] when the record itself is at
//     fault: MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD,
//     CORRUPT_MESSAGE, INVALID_TIMESTAMP, INVALID_TOPIC_EXCEPTION (a topic
//     name Kafka cannot have), POLICY_VIOLATION;
//   - a [*sink.TopicError] when the record's topic cannot take records now:
//     UNKNOWN_TOPIC_OR_PARTITION and UNKNOWN_TOPIC_ID (the topic does not
//     exist, yet or any more), TOPIC_AUTHORIZATION_FAILED,
//     UNSUPPORTED_FOR_MESSAGE_FORMAT, and the partition-level
//     LEADER_NOT_AVAILABLE, NOT_LEADER_FOR_PARTITION, NOT_ENOUGH_REPLICAS
//     and KAFKA_STORAGE_ERROR when they are the answer itself (franz-go
//     retries those until the record's delivery timeout or the caller's
//     deadline, which gives the sink.ErrUnavailable error below). Its Topic
//     is empty: [Sink.Publish] fills it in;
//   - an error wrapping [sink.ErrUnavailable] when the broker could not be
//     reached or did not answer in time (context deadline or cancellation,
//     franz-go's record timeout or retry limit, network errors, io.EOF,
//     connection refused, a closed client), when it refuses the client as
//     a whole (SASL_AUTHENTICATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
//     INVALID_REQUIRED_ACKS, UNSUPPORTED_VERSION), and for every other code
//     Kafka flags retriable (REQUEST_TIMED_OUT, NETWORK_EXCEPTION, ...);
//   - err itself (retriable, counting an attempt) for UNKNOWN_SERVER_ERROR,
//     the producer-id errors franz-go recovers from, codes Kafka does not
//     flag retriable and that are not listed above, and anything
//     unrecognised.
//
// The result keeps err in its chain, so its text names the broker's reason
// and errors.Is(result, kerr.MessageTooLarge) still holds. A nil err
// gives nil.
func ClassifyError(err error) error {
	if err == nil || errors.Is(err, sink.ErrPermanent) || errors.Is(err, sink.ErrUnavailable) ||
		errors.Is(err, sink.ErrTopicUnavailable) {
		return err
	}
	// Gave up waiting: the broker's last error, if any, is kept in the
	// chain but did not end the wait.
	if isGaveUp(err) {
		return fmt.Errorf("%w: %w", sink.ErrUnavailable, err)
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		c := classOf(ke)
		switch c.class {
		case sink.Permanent:
			return fmt.Errorf("%w: %w", sink.ErrPermanent, err)
		case sink.Unavailable:
			return fmt.Errorf("%w: %w", sink.ErrUnavailable, err)
		case sink.TopicUnavailable:
			return &sink.TopicError{Err: err, Fix: c.fix}
		}
		return err
	}
	if isMissingPartition(err) {
		return &sink.TopicError{Err: err, Fix: fixMissingTopic}
	}
	if isUnavailable(err) {
		return fmt.Errorf("%w: %w", sink.ErrUnavailable, err)
	}
	return err
}

// isMissingPartition reports whether err is franz-go's (unexported) error
// for a topic whose metadata lost a partition the producer was using: the
// topic was deleted, or deleted and created again with fewer partitions.
func isMissingPartition(err error) bool {
	return strings.Contains(err.Error(), "metadata update is missing a partition")
}

// isGaveUp reports whether err says the caller or the producer stopped
// waiting for the broker.
func isGaveUp(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, kgo.ErrRecordTimeout) ||
		errors.Is(err, kgo.ErrRecordRetries) ||
		errors.Is(err, kgo.ErrClientClosed)
}

// isUnavailable reports whether err says the broker could not be reached.
func isUnavailable(err error) bool {
	if errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
		return true
	}
	return false
}
