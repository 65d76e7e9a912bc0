package fence

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// Headers the middleware reads.
const (
	TokenHeader  = "Fencing-Token"
	HolderHeader = "Fencing-Holder" // optional
)

// Middleware fences an HTTP handler: every request must carry a
// Fencing-Token header (and may carry Fencing-Holder); resource names what
// it touches. A request with a stale token gets 409 Conflict and a JSON body,
// and never reaches next; a missing or malformed token, or one above what
// f can store (ErrTokenRange), gets 400; a reused token 409 as well. The
// body's "code" says which:
//
//	{"code":"stale","error":"stale fencing token","resource":"orders/42","token":7,"highest":9}
//
// If f is a ReadFence (Memory, Redis), a GET or HEAD is admitted as a read
// (AdmitRead: a reader's fenced read under a read-write lock, which raises
// the read mark and needs only the write mark), and every other method as
// a write (Admit). With any other fence every request is admitted as a
// write.
//
// If f is a *Memory, next runs inside Memory.Do (or DoRead), so admission and handler
// are one atomic step for that resource within this process. With any
// other fence, admission comes first and the handler after: fence the write
// itself too (Redis.Set, a transaction) if requests can overtake each other.
func Middleware(f Fence, resource func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.Header.Get(TokenHeader)
		token, err := strconv.ParseUint(raw, 10, 64)
		if raw == "" || err != nil {
			writeJSON(w, http.StatusBadRequest, problem{Code: "bad_token", Error: "missing or malformed " + TokenHeader + " header"})
			return
		}
		res := resource(r)
		holder := r.Header.Get(HolderHeader)
		serve := func() error { next.ServeHTTP(w, r); return nil }
		rf, reads := f.(ReadFence)
		reads = reads && (r.Method == http.MethodGet || r.Method == http.MethodHead)
		m, inProcess := f.(*Memory)
		switch {
		case inProcess && reads:
			err = m.DoRead(r.Context(), res, token, holder, serve)
		case inProcess:
			err = m.Do(r.Context(), res, token, holder, serve)
		case reads:
			if err = rf.AdmitRead(r.Context(), res, token, holder); err == nil {
				err = serve()
			}
		default:
			if err = f.Admit(r.Context(), res, token, holder); err == nil {
				err = serve()
			}
		}
		var stale *StaleTokenError
		var reused *ReusedTokenError
		switch {
		case err == nil:
		case errors.As(err, &stale):
			writeJSON(w, http.StatusConflict, problem{Code: "stale", Error: "stale fencing token", Resource: res,
				Token: stale.Token, Highest: stale.Highest})
		case errors.As(err, &reused):
			writeJSON(w, http.StatusConflict, problem{Code: "reused", Error: "fencing token reused by another holder", Resource: res,
				Token: reused.Token})
		case errors.Is(err, ErrZeroToken):
			writeJSON(w, http.StatusBadRequest, problem{Code: "zero_token", Error: err.Error(), Resource: res})
		case errors.Is(err, ErrTokenRange):
			writeJSON(w, http.StatusBadRequest, problem{Code: "token_range", Error: err.Error(), Resource: res, Token: token})
		case errors.Is(err, ErrEmptyResource):
			writeJSON(w, http.StatusBadRequest, problem{Code: "empty_resource", Error: err.Error(), Token: token})
		default:
			writeJSON(w, http.StatusServiceUnavailable, problem{Code: "unavailable", Error: err.Error(), Resource: res, Token: token})
		}
	})
}

// problem is the JSON body of a refused request. Code is one of bad_token,
// stale, reused, zero_token, token_range, empty_resource, unavailable.
type problem struct {
	Code     string `json:"code"`
	Error    string `json:"error"`
	Resource string `json:"resource,omitempty"`
	Token    uint64 `json:"token,omitempty"`
	Highest  uint64 `json:"highest,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, body problem) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
