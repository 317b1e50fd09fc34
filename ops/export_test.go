package ops

import (
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store/pgstore"
)

// QueriesForExplain exposes the rendered statements, with sample
// arguments, to the plan test; position is the cursor's.
func (o *Ops) QueriesForExplain(position int64) map[string]struct {
	SQL  string
	Args []any
} {
	type q = struct {
		SQL  string
		Args []any
	}
	return map[string]q{
		"stats_counts":               {o.q.statsCounts, nil},
		"stats_head":                 {o.q.statsHead, nil},
		"stats_blocked":              {o.q.statsBlocked, []any{10}},
		"stats_failing":              {o.q.statsFailing, []any{10}},
		"dlq_list":                   {o.q.dlqList, Filter{}.args(0)},
		"dlq_list_group":             {o.q.dlqList, Filter{Group: "0123456789abcdef", Limit: 500}.args(1 << 40)},
		"dlq_groups":                 {o.q.dlqGroups, Filter{}.args(0)},
		"dlq_batch_bounds":           {o.q.dlqBatchBounds, append(Filter{Group: "0123456789abcdef"}.args(1<<40), int64(500))},
		"cleanup_sent":               {o.q.cleanupSent, []any{nowMinus30d(), sinceOrMin(zeroTime), 5000}},
		"cleanup_discarded":          {o.q.cleanupDiscarded, []any{nowMinus30d(), sinceOrMin(zeroTime), 5000}},
		"republish_batch":            {o.q.republishBatch, []any{int64(100), int64(200), sinceOrMin(zeroTime), "", "", 100}},
		"stats_cursor":               {o.q.statsCursor, nil},
		"stats_cursor_sent_estimate": {o.q.statsCursorSentEstimate, []any{o.Schema()}},
		"stats_cursor_lag":           {o.q.statsCursorLag, nil},
		"stats_cursor_passed":        {o.q.statsCursorPassed, []any{position - 1000, position}},
		"cleanup_queued":             {o.q.cleanupQueued, []any{nowMinus30d(), int64(0), 5000}},
		"select_by_ids":              {o.q.selectByIDs, []any{[]uuid.UUID{uuid.New()}}},
		"show_extra":                 {o.q.dlqExtra, []any{int64(1)}},
		"show_by_seq":                {o.q.dlqSeq, []any{int64(1)}},
		"batch_max_seq":              {o.q.dlqMaxSeq, nil},
	}
}

// PartitionCheckForExplain exposes partition_check.sql for p, with its
// arguments, to the plan test.
func (o *Ops) PartitionCheckForExplain(p pgstore.Partition) (string, []any) {
	return o.partitionCheckQuery(p)
}

var zeroTime time.Time

func nowMinus30d() time.Time { return time.Now().Add(-30 * 24 * time.Hour) }

// AgeCursorSamples makes the cursor samples of earlier Stats calls d older,
// as if those calls had been made d earlier, so that a test need not wait a
// minute for Stats.CursorSentLastMinute.
func (o *Ops) AgeCursorSamples(d time.Duration) {
	cs := &o.cursorSamples
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for i := range cs.samples {
		cs.samples[i].at = cs.samples[i].at.Add(-d)
		cs.samples[i].local = cs.samples[i].local.Add(-d)
	}
}
