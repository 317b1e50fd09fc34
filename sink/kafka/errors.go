package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/sink"
)

// permanentErrors are broker refusals that retrying the same record cannot
// fix. Some of them are flagged retriable by Kafka (CORRUPT_MESSAGE,
// UNKNOWN_TOPIC_OR_PARTITION), but franz-go already retried them before it
// gave up on the record: UNKNOWN_TOPIC_OR_PARTITION reaches us only after
// [UnknownTopicRetries] metadata refreshes found no such topic.
var permanentErrors = []*kerr.Error{
	kerr.MessageTooLarge,
	kerr.RecordListTooLarge,
	kerr.InvalidTopicException,
	kerr.UnknownTopicOrPartition,
	kerr.UnknownTopicID,
	kerr.TopicAuthorizationFailed,
	kerr.TransactionalIDAuthorizationFailed,
	kerr.InvalidRecord,
	kerr.CorruptMessage,
	kerr.UnsupportedForMessageFormat,
	kerr.InvalidRequiredAcks,
	kerr.PolicyViolation,
}

// unavailableErrors are broker errors that concern the whole client, not
// the record: with them every record fails alike, so dead-lettering would
// empty the outbox into the dead letters. They are treated like an
// unreachable broker: the relay backs off without counting attempts until
// an operator fixes the credentials or ACLs.
var unavailableErrors = []*kerr.Error{
	kerr.SaslAuthenticationFailed,
	kerr.UnsupportedSaslMechanism,
	kerr.IllegalSaslState,
	// The idempotent producer needs IDEMPOTENT_WRITE on the cluster (before
	// Kafka 3.0); without it every record fails with this error.
	kerr.ClusterAuthorizationFailed,
}

// retriableErrors are flagged not retriable by Kafka but are worth another
// attempt: an unexpected broker failure, and producer-id trouble that
// franz-go recovers from by taking a new producer id.
var retriableErrors = []*kerr.Error{
	kerr.UnknownServerError,
	kerr.OutOfOrderSequenceNumber,
	kerr.UnknownProducerID,
	kerr.InvalidProducerEpoch,
	kerr.InvalidProducerIDMapping,
	kerr.ProducerFenced,
}

// ClassifyError tells the relay how to treat a produce error (see
// [sink.Classify]). It returns:
//
//   - an error wrapping [sink.ErrPermanent] for a broker refusal that
//     retrying cannot fix: MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
//     INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION (after the
//     producer's unknown-topic retries), TOPIC_AUTHORIZATION_FAILED,
//     INVALID_RECORD, CORRUPT_MESSAGE, POLICY_VIOLATION, ... and any other
//     Kafka error that Kafka does not flag retriable, except those below;
//   - an error wrapping [sink.ErrUnavailable] when the broker could not be
//     reached or did not answer in time: context deadline or cancellation,
//     franz-go's record timeout or retry limit, network errors, io.EOF,
//     connection refused, a closed client; and client-wide authentication
//     or authorization failures (SASL_AUTHENTICATION_FAILED,
//     CLUSTER_AUTHORIZATION_FAILED), which fail every record alike;
//   - err itself (retriable, counting an attempt) for Kafka errors flagged
//     retriable (NOT_ENOUGH_REPLICAS, LEADER_NOT_AVAILABLE,
//     REQUEST_TIMED_OUT, ...), UNKNOWN_SERVER_ERROR, producer-id errors, and
//     anything unrecognised.
//
// The wrapped error keeps err in its chain, so its text names the broker's
// reason and errors.Is(result, kerr.MessageTooLarge) still holds. A nil err
// gives nil.
func ClassifyError(err error) error {
	if err == nil || errors.Is(err, sink.ErrPermanent) || errors.Is(err, sink.ErrUnavailable) {
		return err
	}
	// Gave up waiting: the broker's last error, if any, is kept in the
	// chain but did not end the wait.
	if isGaveUp(err) {
		return fmt.Errorf("%w: %w", sink.ErrUnavailable, err)
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		switch {
		case isOneOf(ke, unavailableErrors):
			return fmt.Errorf("%w: %w", sink.ErrUnavailable, err)
		case isOneOf(ke, retriableErrors):
			return err
		case isOneOf(ke, permanentErrors), !ke.Retriable:
			return fmt.Errorf("%w: %w", sink.ErrPermanent, err)
		default:
			return err
		}
	}
	if isUnavailable(err) {
		return fmt.Errorf("%w: %w", sink.ErrUnavailable, err)
	}
	return err
}

func isOneOf(ke *kerr.Error, list []*kerr.Error) bool {
	for _, e := range list {
		if ke.Code == e.Code {
			return true
		}
	}
	return false
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
