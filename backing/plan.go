package backing

// Range is Len bytes of a source at Off.
type Range struct{ Off, Len int64 }

// Planner is implemented by a source that fetches ahead on request (a
// remote one, backing/remote.Source): a reader about to read ranges
// whole, one after another in the order given, each from its start in
// reads of chunk bytes (the last read of a range shorter), says so, and
// the source may serve all of those reads with one request. ranges are
// in increasing order and do not overlap. The reads that follow may
// differ from the plan (a reader that jumps): they are served as any
// read, the plan only ever saves requests. A source that does not
// implement Planner serves every read on its own.
//
// PlanLimit is how many plans it serves at once with a request each
// (remote: its flows): a reader that reads with more workers cuts its
// ranges into at most that many plans, the plans beyond it being read
// a request per read.
type Planner interface {
	PrefetchPlan(ranges []Range, chunk int64)
	PlanLimit() int
}
