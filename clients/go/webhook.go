package delayq

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WebhookTolerance is how far a push request's timestamp may be from now.
const WebhookTolerance = 5 * time.Minute

func webhookKey(secret string) ([]byte, error) {
	if !strings.HasPrefix(secret, "whsec_") {
		return nil, &Error{Code: "invalid_signature", Message: "a secret looks like whsec_<base64>"}
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return nil, &Error{Code: "invalid_signature", Message: "the secret is not base64: " + err.Error()}
	}
	return k, nil
}

// SignWebhook is the webhook-signature value one secret gives (what the pusher sends).
func SignWebhook(secret, id string, timestamp int64, body []byte) (string, error) {
	k, err := webhookKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, k)
	fmt.Fprintf(mac, "%s.%d.", id, timestamp)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// WebhookMessage is a push request whose signature checked out.
type WebhookMessage struct {
	// ID is its webhook-id: the job id, the same on every retry — the key to deduplicate on.
	ID string
	// Timestamp is when it was signed (webhook-timestamp).
	Timestamp time.Time
	// Payload is the body as received (the job's payload).
	Payload json.RawMessage
}

// VerifyWebhook checks a request delayq serve --push sent (Standard Webhooks): secrets
// (whsec_…; several during a rotation), its headers and its raw body. It answers the verified
// message (id, timestamp, payload); otherwise an *Error with the code "invalid_signature".
func VerifyWebhook(secrets []string, header http.Header, body []byte) (*WebhookMessage, error) {
	return VerifyWebhookAt(secrets, header, body, time.Now())
}

// VerifyWebhookAt is VerifyWebhook at the time now.
func VerifyWebhookAt(secrets []string, header http.Header, body []byte, now time.Time) (*WebhookMessage, error) {
	bad := func(m string) (*WebhookMessage, error) {
		return nil, &Error{Code: "invalid_signature", Message: m}
	}
	id, ts, sigs := header.Get("webhook-id"), header.Get("webhook-timestamp"), header.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return bad("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	t, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return bad("webhook-timestamp is not a number")
	}
	d := now.Unix() - t
	if d < 0 {
		d = -d
	}
	if d > int64(WebhookTolerance/time.Second) {
		return bad("webhook-timestamp is too old or in the future")
	}
	for _, s := range secrets {
		want, err := SignWebhook(s, id, t, body)
		if err != nil {
			return nil, err
		}
		for _, given := range strings.Fields(sigs) {
			if hmac.Equal([]byte(given), []byte(want)) {
				msg := &WebhookMessage{ID: id, Timestamp: time.Unix(t, 0), Payload: append(json.RawMessage(nil), body...)}
				return msg, nil
			}
		}
	}
	return bad("no signature matches")
}
