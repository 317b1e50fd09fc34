package inbox

import "context"

// Bound is an inbox with a message handler bound to it, as [Inbox.Bind],
// [SQLInbox.Bind] and [SQLiteInbox.Bind] return it: the one value a consumer runner needs to
// apply, park and check the database, whichever database the inbox uses.
// It implements consumer.Applier. Use it only as returned by Bind.
type Bound struct {
	apply func(ctx context.Context, consumer string, msg Message) (Result, error)
	inbox interface {
		Park(ctx context.Context, consumer string, msg Message, attempts int, cause error) error
		Ping(ctx context.Context) error
	}
}

// Apply handles msg for consumer with the bound handler, once: see
// [Inbox.Handle], [SQLInbox.Handle] and [SQLiteInbox.Handle]. A nil bound handler makes every
// call fail.
func (b *Bound) Apply(ctx context.Context, consumer string, msg Message) (Result, error) {
	return b.apply(ctx, consumer, msg)
}

// Park parks msg for consumer: see [Inbox.Park].
func (b *Bound) Park(ctx context.Context, consumer string, msg Message, attempts int, cause error) error {
	return b.inbox.Park(ctx, consumer, msg, attempts, cause)
}

// Ping reports whether the inbox's database answers.
func (b *Bound) Ping(ctx context.Context) error { return b.inbox.Ping(ctx) }

// Bind returns the inbox with fn bound to it, for a consumer runner
// (consumer.Config.Applier): its Apply is Handle with fn.
func (i *Inbox) Bind(fn HandlerFunc) *Bound {
	return &Bound{inbox: i, apply: func(ctx context.Context, consumer string, msg Message) (Result, error) {
		return i.Handle(ctx, consumer, msg, fn)
	}}
}

// Bind returns the inbox with fn bound to it, for a consumer runner
// (consumer.Config.Applier): its Apply is Handle with fn.
func (i *SQLiteInbox) Bind(fn SQLHandlerFunc) *Bound {
	return &Bound{inbox: i, apply: func(ctx context.Context, consumer string, msg Message) (Result, error) {
		return i.Handle(ctx, consumer, msg, fn)
	}}
}
