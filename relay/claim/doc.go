// Package claim is the claim strategy of the relay
// ([github.com/outbox-dev/outbox/relay/strategy.Strategy]) over any
// [store.Queue]: pgstore, sqlitestore, the table path of package cdc.
//
// Every relay claims due messages itself, and any number of relays share
// the work: a claim leases up to a batch of messages to one relay under a
// fresh token, and the relay marks each message SENT (or FAILED, or
// DEAD_LETTER) once the broker answered. The store's contract makes the
// guarantees:
//
//   - No two relays publish a message at the same time: a claimed message
//     is IN_FLIGHT under its claim's token until the lease ends, and every
//     mark is fenced by the token, so a relay whose lease was taken over
//     changes nothing.
//   - Order per aggregate: a claim returns only the head of each
//     aggregate (no earlier message of it unsent), whatever the number of
//     relays.
//   - A relay that dies loses nothing: its messages become claimable again
//     when their lease ends, and are published again (at least once).
//
// A store that implements [store.MarkClaimer] marks a published batch and
// claims the next one in one round trip; a [store.Notifier] wakes the
// relay on new messages (see [Strategy.Wakeups]).
package claim
