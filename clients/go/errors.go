package delayq

import (
	"errors"
	"fmt"
)

// Error is every failure of a call: the API's error code (see docs/API.md) or one of the
// client's own ("connection_failed", "timeout", "invalid_signature", "bad_answer"), the HTTP
// status (0 when no answer came) and the server's message. Reach it with errors.As.
type Error struct {
	Code    string
	Status  int
	Message string
	// State is, for a job found in another state than the action needs, that state.
	State string
	// RetryAfter is the seconds the server asked to wait (Retry-After), or 0.
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("delayq: %s (%d): %s", e.Code, e.Status, e.Message)
	}
	return fmt.Sprintf("delayq: %s: %s", e.Code, e.Message)
}

// Retryable tells whether the same request may succeed when sent again: no answer came, or
// the server was unavailable, full or over a budget.
func (e *Error) Retryable() bool {
	switch {
	case e.Status == 0 && (e.Code == "connection_failed" || e.Code == "timeout"):
		return true
	case e.Status == 503 || e.Status == 507 || e.Status == 429:
		return true
	}
	return false
}

// ErrNotFound is returned by Get when there is no such job (errors.Is also matches an *Error
// with the code "not_found").
var ErrNotFound = errors.New("delayq: not found")

// Is makes errors.Is(err, ErrNotFound) true for a not_found answer.
func (e *Error) Is(target error) bool {
	return target == ErrNotFound && e.Code == "not_found"
}

// CodeOf is the API code of err, or "" when it is not a delayq *Error.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
