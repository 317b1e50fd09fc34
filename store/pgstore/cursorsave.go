package pgstore

// cursorSaveArgs is what a save writes (queries/cursor_save.sql): the
// position, and the head and unhandled ranges (head nil: too many ranges,
// keep what was saved).
type cursorSaveArgs struct {
	pos     int64
	head    *int64
	lo, hi  []int64
	handled uint64 // the window's handled count then
}

// saveArgs returns what a save of the window writes now.
func (w *cursorWindow) saveArgs() cursorSaveArgs {
	a := cursorSaveArgs{pos: w.pos, handled: w.handled}
	if head, lo, hi, ok := w.unhandled(maxSavedRanges); ok {
		a.head, a.lo, a.hi = &head, lo, hi
	}
	return a
}
