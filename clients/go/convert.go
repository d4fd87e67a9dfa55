package delayq

// The thin idiomatic layer: the generated wire types (internal/wire, from the server's
// OpenAPI document) to and from the client's own (time.Time, time.Duration, typed payloads).
// Every JSON shape comes from internal/wire, so a change to the API fails the build here until
// this layer follows.

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/delayq/delayq/clients/go/internal/wire"
)

// ptr is a pointer to v (an optional wire field).
func ptr[T any](v T) *T { return &v }

// val is *p, or T's zero value when p is nil.
func val[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// nonZero is a pointer to v, or nil when v is T's zero value (a field left out).
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func ms(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.UnixMilli(*v)
}

// payloadFields is a payload as the API takes it: []byte as payload_b64, json.RawMessage as
// it is, anything else marshaled to JSON.
func payloadFields(payload any) (json.RawMessage, *string, error) {
	switch p := payload.(type) {
	case []byte:
		return nil, ptr(base64.StdEncoding.EncodeToString(p)), nil
	case json.RawMessage:
		return p, nil, nil
	default:
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, nil, &Error{Code: "invalid_payload", Message: err.Error()}
		}
		return raw, nil, nil
	}
}

// jobOf is a job out of the facts both a read and a claim answer.
func jobOf(id string, f wire.JobFacts, c wire.Carried, payload json.RawMessage, payloadB64 *string) *Job {
	j := &Job{
		ID: id, Payload: payload, Attempt: f.Attempt, MaxAttempts: f.MaxAttempts,
		DueAt: time.UnixMilli(f.DueAt), CreatedAt: time.UnixMilli(f.CreatedAt), LastError: val(f.LastError),
		Priority: f.Priority, Traceparent: val(c.Traceparent), Tracestate: val(c.Tracestate), Key: val(f.Key),
	}
	if f.TimeoutMs != nil {
		j.Timeout = time.Duration(*f.TimeoutMs) * time.Millisecond
	}
	if payloadB64 != nil {
		j.Bytes, _ = base64.StdEncoding.DecodeString(*payloadB64)
		j.Payload = nil
	}
	return j
}

// jobFromView is a stored job (Get, the listings).
func jobFromView(w wire.JobView) *Job {
	j := jobOf(w.ID, w.JobFacts, w.Carried, w.Payload, w.PayloadB64)
	j.State = string(w.State)
	j.LeaseDeadline, j.FailedAt = ms(w.LeaseDeadline), ms(w.FailedAt)
	if len(w.Result) > 0 && string(w.Result) != "null" {
		j.Result = w.Result
	}
	if w.ResultB64 != nil {
		j.ResultBytes, _ = base64.StdEncoding.DecodeString(*w.ResultB64)
	}
	j.Dependencies = dependenciesOf(w.Dependencies)
	j.Tier = val(w.Tier)
	return j
}

// jobFromClaim is a leased job; queue names its queue when the answer does not.
func jobFromClaim(w wire.ClaimedJob, queue string) *Job {
	j := jobOf(w.ID, w.JobFacts, w.Carried, w.Payload, w.PayloadB64)
	j.State = "leased"
	j.LeaseToken, j.LeaseDeadline = w.LeaseToken, time.UnixMilli(w.LeaseDeadline)
	j.Queue = val(w.Queue)
	if queue != "" {
		j.Queue = queue
	}
	j.Dependencies = dependenciesOf(w.Dependencies)
	return j
}

// resultFields is how a result goes out: JSON as result, []byte as result_b64.
func resultFields(result any) (json.RawMessage, string, error) {
	switch r := result.(type) {
	case nil:
		return nil, "", nil
	case []byte:
		return nil, base64.StdEncoding.EncodeToString(r), nil
	case json.RawMessage:
		return r, "", nil
	default:
		raw, err := json.Marshal(r)
		return raw, "", err
	}
}

func (a Ack) wire() wire.ClaimAck {
	return wire.ClaimAck{ID: a.ID, LeaseToken: a.LeaseToken, Result: a.Result, ResultB64: nonZero(a.ResultB64)}
}

func (a QueueAck) wire() wire.QueueAck {
	return wire.QueueAck{Queue: a.Queue, ID: a.ID, LeaseToken: a.LeaseToken, Result: a.Result, ResultB64: nonZero(a.ResultB64)}
}

func enqueuedOf(w wire.EnqueueResponse) Enqueued {
	return Enqueued{ID: w.ID, DueAt: time.UnixMilli(w.DueAt), Created: w.Created, Replaced: w.Replaced}
}

func (t Target) wire() *wire.TargetView {
	return &wire.TargetView{URL: t.URL, Method: nonZero(t.Method), Headers: t.Headers}
}

func (cb *BatchCallback) wire() *wire.CallbackBody {
	if cb == nil {
		return nil
	}
	p := cb.Payload
	if p == nil {
		p = map[string]any{}
	}
	return &wire.CallbackBody{Queue: cb.Queue, Payload: p, DelayMs: nonZero(cb.DelayMs)}
}

func batchOf(w wire.BatchView) Batch {
	b := Batch{
		ID: w.ID, Queue: w.Queue, State: string(w.State), Total: w.Total, Pending: w.Pending,
		Succeeded: w.Succeeded, Dead: w.Dead, Cancelled: w.Cancelled, CreatedAtMs: w.CreatedAtMs,
		DoneAtMs: w.DoneAtMs, CallbackError: w.CallbackError, CallbackNextTryAtMs: w.CallbackNextTryAtMs,
	}
	if w.CallbackAttempts != nil {
		b.CallbackAttempts = ptr(int64(*w.CallbackAttempts))
	}
	return b
}

func statsOf(w wire.QueueView) Stats {
	return Stats{
		Queue: w.Queue, Scheduled: w.Scheduled, Due: w.Due, DueNextMinute: w.DueNextMinute,
		Leased: w.Leased, Dead: w.Dead, OldestOverdueMs: w.OldestOverdueMs, Paused: w.Paused,
		WaitingOnLimit: w.WaitingOnLimit, Done: w.Done, Settings: w.Settings,
	}
}

func keyHoldOf(w wire.KeyHoldView) KeyHold {
	return KeyHold{Queue: w.Queue, Key: w.Key, PausedUntil: w.PausedUntil}
}

func keyStatsOf(w wire.KeyView) KeyStats {
	return KeyStats{Key: w.Key, InFlight: w.InFlight, Due: w.Due, PausedUntil: w.PausedUntil}
}

func scheduleOf(w wire.ScheduleView) Schedule {
	return Schedule{
		Name: w.Name, Cron: val(w.Cron), TZ: val(w.Tz), EveryMs: val(w.EveryMs), CatchUp: w.CatchUp,
		NextFire: w.NextFire, Payload: w.Payload,
	}
}
