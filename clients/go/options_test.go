package delayq

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// Every documented enqueue field has a typed option, written in the API's wire shape.
func TestTypedEnqueueOptionsWriteTheWireFields(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000)
	var b enqueueBody
	for _, o := range []EnqueueOption{
		WithBackoff(ExponentialBackoff(time.Second, time.Minute)),
		WithLeaseLength(45 * time.Second),
		WithTarget(Target{URL: "https://example.com/hook", Headers: map[string]string{"x-tenant": "acme"}}),
		WithExpiresAt(at),
		WithKeepDone(time.Hour),
		WithDedupe(10 * time.Minute),
	} {
		o(&b)
	}
	got := sorted(t, b)
	want := `{"backoff":{"base_ms":1000,"cap_ms":60000,"kind":"exponential"},"dedupe_ms":600000,` +
		`"expires_at":1800000000000,"keep_done_ms":3600000,"lease_ms":45000,` +
		`"target":{"headers":{"x-tenant":"acme"},"url":"https://example.com/hook"}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var f enqueueBody
	WithBackoff(FixedBackoff(2 * time.Second))(&f)
	WithExpireAfter(time.Minute)(&f)
	got = sorted(t, f)
	if string(got) != `{"backoff":{"delay_ms":2000,"kind":"fixed"},"expire_after_ms":60000}` {
		t.Errorf("got %s", got)
	}
}

// The server takes every typed option (a field it did not know would refuse the enqueue).
func TestTheServerTakesTheTypedOptions(t *testing.T) {
	c := NewClient(liveURL(t))
	ctx := context.Background()
	e, err := c.Enqueue(ctx, "go-typed-options", map[string]any{"order": 1},
		WithID("typed-1"), WithDelay(time.Hour),
		WithBackoff(JitteredBackoff(time.Second, time.Minute)), WithLeaseLength(time.Minute),
		WithExpireAfter(time.Hour), WithKeepDone(time.Hour), WithDedupe(time.Minute))
	if err != nil || !e.Created {
		t.Fatalf("enqueue with every typed option: %+v, %v", e, err)
	}
	_, err = c.Enqueue(ctx, "go-typed-options", 1, WithID("typed-2"),
		WithExpiresAt(time.Now().Add(time.Hour)), WithBackoff(FixedBackoff(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
}

// sorted is b's wire JSON with its keys in order.
func sorted(t *testing.T, b enqueueBody) string {
	raw, err := json.Marshal(b.EnqueueRequest)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// WithField sets a typed field by its wire name, and refuses a name the API does not have.
func TestWithFieldSetsTheTypedFieldOrFails(t *testing.T) {
	b, err := jobBody(1, []EnqueueOption{WithField("delay_ms", 1500), WithField("key", "acme")})
	if err != nil || b.DelayMs == nil || *b.DelayMs != 1500 || b.Key == nil || *b.Key != "acme" {
		t.Fatalf("%+v %v", b, err)
	}
	_, err = jobBody(1, []EnqueueOption{WithField("delay_msec", 1500)})
	if CodeOf(err) != "invalid_argument" {
		t.Fatalf("an unknown field: %v", err)
	}
}

// A settings patch leaves out what it keeps, sends a value it sets and null for a removed limit.
func TestASettingsPatchKeepsSetsAndClears(t *testing.T) {
	got, err := json.Marshal(SettingsPatch{MaxInFlight: Set(100), Rate: Clear[Rate]()})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"max_in_flight":100,"rate":null}` {
		t.Errorf("got %s", got)
	}
}
