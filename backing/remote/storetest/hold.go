package storetest

import (
	"context"
	"errors"
	"net/http"
	"sync"
)

// Holder holds a reply in the middle of its body, for tests of
// cancellation: a store's test server (or a proxy in front of it) serves
// through Wrap, and Arm makes the next 206 reply send its headers and
// its first n body bytes, then wait until the client goes away. Nothing
// is timed: the reply waits for its request's context, which ends only
// when the client closes the connection (or the server stops). Cut
// instead stops the reply there, closing its connection; Answer
// replaces the next ranged GET's reply by an error status.
type Holder struct {
	mu    sync.Mutex
	armed *hold // GUARDED_BY(mu): the hold the next 206 reply takes
}

type hold struct {
	n          int64
	cut        bool // close the connection after n bytes rather than wait
	status     int  // answer this status instead of the reply, when not 0
	held, gone chan struct{}
}

// Arm makes the next 206 reply that passes through Wrap hold after n
// body bytes: held is closed once they are sent (flushed), gone once the
// client went away (the request's context ended). A reply shorter than
// n bytes is sent whole, and the hold stays armed for the next one.
func (h *Holder) Arm(n int64) (held, gone <-chan struct{}) {
	ho := &hold{n: n, held: make(chan struct{}), gone: make(chan struct{})}
	h.mu.Lock()
	h.armed = ho
	h.mu.Unlock()
	return ho.held, ho.gone
}

// Cut makes the next 206 reply that passes through Wrap stop after n
// body bytes, its connection closed (as a reset connection or a server
// that dies mid-reply): held is closed once the bytes are sent and the
// connection closed.
func (h *Holder) Cut(n int64) (held <-chan struct{}) {
	ho := &hold{n: n, cut: true, held: make(chan struct{}), gone: make(chan struct{})}
	h.mu.Lock()
	h.armed = ho
	h.mu.Unlock()
	return ho.held
}

// Answer makes the next ranged GET that passes through Wrap be
// answered status (503: a store that is overloaded) with a short text
// body, instead of the server's reply: answered is closed once it is.
func (h *Holder) Answer(status int) (answered <-chan struct{}) {
	ho := &hold{status: status, held: make(chan struct{}), gone: make(chan struct{})}
	h.mu.Lock()
	h.armed = ho
	h.mu.Unlock()
	return ho.held
}

// take returns the armed hold and disarms it, or nil.
func (h *Holder) take() *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	ho := h.armed
	h.armed = nil
	return ho
}

// putBack arms ho again when nothing else was armed since.
func (h *Holder) putBack(ho *hold) {
	h.mu.Lock()
	if h.armed == nil {
		h.armed = ho
	}
	h.mu.Unlock()
}

// Wrap serves next through the Holder.
func (h *Holder) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.Header.Get("Range") == "" {
			next.ServeHTTP(w, r)
			return
		}
		h.mu.Lock()
		ho := h.armed
		if ho != nil && ho.status != 0 {
			h.armed = nil
		}
		h.mu.Unlock()
		if ho != nil && ho.status != 0 {
			http.Error(w, http.StatusText(ho.status), ho.status)
			close(ho.held)
			return
		}
		hw := &holdWriter{ResponseWriter: w, h: h, ctx: r.Context()}
		next.ServeHTTP(hw, r)
		if hw.ho != nil && !hw.done {
			h.putBack(hw.ho) // the body was shorter than n
		}
	})
}

// errHeld is what the handler's writes get once its client went away.
var errHeld = errors.New("storetest: the client went away while the reply was held")

// holdWriter passes a reply through, holding a 206 one after n bytes
// when the Holder is armed.
type holdWriter struct {
	http.ResponseWriter
	h    *Holder
	ctx  context.Context
	ho   *hold // the hold taken by this reply, nil when none
	sent int64
	done bool // held and released
}

func (w *holdWriter) WriteHeader(status int) {
	if status == http.StatusPartialContent && w.ho == nil {
		w.ho = w.h.take()
		if w.ho != nil && w.ho.status != 0 { // armed since the request came
			w.h.putBack(w.ho)
			w.ho = nil
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *holdWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errHeld
	}
	if w.ho == nil {
		return w.ResponseWriter.Write(p)
	}
	room := w.ho.n - w.sent
	if int64(len(p)) < room {
		n, err := w.ResponseWriter.Write(p)
		w.sent += int64(n)
		return n, err
	}
	n, _ := w.ResponseWriter.Write(p[:room])
	w.sent += int64(n)
	http.NewResponseController(w.ResponseWriter).Flush()
	if w.ho.cut {
		w.done = true
		defer close(w.ho.held)
		// The server closes the connection without ending the reply.
		panic(http.ErrAbortHandler)
	}
	close(w.ho.held)
	<-w.ctx.Done()
	close(w.ho.gone)
	w.done = true
	return n, errHeld
}

// Flush passes a flush on.
func (w *holdWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap is for http.ResponseController.
func (w *holdWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
