"""Webhook verification: the published Standard Webhooks example, tampering, stale
timestamps, rotation — and a real push from the server to a local receiver."""

import json
import unittest

from delayq import Client, WebhookVerificationError, sign, verify_webhook

from _live import SECRET, URL, Local, needs_server, queue, wait_for

EXAMPLE_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
EXAMPLE = {
    "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}
BODY = b'{"test": 2432232314}'
OTHER = "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCE="


class VerifyTest(unittest.TestCase):
    def test_the_published_example(self):
        msg = verify_webhook(EXAMPLE_SECRET, EXAMPLE, BODY, now=1614265330)
        self.assertEqual((msg.id, msg.timestamp), ("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330))
        self.assertEqual(msg.payload, json.loads(BODY))
        self.assertEqual(sign(EXAMPLE_SECRET, EXAMPLE["webhook-id"], 1614265330, BODY),
                         EXAMPLE["webhook-signature"])

    def test_refusals(self):
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(EXAMPLE_SECRET, EXAMPLE, BODY + b" ", now=1614265330)
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(OTHER, EXAMPLE, BODY, now=1614265330)
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(EXAMPLE_SECRET, EXAMPLE, BODY, now=1614265330 + 301)
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(EXAMPLE_SECRET, {"webhook-id": "x"}, BODY)

    def test_rotation_and_header_case(self):
        headers = {k.upper(): v for k, v in EXAMPLE.items()}
        headers["WEBHOOK-SIGNATURE"] = "v1,bm9wZQ== " + EXAMPLE["webhook-signature"]
        self.assertTrue(verify_webhook([OTHER, EXAMPLE_SECRET], headers, BODY, now=1614265330))


@needs_server
@unittest.skipUnless(SECRET, "DELAYQ_TEST_PUSH_SECRET is not set")
class RealPushTest(unittest.TestCase):
    def test_a_push_from_the_server_verifies(self):
        got = []

        def handle(req, body):
            got.append((dict(req.headers), body))
            return 204, {}, b""

        rx = Local(handle)
        try:
            q = queue("pyhook")
            Client(URL).configure(q, delivery="push")
            Client(URL).enqueue(q, {"invoice": 9}, id="inv-9", delay_ms=100,
                                target={"url": rx.url + "/hook"})
            wait_for(lambda: got)
        finally:
            rx.close()
        headers, body = got[0]
        msg = verify_webhook(SECRET, headers, body)
        self.assertEqual((msg.id, msg.payload), ("inv-9", {"invoice": 9}))
        self.assertEqual(body, b'{"invoice":9}')
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(OTHER, headers, body)
        self.assertEqual(headers.get("delayq-attempt") or headers.get("Delayq-Attempt"), "1")


if __name__ == "__main__":
    unittest.main()
