package ops

import "time"

// QueriesForExplain exposes the rendered statements, with sample
// arguments, to the plan test.
func (o *Ops) QueriesForExplain() map[string]struct {
	SQL  string
	Args []any
} {
	type q = struct {
		SQL  string
		Args []any
	}
	return map[string]q{
		"stats_counts":      {o.q.statsCounts, nil},
		"stats_discarded":   {o.q.statsDiscarded, nil},
		"stats_head":        {o.q.statsHead, nil},
		"stats_blocked":     {o.q.statsBlocked, []any{10}},
		"stats_failing":     {o.q.statsFailing, []any{10}},
		"dlq_list":          {o.q.dlqList, []any{"", "", "", sinceOrMin(zeroTime), int64(0), nil}},
		"cleanup_sent":      {o.q.cleanupSent, []any{nowMinus30d(), sinceOrMin(zeroTime), 5000}},
		"cleanup_discarded": {o.q.cleanupDiscarded, []any{nowMinus30d(), sinceOrMin(zeroTime), 5000}},
		"republish_batch":   {o.q.republishBatch, []any{int64(100), int64(200), sinceOrMin(zeroTime), "", "", 100}},
	}
}

var zeroTime time.Time

func nowMinus30d() time.Time { return time.Now().Add(-30 * 24 * time.Hour) }
