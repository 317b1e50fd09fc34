package relay_test

import (
	"context"
	"strings"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
)

type nopQueue struct{}

func (nopQueue) Claim(context.Context, store.ClaimParams) (store.Claim, error) {
	return store.Claim{}, nil
}
func (nopQueue) MarkSent(context.Context, uuid.UUID, []int64) (int64, error) { return 0, nil }
func (nopQueue) MarkFailed(context.Context, uuid.UUID, []store.Failure) (int64, error) {
	return 0, nil
}
func (nopQueue) Release(context.Context, uuid.UUID, []int64) (int64, error) { return 0, nil }

func containsWord(s, w string) bool { return strings.Contains(s, w) }
