//! [`Client`]: one method per `/v1` operation of a delayq server, over a pooled keep-alive
//! HTTP client, with the request and response bodies of [`delayq_wire`]. Calls that are safe
//! to repeat (reads, puts, deletes, and an enqueue, whose jobs get their ids here before the
//! first try) are retried when no answer comes or the server is unavailable.

use std::time::Duration;

use delayq::{AckOutcome, CancelOutcome, JobId};
use delayq_wire::{
    AckBatchRequest, AckBatchResponse, AckRequest, BatchAddedView, BatchJobsRequest, BatchList,
    BatchRequest, BatchView, CancelledRequest, CancelledResponse, ClaimAck, ClaimManyRequest,
    ClaimRequest, ClaimResponse, Deliveries, EnqueueRequest, EnqueueResponse, ErrorBody, ErrorCode,
    ExtendRequest, JobList, JobView, LeaseOf, ListQuery, NackRequest, Outcome, OutcomeKind, Page,
    QueueView, ReleaseRequest, RescheduleRequest, ScheduleBody, ScheduleList, ScheduleView,
    SeriesView, SettingsPatch, Whoami,
};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// How long one request may take by default (a long poll's wait comes on top).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a call that is safe to repeat is retried by default.
pub const DEFAULT_RETRIES: u32 = 3;

/// A client of one delayq server (`delayq serve`). Cheap to clone: clones share the
/// connection pool.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    timeout: Duration,
    retries: u32,
}

/// Whether a call may be sent again when no answer came.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repeat {
    Safe,
    Once,
}

