// Package storetest is the conformance suite of remote.Store: one set of
// tests that every store (backing/s3 against versitygw, backing/httpsrc
// against a loopback server, backing/hf against hftest's Hub, backing/oci
// against docker-registry) runs, as gocloud.dev's drivertest and
// rclone's fstests do for their backends, so that what one store is
// held to, all are.
//
// A store's test calls Run with a Harness, which starts the store's
// server holding the objects the suite gives it and says what the store
// can be made to do (Fixture): replace an object under a reader, expire
// its signed URLs, redirect, hold a reply mid-body, refuse a request.
// Each subtest checks one promise of backing/remote's documentation:
//
//   - name: a Source opened by the store's first request is named as the
//     store names the object once open (a revision it resolved).
//   - ranges: Store.Open's head and Store.Get's ranged reads (start,
//     middle, last byte, several buffers filled in order), and a
//     remote.Client's ReadAt at the start, middle and end, across the
//     end, past it and of no bytes, from goroutines at once; an empty
//     object.
//   - size: the size at Open, the Source's, and List's.
//   - validators: every object has an identity, the same at each open;
//     an object replaced after Open (same size or not) is an error of
//     kind Changed at the store, and every later read of its Source
//     fails (cached parts included) with backing.ErrFault: never other
//     or mixed bytes. Opened again, it has another identity and the new
//     bytes, or (a store whose objects are named by their content) is
//     Changed; a warm start from the disk cache never serves the old
//     version's parts.
//   - redirects: reads through redirects; a redirect loop is one line.
//   - expiry: a signed URL that expired is obtained again.
//   - cancel: a GET held mid-body ends when its context is cancelled,
//     with an error wrapping context.Canceled, lets go of its
//     connection and leaves no goroutine in the store's code; so does a
//     Client's read when the Client's Context is.
//   - cut: a reply cut off mid-body (its connection closed), or a 503
//     instead of the reply, is a Transient error (after the buffers it
//     filled), and a Client's read through it is retried to the right
//     bytes.
//   - flow: a Prefetch range read in chunks (one GET read into the
//     reader's successive buffers, which Store.Get takes from its slice
//     only as it reaches each) gives the object's bytes, each buffer's
//     left alone once its read returned, through a reply cut mid-body
//     too.
//   - errors: a missing object is NotFound, a refused one Denied, each
//     one line that names the object once and holds no secret.
//
// A capability a store has no use for (an S3 GET is signed as it is
// sent: nothing expires) is declared with the reason in Fixture.Lacks;
// a capability left nil without one fails the suite: nothing is skipped
// silently.
//
// Each subtest that changes an object (replaces it, redirects it) has
// keys of its own, so that the subtests do not depend on each other's
// order; the store is made once per Run.
package storetest
