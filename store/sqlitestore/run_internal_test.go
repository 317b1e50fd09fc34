package sqlitestore

import (
	"slices"
	"testing"
)

// Followers fill the room rank by rank, in the order of the runs, each run
// keeping a prefix of its followers.
func TestFillByRank(t *testing.T) {
	t.Parallel()
	runs := [][]int64{{11, 12, 13}, nil, {31}, {41, 42}}
	for _, tc := range []struct {
		room int
		want []int64
	}{
		{0, nil},
		{1, []int64{11}},
		{3, []int64{11, 31, 41}},
		{4, []int64{11, 31, 41, 12}},
		{5, []int64{11, 31, 41, 12, 42}},
		{6, []int64{11, 31, 41, 12, 42, 13}},
		{100, []int64{11, 31, 41, 12, 42, 13}},
	} {
		if got := fillByRank(runs, tc.room); !slices.Equal(got, tc.want) {
			t.Errorf("room %d: %v; want %v", tc.room, got, tc.want)
		}
	}
	if got := fillByRank(nil, 5); len(got) != 0 {
		t.Errorf("no runs: %v; want none", got)
	}
}
