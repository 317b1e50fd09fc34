// Package failure decides what happens to a message whose publish failed,
// for every relay strategy (claim, cursor and CDC, whose table path is a
// polling relay), so that they all treat a failure alike:
//
//   - A retriable error (any error that [sink.Classify] puts in no other
//     class) counts an attempt and schedules a retry after
//     min(RetryMax, RetryBase·2^attempts), less a random jitter of up to
//     half of it; the attempt that reaches MaxAttempts makes the message
//     a dead letter instead.
//   - A permanent error ([sink.ErrPermanent]: too large, invalid, not
//     authorized), and a message that is itself invalid
//     ([outbox.Record.Invalid]), count the attempt and dead-letter the
//     message at once, with the broker's (or the row's) reason.
//   - A topic that cannot take records ([sink.ErrTopicUnavailable]) is not
//     the message's fault: no attempt is counted, and the message is tried
//     again after [sink.TopicRetryDelay]; other topics are not held up.
//   - An unreachable broker ([sink.ErrUnavailable]) is not the message's
//     fault either: no attempt is counted, and the whole relay pauses (a
//     [Pause]: 500 ms, doubling up to a maximum while the broker stays
//     unreachable, ended by the next success). Its [store.Failure] says
//     Unavailable, so that a strategy holding the message in memory gives
//     it back instead of recording it.
//
// [Policy.Decide] turns a failed publish into the [store.Failure] a store
// records; a [Reporter] logs it and calls the relay's Failed hook.
package failure
