//! [`RemoteBackend`]: the `Backend` and `Inspect` traits over a running `delayq serve`'s HTTP
//! API, so that every CLI command works against a store that server owns (the embedded
//! store is locked by one process) or against `--server URL`.
//!
//! Plain HTTP/1.1 (one connection per request, via hyper, already in the tree through axum);
//! a claim is a long poll of up to [`LONG_POLL`], which is how a remote consumer is woken.

use std::time::Duration;

use base64::Engine;
use delayq::{
    AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Counts, Cursor, Due, Enqueued,
    Error, Found, Inspect, InvalidInput, Job, JobId, JobInfo, JobPage, JobState, LeaseRef,
    ListState, Nack, NackOutcome, NewJob, QueueName, QueueSeries, QueueSettings, QueueStats,
    Result, Wakeups,
};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tokio::sync::watch;

mod polls;
mod schedules;

/// How long a claim waits on the server for a due job before it answers empty.
const LONG_POLL: Duration = Duration::from_secs(5);
/// How long one request may take (a long poll plus a margin).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// A `delayq serve` reached over HTTP.
#[derive(Clone)]
pub(crate) struct RemoteBackend {
    /// `host:port`.
    authority: String,
    /// `Bearer` token, when the server needs one.
    token: Option<String>,
    /// Never bumped: the long poll of each claim is the wake-up.
    wake: std::sync::Arc<watch::Sender<u64>>,
    /// Set by [`RemoteBackend::close`] at a worker's shutdown.
    closing: std::sync::Arc<polls::Closing>,
}

/// A reply: status, JSON body, and the raw bytes (for payloads, which must come out exactly).
struct Reply {
    status: u16,
    body: Value,
    raw: Bytes,
}

/// A job object's payload, kept as the server sent it.
#[derive(serde::Deserialize)]
struct RawPayload<'a> {
    #[serde(borrow, default)]
    payload: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    payload_b64: Option<String>,
}

impl RawPayload<'_> {
    fn bytes(&self) -> Result<Vec<u8>> {
        if let Some(b) = &self.payload_b64 {
            return base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|_| shape("payload_b64"));
        }
        Ok(self
            .payload
            .map(|p| p.get().as_bytes().to_vec())
            .unwrap_or_default())
    }
}

/// The payloads of the job objects in `raw`: one object, an array, or `{"jobs": [...]}`.
fn payloads(raw: &[u8]) -> Result<Vec<Vec<u8>>> {
    #[derive(serde::Deserialize)]
    struct Jobs<'a> {
        #[serde(borrow)]
        jobs: Vec<RawPayload<'a>>,
    }
    let list: Vec<RawPayload<'_>> = if let Ok(j) = serde_json::from_slice::<Jobs<'_>>(raw) {
        j.jobs
    } else if let Ok(v) = serde_json::from_slice::<Vec<RawPayload<'_>>>(raw) {
        v
    } else {
        vec![serde_json::from_slice::<RawPayload<'_>>(raw).map_err(|_| shape("a job"))?]
    };
    list.iter().map(RawPayload::bytes).collect()
}