impl Client {
    /// A client of the server at `base_url` (`http://127.0.0.1:7070`; `https://` behind a
    /// TLS proxy). A URL that is not `http(s)://…` makes every call fail with
    /// [`Error::Invalid`].
    pub fn new(base_url: impl Into<String>) -> Self {
        let http = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(50))
            .tcp_nodelay(true)
            .build()
            .unwrap_or_default();
        Self {
            http,
            base: base_url.into().trim_end_matches('/').to_owned(),
            token: None,
            timeout: DEFAULT_TIMEOUT,
            retries: DEFAULT_RETRIES,
        }
    }

    /// Sends `Authorization: Bearer <token>` with every request.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// How long one request may take (default 30 s; a claim's `wait_ms` comes on top).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many times a call that is safe to repeat is sent again after no answer or a
    /// retryable error (default 3; 0: never).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    async fn once(
        &self,
        method: &Method,
        path: &str,
        body: Option<&[u8]>,
        extra: Duration,
    ) -> Result<(u16, Option<u64>, bytes::Bytes)> {
        if !(self.base.starts_with("http://") || self.base.starts_with("https://")) {
            return Err(Error::Invalid(format!(
                "server URL {:?}: expected http://HOST:PORT or https://…",
                self.base
            )));
        }
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .timeout(self.timeout + extra);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_vec());
        }
        let transport = |e: reqwest::Error| Error::Transport {
            url: self.base.clone(),
            timeout: e.is_timeout(),
            message: e.to_string(),
        };
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let bytes = resp.bytes().await.map_err(transport)?;
        Ok((status, retry_after, bytes))
    }

    /// Sends a request (retrying a repeatable one) and answers the body of a 2xx.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        repeat: Repeat,
        extra: Duration,
    ) -> Result<bytes::Bytes> {
        let mut attempt = 0;
        loop {
            let e = match self.once(&method, path, body.as_deref(), extra).await {
                Ok((status, _, bytes)) if (200..300).contains(&status) => return Ok(bytes),
                Ok((status, retry_after, bytes)) => api_error(status, retry_after, &bytes),
                Err(e) => e,
            };
            if repeat == Repeat::Once || attempt >= self.retries || !e.retryable() {
                return Err(e);
            }
            attempt += 1;
            let wait = match &e {
                Error::Api {
                    retry_after: Some(s),
                    ..
                } => Duration::from_secs(*s),
                _ => Duration::from_millis(100 << attempt.min(5)),
            };
            tracing::debug!(error = %e, attempt, "retrying a delayq call");
            tokio::time::sleep(wait.min(Duration::from_secs(5))).await;
        }
    }

    pub(crate) async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        repeat: Repeat,
    ) -> Result<T> {
        let body = body.map(|b| serde_json::to_vec(b).expect("a wire body serializes"));
        let bytes = self
            .call(method, path, body, repeat, Duration::ZERO)
            .await?;
        decode(&bytes)
    }

    pub(crate) async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.json(Method::GET, path, None::<&()>, Repeat::Safe)
            .await
    }

    // --- Jobs ---------------------------------------------------------------------------

    /// Enqueues one job. A job without an id gets one here, before the first try, so a retry
    /// after a lost answer cannot store it twice.
    pub async fn enqueue(
        &self,
        queue: &str,
        job: impl Into<EnqueueRequest>,
    ) -> Result<EnqueueResponse> {
        let mut job = job.into();
        job.id.get_or_insert_with(|| new_id(job.key.as_deref()));
        self.json(Method::POST, &jobs(queue)?, Some(&job), Repeat::Safe)
            .await
    }

    /// Enqueues a batch atomically (1-10,000 jobs), ids assigned here as for
    /// [`Client::enqueue`]; one answer per job, in order.
    pub async fn enqueue_batch(
        &self,
        queue: &str,
        mut jobs_: Vec<EnqueueRequest>,
    ) -> Result<Vec<EnqueueResponse>> {
        for j in &mut jobs_ {
            if j.id.is_none() {
                j.id = Some(new_id(j.key.as_deref()));
            }
        }
        self.json(Method::POST, &jobs(queue)?, Some(&jobs_), Repeat::Safe)
            .await
    }

    /// One job in any state; `None` when there is no such job.
    pub async fn get(&self, queue: &str, id: &str) -> Result<Option<JobView>> {
        match self.get_json(&job(queue, id)?).await {
            Ok(j) => Ok(Some(j)),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Cancels a scheduled job: `Cancelled`, or why not (`NotFound`, `Leased`, `Dead`).
    pub async fn cancel(&self, queue: &str, id: &str) -> Result<CancelOutcome> {
        self.cancel_job(queue, id, false).await
    }

    /// Cancels a job even while a worker runs it (`DELETE …?running=true`): `Cancelled` (it
    /// was waiting), `Cancelling` (it ran: it is ended cancelled and its worker told to stop
    /// its handler), or why not (`NotFound`, `Dead`).
    pub async fn cancel_running(&self, queue: &str, id: &str) -> Result<CancelOutcome> {
        self.cancel_job(queue, id, true).await
    }

    async fn cancel_job(&self, queue: &str, id: &str, running: bool) -> Result<CancelOutcome> {
        let mut path = job(queue, id)?;
        if running {
            path.push_str("?running=true");
        }
        let r: Result<Outcome> = self
            .json(Method::DELETE, &path, None::<&()>, Repeat::Safe)
            .await;
        match r {
            Ok(o) if o.outcome == OutcomeKind::Cancelling => Ok(CancelOutcome::Cancelling),
            Ok(_) => Ok(CancelOutcome::Cancelled),
            Err(e) => match e.code() {
                Some(ErrorCode::NotFound) => Ok(CancelOutcome::NotFound),
                Some(ErrorCode::JobLeased) => Ok(CancelOutcome::Leased),
                Some(ErrorCode::JobDead) => Ok(CancelOutcome::Dead),
                _ => Err(e),
            },
        }
    }

    /// Moves a scheduled job to a new due time (`RescheduleRequest::new(due)`, or the two
    /// fields as the API takes them); the answer's `due_at` is the new one.
    pub async fn reschedule(
        &self,
        queue: &str,
        id: &str,
        body: &RescheduleRequest,
    ) -> Result<Outcome> {
        self.json(Method::PATCH, &job(queue, id)?, Some(body), Repeat::Safe)
            .await
    }

    /// Makes a scheduled job due now.
    pub async fn run_now(&self, queue: &str, id: &str) -> Result<Outcome> {
        let path = format!("{}/run", job(queue, id)?);
        self.json(Method::POST, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// One page of a queue's jobs (`state` or `id_prefix`; `cursor` from the previous page).
    pub async fn list_jobs(&self, queue: &str, query: &ListQuery) -> Result<JobList> {
        let query = query_string(&[
            ("state", query.state.clone()),
            ("limit", query.limit.map(|l| l.to_string())),
            ("cursor", query.cursor.clone()),
            ("id_prefix", query.id_prefix.clone()),
        ]);
        self.get_json(&format!("{}{query}", jobs(queue)?)).await
    }

    /// Cancels every job of a state (`scheduled` or `due`); the answer's `count` says how
    /// many.
    pub async fn cancel_jobs(&self, queue: &str, state: &str) -> Result<Outcome> {
        let path = format!("{}?state={}", jobs(queue)?, enc(state));
        self.json(Method::DELETE, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// The requests this server's pusher sent for a job.
    pub async fn deliveries(&self, queue: &str, id: &str) -> Result<Deliveries> {
        self.get_json(&format!("{}/deliveries", job(queue, id)?))
            .await
    }

    // --- Consumers ----------------------------------------------------------------------

    /// Leases due jobs, waiting up to `wait_ms` for one (a long poll); the request's `acks`
    /// are applied first and answered in order. Not retried: a lost answer's jobs come back
    /// when their leases end.
    pub async fn claim(&self, queue: &str, req: &ClaimRequest) -> Result<ClaimResponse> {
        let body = serde_json::to_vec(req).expect("a claim serializes");
        let wait = Duration::from_millis(req.poll.wait_ms.unwrap_or(0));
        let bytes = self
            .call(
                Method::POST,
                &format!("{}/claim", q(queue)?),
                Some(body),
                Repeat::Once,
                wait,
            )
            .await?;
        decode(&bytes)
    }

    /// Leases due jobs from several queues (`POST /v1/claim`): by weight among those with due
    /// jobs, or in the order given with `strict`, waiting up to `wait_ms` on all of them at
    /// once; each job names its `queue`, the acks (each naming its queue) are applied first and
    /// answered in order. Not retried, as [`Client::claim`].
    pub async fn claim_many(&self, req: &ClaimManyRequest) -> Result<ClaimResponse> {
        let body = serde_json::to_vec(req).expect("a claim serializes");
        let wait = Duration::from_millis(req.poll.wait_ms.unwrap_or(0));
        let bytes = self
            .call(Method::POST, "/v1/claim", Some(body), Repeat::Once, wait)
            .await?;
        decode(&bytes)
    }

    /// Ends a waiting claim that named itself `poll_id` early (it answers what it has).
    pub async fn cut_poll(&self, queue: &str, poll_id: &str) -> Result<()> {
        let path = format!("{}/polls/{}", q(queue)?, enc(poll_id));
        self.call(Method::DELETE, &path, None, Repeat::Once, Duration::ZERO)
            .await
            .map(drop)
    }

    /// Acknowledges a finished job.
    pub async fn ack(&self, queue: &str, id: &str, lease_token: u64) -> Result<Outcome> {
        let path = format!("{}/ack", job(queue, id)?);
        self.json(
            Method::POST,
            &path,
            Some(&AckRequest {
                lease_token,
                ..AckRequest::default()
            }),
            Repeat::Safe,
        )
        .await
    }

    /// Acknowledges a finished job with its handler's result (at most 65,535 bytes; sent as
    /// JSON when the bytes are JSON), kept with the job while its queue or the job keeps done
    /// jobs (`keep_done_ms`) and answered by [`Client::get`].
    pub async fn ack_result(
        &self,
        queue: &str,
        id: &str,
        lease_token: u64,
        result: Vec<u8>,
    ) -> Result<Outcome> {
        let path = format!("{}/ack", job(queue, id)?);
        let (result, result_b64) = delayq_wire::payload::payload_fields(result);
        self.json(
            Method::POST,
            &path,
            Some(&AckRequest {
                lease_token,
                result,
                result_b64,
            }),
            Repeat::Safe,
        )
        .await
    }

    /// Which of `leases` were cancelled while their jobs ran (`POST /v1/leases/cancelled`):
    /// a worker asks about the jobs it runs and stops their handlers.
    pub async fn cancelled_leases(&self, leases: Vec<LeaseOf>) -> Result<Vec<LeaseOf>> {
        let r: CancelledResponse = self
            .json(
                Method::POST,
                "/v1/leases/cancelled",
                Some(&CancelledRequest { leases }),
                Repeat::Safe,
            )
            .await?;
        Ok(r.cancelled)
    }

    /// Acknowledges finished jobs in one request (1-1,000); one outcome per ack, in order.
    pub async fn ack_batch(&self, queue: &str, acks: Vec<ClaimAck>) -> Result<Vec<AckOutcome>> {
        let path = format!("{}/acks", q(queue)?);
        let r: AckBatchResponse = self
            .json(
                Method::POST,
                &path,
                Some(&AckBatchRequest { acks }),
                Repeat::Safe,
            )
            .await?;
        Ok(r.acks)
    }

    /// Reports a failed attempt: retried by the job's backoff (or `retry_in_ms`), or
    /// dead-lettered (`dead`, or the last attempt).
    pub async fn nack(&self, queue: &str, id: &str, req: &NackRequest) -> Result<Outcome> {
        let path = format!("{}/nack", job(queue, id)?);
        self.json(Method::POST, &path, Some(req), Repeat::Once)
            .await
    }

    /// Extends a lease to `lease_ms` from now; the answer's `lease_deadline` is the new end.
    pub async fn extend(
        &self,
        queue: &str,
        id: &str,
        lease_token: u64,
        lease_ms: u64,
    ) -> Result<Outcome> {
        let path = format!("{}/extend", job(queue, id)?);
        let body = ExtendRequest {
            lease_token,
            lease_ms: Some(lease_ms),
        };
        self.json(Method::POST, &path, Some(&body), Repeat::Safe)
            .await
    }

    /// Gives a lease back: the job is due again at once (`undo_attempt`: the attempt is not
    /// counted).
    pub async fn release(
        &self,
        queue: &str,
        id: &str,
        lease_token: u64,
        undo_attempt: bool,
    ) -> Result<Outcome> {
        let path = format!("{}/release", job(queue, id)?);
        let body = ReleaseRequest {
            lease_token,
            undo_attempt,
        };
        self.json(Method::POST, &path, Some(&body), Repeat::Safe)
            .await
    }

    // --- Queues -------------------------------------------------------------------------

    /// Every queue that holds jobs, with its counts.
    pub async fn queues(&self) -> Result<Vec<QueueView>> {
        self.get_json("/v1/queues").await
    }

    /// A queue's counts and settings.
    pub async fn queue(&self, queue: &str) -> Result<QueueView> {
        self.get_json(&q(queue)?).await
    }

    /// Changes a queue's settings (the fields given); answers the queue with its new ones.
    pub async fn put_queue(&self, queue: &str, patch: &SettingsPatch) -> Result<QueueView> {
        self.json(Method::PUT, &q(queue)?, Some(patch), Repeat::Safe)
            .await
    }

    /// Pauses a queue: it accepts jobs and leases none.
    pub async fn pause(&self, queue: &str) -> Result<Outcome> {
        let path = format!("{}/pause", q(queue)?);
        self.json(Method::POST, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// Creates a batch of jobs with its callbacks (`POST /v1/queues/{q}/batches`): closed
    /// unless `open`; an open batch of that id gains the jobs instead. Sent once (a retry of
    /// a call that closed its batch would be refused).
    pub async fn create_batch(&self, queue: &str, req: &BatchRequest) -> Result<BatchAddedView> {
        let path = format!("{}/batches", q(queue)?);
        self.json(Method::POST, &path, Some(req), Repeat::Once)
            .await
    }

    /// Adds jobs to an open batch, closing it after them with `close`.
    pub async fn add_to_batch(
        &self,
        queue: &str,
        id: &str,
        req: &BatchJobsRequest,
    ) -> Result<BatchAddedView> {
        let path = format!("{}/batches/{}/jobs", q(queue)?, enc(id));
        self.json(Method::POST, &path, Some(req), Repeat::Once)
            .await
    }

    /// Closes a batch: no job joins it any more.
    pub async fn close_batch(&self, queue: &str, id: &str) -> Result<BatchView> {
        let path = format!("{}/batches/{}/close", q(queue)?, enc(id));
        self.json(Method::POST, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// One batch: its state and counts.
    pub async fn batch(&self, queue: &str, id: &str) -> Result<BatchView> {
        self.get_json(&format!("{}/batches/{}", q(queue)?, enc(id)))
            .await
    }

    /// The batches of `queue` not done yet, oldest first, at most `limit` (default 20).
    pub async fn batches(&self, queue: &str, limit: Option<usize>) -> Result<BatchList> {
        let mut path = format!("{}/batches", q(queue)?);
        if let Some(n) = limit {
            path.push_str(&format!("?limit={n}"));
        }
        self.get_json(&path).await
    }

    /// Resumes a paused queue.
    pub async fn resume(&self, queue: &str) -> Result<Outcome> {
        let path = format!("{}/resume", q(queue)?);
        self.json(Method::POST, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// A queue's throughput and lateness over the last hour.
    pub async fn series(&self, queue: &str) -> Result<SeriesView> {
        self.get_json(&format!("{}/series", q(queue)?)).await
    }

    /// Whether the server is ready: `Ok` when `/readyz` answers 200 (its store answers), the
    /// server's error otherwise (`unavailable` while the store is unreachable). Tried once.
    pub async fn ready(&self) -> Result<()> {
        self.call(Method::GET, "/readyz", None, Repeat::Once, Duration::ZERO)
            .await
            .map(|_| ())
    }

    /// The server's build: `{"status", "version", "commit", "built"}` from `/healthz`.
    pub async fn health(&self) -> Result<serde_json::Value> {
        self.get_json("/healthz").await
    }

    /// What this client's token may do.
    pub async fn whoami(&self) -> Result<Whoami> {
        self.get_json("/v1/whoami").await
    }

    // --- Dead letters -------------------------------------------------------------------

    /// Dead jobs, oldest failure first.
    pub async fn list_dead(&self, queue: &str, page: &Page) -> Result<Vec<JobView>> {
        let path = format!(
            "{}/dead?offset={}&limit={}",
            q(queue)?,
            page.offset.unwrap_or(0),
            page.limit.unwrap_or(100)
        );
        self.get_json(&path).await
    }

    /// Puts one dead job back, due now.
    pub async fn requeue_dead(&self, queue: &str, id: &str) -> Result<Outcome> {
        let path = format!("{}/dead/{}/requeue", q(queue)?, enc(id));
        self.json(Method::POST, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// Puts every dead job back, due now; `count` says how many.
    pub async fn requeue_all_dead(&self, queue: &str) -> Result<Outcome> {
        let path = format!("{}/dead/requeue", q(queue)?);
        self.json(Method::POST, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// Deletes every dead job; `count` says how many.
    pub async fn purge_dead(&self, queue: &str) -> Result<Outcome> {
        let path = format!("{}/dead", q(queue)?);
        self.json(Method::DELETE, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// Deletes one dead job.
    pub async fn delete_dead(&self, queue: &str, id: &str) -> Result<Outcome> {
        let path = format!("{}/dead/{}", q(queue)?, enc(id));
        self.json(Method::DELETE, &path, None::<&()>, Repeat::Safe)
            .await
    }

    // --- Schedules ----------------------------------------------------------------------

    /// Creates or changes a schedule; answers it with its next fire.
    pub async fn put_schedule(
        &self,
        queue: &str,
        name: &str,
        spec: &ScheduleBody,
    ) -> Result<ScheduleView> {
        self.json(
            Method::PUT,
            &schedule(queue, name)?,
            Some(spec),
            Repeat::Safe,
        )
        .await
    }

    /// One schedule; `None` when there is none of that name.
    pub async fn get_schedule(&self, queue: &str, name: &str) -> Result<Option<ScheduleView>> {
        match self.get_json(&schedule(queue, name)?).await {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A queue's schedules, by name.
    pub async fn list_schedules(&self, queue: &str) -> Result<Vec<ScheduleView>> {
        let l: ScheduleList = self.get_json(&format!("{}/schedules", q(queue)?)).await?;
        Ok(l.schedules)
    }

    /// Deletes a schedule (its jobs already enqueued stay); `false` when there was none.
    pub async fn delete_schedule(&self, queue: &str, name: &str) -> Result<bool> {
        let r: Result<Outcome> = self
            .json(
                Method::DELETE,
                &schedule(queue, name)?,
                None::<&()>,
                Repeat::Safe,
            )
            .await;
        match r {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The API error of a non-2xx answer.
fn api_error(status: u16, retry_after: Option<u64>, bytes: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(b) => Error::Api {
            code: b.code,
            status,
            message: b.message,
            state: b.state,
            retry_after,
        },
        Err(_) => Error::Api {
            code: if status == 503 {
                "unavailable".into()
            } else {
                format!("http_{status}")
            },
            status,
            message: String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
            state: None,
            retry_after,
        },
    }
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Decode(e.to_string()))
}

/// `/v1/queues/{queue}`, the name checked.
/// A fresh id for a job of `key`: one that a sharded store keeps on the key's shard
/// (`JobId::generate_for`) when the key is valid (an invalid one is refused by the server).
fn new_id(key: Option<&str>) -> String {
    match key.map(delayq::JobKey::new) {
        Some(Ok(k)) => JobId::generate_for(&k).to_string(),
        _ => JobId::generate().to_string(),
    }
}

pub(crate) fn q(queue: &str) -> Result<String> {
    delayq::QueueName::new(queue).map_err(|e| Error::Invalid(e.to_string()))?;
    Ok(format!("/v1/queues/{queue}"))
}

fn jobs(queue: &str) -> Result<String> {
    Ok(format!("{}/jobs", q(queue)?))
}

fn job(queue: &str, id: &str) -> Result<String> {
    Ok(format!("{}/jobs/{}", q(queue)?, enc(id)))
}

fn schedule(queue: &str, name: &str) -> Result<String> {
    Ok(format!("{}/schedules/{}", q(queue)?, enc(name)))
}

/// `?name=value&…` of the parameters given (each value percent-encoded); `""` for none.
pub(crate) fn query_string(params: &[(&str, Option<String>)]) -> String {
    let given: Vec<String> = params
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", enc(v))))
        .collect();
    if given.is_empty() {
        String::new()
    } else {
        format!("?{}", given.join("&"))
    }
}

/// Text (an id) as a path segment or query value: everything but unreserved characters
/// percent-encoded.
pub(crate) fn enc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