impl RemoteBackend {
    /// A client of the server at `url` (`http://host:port`).
    pub(crate) fn new(url: &str, token: Option<String>) -> anyhow::Result<Self> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            anyhow::anyhow!(
                "server URL {url:?}: expected http://HOST:PORT (https is not supported)"
            )
        })?;
        let authority = rest.trim_end_matches('/').to_owned();
        if authority.is_empty() || authority.contains('/') {
            anyhow::bail!("server URL {url:?}: expected http://HOST:PORT");
        }
        Ok(Self {
            authority,
            token,
            wake: std::sync::Arc::new(watch::channel(0).0),
            closing: std::sync::Arc::default(),
        })
    }

    /// `http://host:port`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.authority)
    }

    async fn request(&self, method: &str, path: &str, body: Option<Value>) -> Result<Reply> {
        let unavailable =
            |e: String| Error::Unavailable(format!("delayq server {}: {e}", self.url()));
        let fut = async {
            let stream = tokio::net::TcpStream::connect(&self.authority)
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            let io = hyper_util::rt::TokioIo::new(stream);
            let (mut send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            tokio::spawn(conn);
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", &self.authority);
            if let Some(t) = &self.token {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            let bytes = match &body {
                Some(b) => {
                    req = req.header("content-type", "application/json");
                    Bytes::from(b.to_string())
                }
                None => Bytes::new(),
            };
            let req = req
                .body(Full::new(bytes))
                .map_err(|e| unavailable(e.to_string()))?;
            let resp = send
                .send_request(req)
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            let status = resp.status().as_u16();
            let data = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| unavailable(e.to_string()))?
                .to_bytes();
            let body = serde_json::from_slice(&data).unwrap_or(Value::Null);
            Ok(Reply {
                status,
                body,
                raw: data,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .map_err(|_| unavailable("timed out".into()))?
    }

    /// The reply as `Ok` for 2xx, else the API error mapped back to a [`delayq::Error`].
    async fn ok(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        id: Option<&JobId>,
    ) -> Result<Value> {
        self.ok_reply(method, path, body, id).await.map(|r| r.body)
    }

    async fn ok_reply(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        id: Option<&JobId>,
    ) -> Result<Reply> {
        let r = self.request(method, path, body).await?;
        if (200..300).contains(&r.status) {
            return Ok(r);
        }
        Err(api_error(&r, id))
    }
}

/// An API error (`{code, message}`) as the core error it came from.
fn api_error(r: &Reply, id: Option<&JobId>) -> Error {
    let code = r.body["code"].as_str().unwrap_or("");
    let msg = r.body["message"].as_str().unwrap_or("").to_owned();
    let job = || {
        id.cloned()
            .unwrap_or_else(|| JobId::new("?").expect("valid"))
    };
    match (r.status, code) {
        (_, "lease_lost") => Error::LeaseLost { id: job() },
        (404, "not_found") => Error::NotFound { id: job() },
        (_, "job_leased") => wrong(job(), JobState::Leased),
        (_, "job_dead") => wrong(job(), JobState::Dead),
        (_, "job_not_dead") => Error::WrongState {
            id: job(),
            state: match r.body["state"].as_str() {
                Some("leased") => JobState::Leased,
                _ => JobState::Scheduled,
            },
            expected: JobState::Dead,
        },
        (403, _) => Error::Backend(format!(
            "the delayq server refused the request (403): {msg}"
        )),
        (401, _) => Error::Backend(
            "the delayq server refused the request (401): pass its token with --server-token \
             (or DELAYQ_SERVER_TOKEN)"
                .into(),
        ),
        (_, "conflict") => Error::Conflict(strip(&msg, "conflict: ")),
        (_, "invalid_settings") => {
            InvalidInput::Settings(strip(&msg, "invalid queue settings: ")).into()
        }
        (400..=499, _) => InvalidInput::Payload(format!("{code}: {msg}")).into(),
        (503, _) => Error::Unavailable(msg),
        _ => Error::Backend(format!("HTTP {}: {code}: {msg}", r.status)),
    }
}

fn wrong(id: JobId, state: JobState) -> Error {
    Error::WrongState {
        id,
        state,
        expected: JobState::Scheduled,
    }
}

fn strip(msg: &str, prefix: &str) -> String {
    msg.strip_prefix(prefix).unwrap_or(msg).to_owned()
}

fn shape(what: &str) -> Error {
    Error::Backend(format!("unexpected answer from the delayq server: {what}"))
}

/// Leases as the `acks` of a claim or an ack batch: `[{id, lease_token}]`.
fn acks_json(leases: &[LeaseRef]) -> Value {
    leases
        .iter()
        .map(|l| json!({"id": l.id.as_str(), "lease_token": l.token}))
        .collect()
}

/// The `acks` of a claim's or an ack batch's answer: one outcome per ack sent, in order
/// (absent when none was sent).
fn ack_outcomes(body: &Value, sent: usize) -> Result<Vec<AckOutcome>> {
    match body.get("acks") {
        None if sent == 0 => Ok(Vec::new()),
        Some(Value::Array(a)) if a.len() == sent => a
            .iter()
            .map(|o| {
                o.as_str()
                    .and_then(AckOutcome::parse)
                    .ok_or_else(|| shape(&format!("ack outcome {o}")))
            })
            .collect(),
        _ => Err(shape("one ack outcome per ack expected")),
    }
}

fn u64_of(v: &Value, k: &str) -> Result<u64> {
    v[k].as_u64().ok_or_else(|| shape(&format!("no {k}")))
}

fn opt_u64(v: &Value, k: &str) -> Option<u64> {
    v[k].as_u64()
}

fn id_of(v: &Value) -> Result<JobId> {
    JobId::new(v["id"].as_str().ok_or_else(|| shape("no id"))?).map_err(Error::from)
}

/// A push target in a reply (`null` or absent: none).
fn target_of(v: &Value) -> Result<Option<delayq::Target>> {
    if v.is_null() {
        return Ok(None);
    }
    serde_json::from_value(v.clone())
        .map(Some)
        .map_err(|e| shape(&format!("target: {e}")))
}

fn info_of(v: &Value, payload: Vec<u8>) -> Result<JobInfo> {
    let state = match v["state"].as_str() {
        Some("scheduled" | "due") => JobState::Scheduled,
        Some("leased") => JobState::Leased,
        Some("dead") => JobState::Dead,
        Some("done") => JobState::Done,
        other => return Err(shape(&format!("state {other:?}"))),
    };
    Ok(JobInfo {
        id: id_of(v)?,
        state,
        attempt: u64_of(v, "attempt")? as u32,
        max_attempts: u64_of(v, "max_attempts")? as u32,
        due_at_ms: u64_of(v, "due_at")?,
        created_at_ms: u64_of(v, "created_at")?,
        lease_deadline_ms: opt_u64(v, "lease_deadline"),
        failed_at_ms: opt_u64(v, "failed_at"),
        completed_at_ms: opt_u64(v, "completed_at"),
        last_error: v["last_error"].as_str().map(str::to_owned),
        timeout_ms: opt_u64(v, "timeout_ms"),
        expires_at_ms: opt_u64(v, "expires_at"),
        priority: v["priority"]
            .as_u64()
            .map_or(delayq::DEFAULT_PRIORITY, |p| p as u8),
        target: target_of(&v["target"])?,
        payload,
    })
}

/// The jobs of a `{"jobs": [...]}` reply, payloads byte for byte.
fn jobs_of(r: &Reply) -> Result<Vec<JobInfo>> {
    let bodies = payloads(&r.raw)?;
    r.body["jobs"]
        .as_array()
        .ok_or_else(|| shape("jobs: an array"))?
        .iter()
        .zip(bodies)
        .map(|(v, p)| info_of(v, p))
        .collect()
}

fn stats_of(v: &Value) -> Result<QueueStats> {
    Ok(QueueStats {
        scheduled: u64_of(v, "scheduled")?,
        due: u64_of(v, "due")?,
        due_next_minute: u64_of(v, "due_next_minute")?,
        leased: u64_of(v, "leased")?,
        dead: u64_of(v, "dead")?,
        oldest_overdue_ms: u64_of(v, "oldest_overdue_ms")?,
        paused: v["paused"].as_bool().unwrap_or(false),
        waiting_on_limit: v["waiting_on_limit"].as_u64().unwrap_or(0),
        done: v["done"].as_u64().unwrap_or(0),
    })
}

fn job_body(j: NewJob) -> Value {
    let mut b = json!({
        "payload_b64": base64::engine::general_purpose::STANDARD.encode(&j.payload),
    });
    if let Some(id) = j.id {
        b["id"] = id.to_string().into();
    }
    match j.due {
        Due::Now => {}
        Due::Delay(d) => b["delay_ms"] = (d.as_millis() as u64).into(),
        Due::At(ms) => b["run_at"] = ms.into(),
    }
    if let Some(m) = j.max_attempts {
        b["max_attempts"] = m.into();
    }
    if let Some(bo) = j.backoff {
        b["backoff"] = serde_json::to_value(bo).unwrap_or(Value::Null);
    }
    if let Some(l) = j.lease {
        b["lease_ms"] = (l.as_millis() as u64).into();
    }
    if let Some(t) = j.timeout {
        b["timeout_ms"] = (t.as_millis() as u64).into();
    }
    if let Some(t) = &j.target {
        b["target"] = serde_json::to_value(t).expect("a target serializes");
    }
    if let Some(p) = j.priority {
        b["priority"] = p.into();
    }
    if let Some(r) = j.retention {
        b["keep_done_ms"] = r.keep_done_ms.into();
        b["dedupe_ms"] = r.dedupe_ms.into();
    }
    if j.on_conflict == delayq::OnConflict::Replace {
        b["on_conflict"] = "replace".into();
    }
    match j.expires {
        Some(delayq::Expiry::At(ms)) => b["expires_at"] = ms.into(),
        Some(delayq::Expiry::AfterDue(d)) => b["expire_after_ms"] = (d.as_millis() as u64).into(),
        None => {}
    }
    b
}

fn q(queue: &QueueName) -> String {
    format!("/v1/queues/{queue}")
}

/// Text (an id) as a path segment or query value: everything but unreserved characters
/// percent-encoded.
fn enc(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn jp(queue: &QueueName, id: &JobId) -> String {
    format!("/v1/queues/{queue}/jobs/{}", enc(id.as_str()))
}

impl Backend for RemoteBackend {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let body = Value::Array(jobs.into_iter().map(job_body).collect());
        let v = self
            .ok("POST", &format!("{}/jobs", q(queue)), Some(body), None)
            .await?;
        v.as_array()
            .ok_or_else(|| shape("enqueue: an array"))?
            .iter()
            .map(|e| {
                Ok(Enqueued {
                    id: id_of(e)?,
                    created: e["created"].as_bool().unwrap_or(false),
                    due_at_ms: u64_of(e, "due_at")?,
                    replaced: e["replaced"].as_bool().unwrap_or(false),
                    existing: match e["state"].as_str() {
                        Some("leased") => Some(JobState::Leased),
                        Some("dead") => Some(JobState::Dead),
                        Some("done") => Some(JobState::Done),
                        _ => None,
                    },
                })
            })
            .collect()
    }

    async fn claim(&self, queue: &QueueName, mut req: ClaimRequest) -> Result<ClaimBatch> {
        if req.max == 0 {
            return Ok(ClaimBatch {
                acks: self.ack(queue, req.acks).await?,
                ..ClaimBatch::default()
            });
        }
        // More acks than a claim carries (1,000): the rest go first, in ack batches.
        let rest = req.acks.split_off(req.acks.len().min(1000));
        let rest = self.ack(queue, rest).await?;
        // The finished jobs' acks travel with the claim: one request, not one per job.
        let sent = req.acks.len();
        let acks = acks_json(&req.acks);
        let (poll_id, wait_ms) = self.closing.start(queue, LONG_POLL.as_millis() as u64);
        let mut body = json!({
            "max": req.max.min(1000),
            "lease_ms": req.lease.as_millis() as u64,
            "wait_ms": wait_ms,
            "acks": acks,
        });
        if let Some(id) = poll_id {
            body["poll_id"] = id.into();
        }
        let r = self
            .ok_reply("POST", &format!("{}/claim", q(queue)), Some(body), None)
            .await;
        self.closing.done();
        let r = r?;
        let acks = ack_outcomes(&r.body, sent)?;
        let acks: Vec<AckOutcome> = acks.into_iter().chain(rest).collect();
        let mut bodies = payloads(&r.raw)?.into_iter();
        let mut jobs = Vec::new();
        for j in r.body["jobs"]
            .as_array()
            .ok_or_else(|| shape("claim: jobs"))?
        {
            let deadline = u64_of(j, "lease_deadline")?;
            jobs.push(Job {
                id: id_of(j)?,
                queue: queue.clone(),
                payload: bodies.next().ok_or_else(|| shape("claim: payloads"))?,
                attempt: u64_of(j, "attempt")? as u32,
                max_attempts: u64_of(j, "max_attempts")? as u32,
                due_at_ms: u64_of(j, "due_at")?,
                created_at_ms: u64_of(j, "created_at")?,
                lease_token: u64_of(j, "lease_token")?,
                lease_deadline_ms: deadline,
                lease: req.lease,
                last_error: j["last_error"].as_str().map(str::to_owned),
                timeout: opt_u64(j, "timeout_ms").map(Duration::from_millis),
                expires_at_ms: opt_u64(j, "expires_at"),
                priority: j["priority"]
                    .as_u64()
                    .map_or(delayq::DEFAULT_PRIORITY, |p| p as u8),
                target: target_of(&j["target"])?,
            });
        }
        // The long poll already waited: claim again at once.
        Ok(ClaimBatch {
            jobs,
            acks,
            next_due_in: Some(Duration::ZERO),
        })
    }

    async fn ack(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<AckOutcome>> {
        // One request per 1,000 acks (the server's limit), answered in order.
        let mut out = Vec::with_capacity(leases.len());
        for chunk in leases.chunks(1000) {
            let body = json!({"acks": acks_json(chunk)});
            let r = self
                .ok_reply("POST", &format!("{}/acks", q(queue)), Some(body), None)
                .await?;
            out.extend(ack_outcomes(&r.body, chunk.len())?);
        }
        Ok(out)
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        let mut body = json!({
            "lease_token": lease.token,
            "error": nack.error,
            "dead": nack.dead,
        });
        if let Some(d) = nack.retry_in {
            body["retry_in_ms"] = (d.as_millis() as u64).into();
        }
        let path = format!("{}/nack", jp(queue, &lease.id));
        let v = self.ok("POST", &path, Some(body), Some(&lease.id)).await?;
        match v["outcome"].as_str() {
            Some("retrying") => Ok(NackOutcome::Retrying {
                due_at_ms: u64_of(&v, "due_at")?,
            }),
            Some("dead") => Ok(NackOutcome::Dead {
                failed_at_ms: opt_u64(&v, "failed_at").unwrap_or_else(delayq::job::system_now_ms),
            }),
            other => Err(shape(&format!("nack outcome {other:?}"))),
        }
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, len: Duration) -> Result<u64> {
        let body = json!({"lease_token": lease.token, "lease_ms": len.as_millis() as u64});
        let path = format!("{}/extend", jp(queue, &lease.id));
        let v = self.ok("POST", &path, Some(body), Some(&lease.id)).await?;
        u64_of(&v, "lease_deadline")
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        for l in leases {
            let body = json!({"lease_token": l.token, "undo_attempt": undo});
            let path = format!("{}/release", jp(queue, &l.id));
            self.request("POST", &path, Some(body)).await?;
        }
        Ok(())
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let r = self.request("DELETE", &jp(queue, id), None).await?;
        match (r.status, r.body["code"].as_str()) {
            (200, _) => Ok(CancelOutcome::Cancelled),
            (_, Some("job_leased")) => Ok(CancelOutcome::Leased),
            (_, Some("job_dead")) => Ok(CancelOutcome::Dead),
            (404, _) => Ok(CancelOutcome::NotFound),
            _ => Err(api_error(&r, Some(id))),
        }
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, s: Due) -> Result<u64> {
        let body = match s {
            Due::Now => json!({"delay_ms": 0}),
            Due::Delay(d) => json!({"delay_ms": d.as_millis() as u64}),
            Due::At(ms) => json!({"run_at": ms}),
        };
        let v = self
            .ok("PATCH", &jp(queue, id), Some(body), Some(id))
            .await?;
        u64_of(&v, "due_at")
    }

    async fn wakeups(&self, _queue: &QueueName) -> Result<Wakeups> {
        Ok(self.wake.subscribe())
    }
}

impl Inspect for RemoteBackend {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        let r = self.request("GET", &jp(queue, id), None).await?;
        match r.status {
            200 => info_of(&r.body, payloads(&r.raw)?.pop().unwrap_or_default()).map(Some),
            404 => Ok(None),
            _ => Err(api_error(&r, Some(id))),
        }
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let v = self.ok("GET", "/v1/queues", None, None).await?;
        v.as_array()
            .ok_or_else(|| shape("queues: an array"))?
            .iter()
            .map(|q| QueueName::new(q["queue"].as_str().unwrap_or("")).map_err(Error::from))
            .collect()
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        stats_of(&self.ok("GET", &q(queue), None, None).await?)
    }

    async fn list(
        &self,
        queue: &QueueName,
        state: ListState,
        limit: usize,
        after: Option<Cursor>,
    ) -> Result<JobPage> {
        let mut path = format!("{}/jobs?state={state}&limit={limit}", q(queue));
        if let Some(c) = after {
            path.push_str(&format!("&cursor={c}"));
        }
        let r = self.ok_reply("GET", &path, None, None).await?;
        let jobs = jobs_of(&r)?;
        let next = match r.body["next_cursor"].as_str() {
            Some(c) => Some(c.parse::<Cursor>()?),
            None => None,
        };
        Ok(JobPage { jobs, next })
    }

    async fn search(&self, queue: &QueueName, prefix: &str, limit: usize) -> Result<Found> {
        let path = format!("{}/jobs?limit={limit}&id_prefix={}", q(queue), enc(prefix));
        let r = self.ok_reply("GET", &path, None, None).await?;
        Ok(Found {
            jobs: jobs_of(&r)?,
            by_prefix: r.body["by_prefix"].as_bool().unwrap_or(false),
        })
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        let path = format!("{}/dead/{}/requeue", q(queue), enc(id.as_str()));
        self.ok("POST", &path, None, Some(id)).await.map(|_| ())
    }

    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        let v = self
            .ok("POST", &format!("{}/dead/requeue", q(queue)), None, None)
            .await?;
        u64_of(&v, "count")
    }

    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        let v = self
            .ok("DELETE", &format!("{}/dead", q(queue)), None, None)
            .await?;
        u64_of(&v, "count")
    }

    async fn dead_delete(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        let path = format!("{}/dead/{}", q(queue), enc(id.as_str()));
        self.ok("DELETE", &path, None, Some(id)).await.map(|_| ())
    }

    async fn cancel_all(&self, queue: &QueueName, state: ListState) -> Result<u64> {
        let path = format!("{}/jobs?state={state}", q(queue));
        u64_of(&self.ok("DELETE", &path, None, None).await?, "count")
    }

    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        let verb = if paused { "pause" } else { "resume" };
        let path = format!("{}/{verb}", q(queue));
        self.ok("POST", &path, None, None).await.map(|_| ())
    }

    async fn series(&self, queue: &QueueName) -> Result<QueueSeries> {
        let v = self
            .ok("GET", &format!("{}/series", q(queue)), None, None)
            .await?;
        let counts = |c: &Value| -> Result<Counts> {
            let mut out = Counts {
                enqueued: u64_of(c, "enqueued")?,
                started: u64_of(c, "started")?,
                completed: u64_of(c, "completed")?,
                retried: u64_of(c, "retried")?,
                dead: u64_of(c, "dead")?,
                ..Counts::default()
            };
            let hist = c["lateness_histogram"]
                .as_array()
                .ok_or_else(|| shape("series: lateness_histogram"))?;
            for (slot, n) in out.lateness.iter_mut().zip(hist) {
                *slot = n.as_u64().unwrap_or(0);
            }
            Ok(out)
        };
        let interval = u64_of(&v, "interval_ms")?.max(1);
        let parts = v["intervals"]
            .as_array()
            .ok_or_else(|| shape("series: intervals"))?
            .iter()
            .map(|i| Ok((u64_of(i, "start")? / interval, counts(i)?)))
            .collect::<Result<Vec<_>>>()?;
        let now = delayq::job::system_now_ms();
        Ok(QueueSeries::collect(now, parts, counts(&v["totals"])?))
    }

    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        let v = self.ok("GET", &q(queue), None, None).await?;
        let s = &v["settings"];
        Ok(QueueSettings {
            shards: s["shards"].as_u64().unwrap_or(1) as u32,
            lane: s["lane"].as_bool().unwrap_or(false),
            lane_window_ms: s["lane_window_ms"].as_u64().unwrap_or(0) as u32,
            rate: match (s["rate"]["per_s"].as_f64(), s["rate"]["burst"].as_u64()) {
                (Some(per_s), Some(burst)) => Some(delayq::Rate {
                    per_s,
                    burst: burst as u32,
                }),
                _ => None,
            },
            max_in_flight: s["max_in_flight"].as_u64().map(|m| m as u32),
            retention: delayq::Retention {
                keep_done_ms: s["keep_done_ms"].as_u64().unwrap_or(0),
                dedupe_ms: s["dedupe_ms"].as_u64().unwrap_or(0),
            },
            target: target_of(&s["target"])?,
            delivery: match s["delivery"].as_str() {
                Some(d) => d.parse()?,
                None => delayq::DeliveryMode::Pull,
            },
        })
    }

    /// Pushers run next to the store, not through a server's API.
    async fn push_queues(&self) -> Result<Vec<QueueName>> {
        Err(Error::Backend(
            "push queues are read from the store: run the pusher with --store or --redis".into(),
        ))
    }

    async fn configure(&self, queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        let body = json!({
            "shards": s.shards,
            "lane": s.lane,
            "lane_window_ms": s.lane_window_ms,
            "rate": s.rate.map(|r| json!({"per_s": r.per_s, "burst": r.burst})),
            "max_in_flight": s.max_in_flight,
            "keep_done_ms": s.retention.keep_done_ms,
            "dedupe_ms": s.retention.dedupe_ms,
            "target": s.target,
            "delivery": s.delivery,
        });
        self.ok("PUT", &q(queue), Some(body), None).await?;
        Ok(s)
    }
}
