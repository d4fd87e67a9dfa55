//! [`RemoteBackend`]: the core's `Backend`, `Inspect` and `Schedules` traits over a running
//! `delayq serve`, so that `delayq::Producer` and `delayq::Consumer` run over HTTP unchanged.
//! A claim is a long poll of up to [`LONG_POLL`] (how a remote consumer is woken) that carries
//! the finished jobs' acks.

use std::sync::Arc;
use std::time::Duration;

use delayq::{
    Ack, AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimOverRequest, ClaimRequest, Cursor,
    Due, Enqueued, Error, Found, Inspect, Job, JobId, JobInfo, JobKey, JobPage, KeyHold, LeaseRef,
    ListRequest, ListState, Nack, NackOutcome, NewJob, QueueName, QueueSeries, QueueSettings,
    QueueStats, Result, Wakeups,
};
use delayq_wire::{ClaimAck, ClaimPoll, EnqueueRequest, ListQuery, NackRequest, OutcomeKind, Page};
use tokio::sync::watch;

use crate::Client;

mod batches;
mod polls;
mod schedules;

/// How long a claim waits on the server for a due job before it answers empty.
pub const LONG_POLL: Duration = Duration::from_secs(5);
/// Without a long poll, how soon a claim that found nothing scheduled is tried again.
const IDLE_POLL: Duration = Duration::from_millis(100);
/// Most acks one request carries (the server's limit).
const MAX_ACKS: usize = 1000;

/// A `delayq serve` as a store: every call is a request to its API.
#[derive(Clone)]
pub struct RemoteBackend {
    client: Client,
    /// Never bumped: the long poll of each claim is the wake-up.
    wake: Arc<watch::Sender<u64>>,
    /// Set by [`RemoteBackend::close`] at a worker's shutdown.
    closing: Arc<polls::Closing>,
    /// How long a claim waits on the server.
    long_poll: Duration,
}

impl RemoteBackend {
    /// The server `client` talks to, as a store.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            wake: Arc::new(watch::channel(0).0),
            closing: Arc::default(),
            long_poll: LONG_POLL,
        }
    }

    /// How long a claim waits on the server for a due job (default [`LONG_POLL`]; zero: not
    /// at all: an empty claim says when the next job is due, as the server answers, or to try
    /// again in 100 ms when nothing is scheduled).
    pub fn long_poll(mut self, wait: Duration) -> Self {
        self.long_poll = wait;
        self
    }

    /// The client it calls with.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

/// The core's error for a client error, about job `id`.
fn core(id: Option<&JobId>) -> impl FnOnce(crate::Error) -> Error + '_ {
    move |e| e.into_core(id)
}

fn decoded(e: delayq_wire::Invalid) -> Error {
    Error::Backend(format!("unexpected answer from the delayq server: {e}"))
}

/// A claim's most jobs (at most 1000), lease, wait and poll name on the wire.
fn poll_of(max: usize, lease: Duration, wait_ms: u64, poll_id: Option<String>) -> ClaimPoll {
    ClaimPoll {
        max: Some(max.min(1000)),
        lease_ms: Some(lease.as_millis() as u64),
        wait_ms: Some(wait_ms),
        poll_id,
    }
}

fn acks_of(acks: &[Ack]) -> Vec<ClaimAck> {
    acks.iter().map(ClaimAck::from).collect()
}

/// A claim's answer carries one outcome per ack it sent.
fn one_outcome_per_ack(r: &delayq_wire::ClaimResponse, sent: usize) -> Result<()> {
    if r.acks.len() == sent {
        return Ok(());
    }
    Err(decoded(delayq_wire::Invalid::new(
        delayq_wire::ErrorCode::InvalidBody,
        "one ack outcome per ack expected",
    )))
}

/// When a remote consumer claims again: at once after a long poll (it already waited), else
/// when the server says the next job is due — or soon, with nothing scheduled (nothing wakes a
/// remote consumer but its next claim).
fn next_claim_in(wait_ms: u64, next_due_in_ms: Option<u64>) -> Option<Duration> {
    if wait_ms > 0 {
        Some(Duration::ZERO)
    } else {
        Some(next_due_in_ms.map_or(IDLE_POLL, Duration::from_millis))
    }
}

fn infos(jobs: Vec<delayq_wire::JobView>) -> Result<Vec<JobInfo>> {
    jobs.into_iter()
        .map(|j| JobInfo::try_from(j).map_err(decoded))
        .collect()
}

impl Backend for RemoteBackend {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let body = jobs.into_iter().map(EnqueueRequest::from_job).collect();
        let out = self
            .client
            .enqueue_batch(queue.as_str(), body)
            .await
            .map_err(core(None))?;
        out.into_iter()
            .map(|e| Enqueued::try_from(e).map_err(decoded))
            .collect()
    }

    async fn claim(&self, queue: &QueueName, mut req: ClaimRequest) -> Result<ClaimBatch> {
        if req.max == 0 {
            return Ok(ClaimBatch {
                acks: self.ack(queue, req.acks).await?,
                ..ClaimBatch::default()
            });
        }
        // More acks than a claim carries: the rest go first, in ack batches.
        let rest = req.acks.split_off(req.acks.len().min(MAX_ACKS));
        let rest = self.ack(queue, rest).await?;
        let sent = req.acks.len();
        let (poll_id, wait_ms) = self.closing.start(queue, self.long_poll.as_millis() as u64);
        let body = delayq_wire::ClaimRequest {
            poll: poll_of(req.max, req.lease, wait_ms, poll_id),
            acks: acks_of(&req.acks),
        };
        let r = self.client.claim(queue.as_str(), &body).await;
        self.closing.done();
        let r = r.map_err(core(None))?;
        one_outcome_per_ack(&r, sent)?;
        let next_due_in_ms = r.next_due_in_ms;
        let jobs = r
            .jobs
            .into_iter()
            .map(|j| j.into_job(queue, req.lease).map_err(decoded))
            .collect::<Result<Vec<Job>>>()?;
        Ok(ClaimBatch {
            jobs,
            acks: r.acks.into_iter().chain(rest).collect(),
            next_due_in: next_claim_in(wait_ms, next_due_in_ms),
        })
    }

    fn claims_over_queues(&self) -> bool {
        true
    }

    async fn claim_over(&self, mut req: ClaimOverRequest) -> Result<ClaimBatch> {
        let Some((first, _)) = req.queues.first().cloned() else {
            return Err(delayq::InvalidInput::Queues("no queue to claim from".into()).into());
        };
        if req.max == 0 {
            // Only acknowledging: one ack batch per queue, the outcomes in order.
            return Ok(ClaimBatch {
                acks: delayq::backend::ack_each(self, req.acks).await?,
                ..ClaimBatch::default()
            });
        }
        // More acks than a claim carries: the rest go first, in ack batches per queue.
        let rest = req.acks.split_off(req.acks.len().min(MAX_ACKS));
        let rest_out = delayq::backend::ack_each(self, rest).await?;
        let sent = req.acks.len();
        // The poll is named under the first queue: that is where `close` cuts it.
        let (poll_id, wait_ms) = self
            .closing
            .start(&first, self.long_poll.as_millis() as u64);
        let body = delayq_wire::ClaimManyRequest {
            queues: req
                .queues
                .iter()
                .map(|(q, w)| delayq_wire::QueueClaim {
                    name: q.to_string(),
                    weight: Some(*w),
                })
                .collect(),
            strict: req.order == delayq::QueueOrder::Strict,
            poll: poll_of(req.max, req.lease, wait_ms, poll_id),
            acks: req
                .acks
                .iter()
                .map(|(q, a)| delayq_wire::QueueAck::of(q, a))
                .collect(),
        };
        let r = self.client.claim_many(&body).await;
        self.closing.done();
        let r = r.map_err(core(None))?;
        one_outcome_per_ack(&r, sent)?;
        let next_due_in_ms = r.next_due_in_ms;
        let mut jobs = Vec::with_capacity(r.jobs.len());
        for j in r.jobs {
            let queue = match j.queue.as_deref() {
                Some(q) => QueueName::new(q)?,
                None => first.clone(),
            };
            jobs.push(j.into_job(&queue, req.lease).map_err(decoded)?);
        }
        Ok(ClaimBatch {
            jobs,
            acks: r.acks.into_iter().chain(rest_out).collect(),
            next_due_in: next_claim_in(wait_ms, next_due_in_ms),
        })
    }

    async fn ack(&self, queue: &QueueName, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        delayq::limits::check_acks(&acks)?;
        let mut out = Vec::with_capacity(acks.len());
        for chunk in acks.chunks(MAX_ACKS) {
            let acks = self
                .client
                .ack_batch(queue.as_str(), acks_of(chunk))
                .await
                .map_err(core(None))?;
            if acks.len() != chunk.len() {
                return Err(Error::Backend(
                    "unexpected answer from the delayq server: one ack outcome per ack".into(),
                ));
            }
            out.extend(acks);
        }
        Ok(out)
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        let body = NackRequest {
            lease_token: lease.token,
            error: Some(nack.error),
            retry_in_ms: nack.retry_in.map(|d| d.as_millis() as u64),
            dead: nack.dead,
        };
        let o = self
            .client
            .nack(queue.as_str(), lease.id.as_str(), &body)
            .await
            .map_err(core(Some(&lease.id)))?;
        match (o.outcome, o.due_at) {
            (OutcomeKind::Retrying, Some(due_at_ms)) => Ok(NackOutcome::Retrying { due_at_ms }),
            (OutcomeKind::Dead, _) => Ok(NackOutcome::Dead {
                failed_at_ms: o.failed_at.unwrap_or_else(delayq::job::system_now_ms),
            }),
            (other, _) => Err(Error::Backend(format!(
                "unexpected answer from the delayq server: nack outcome {other:?}"
            ))),
        }
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, len: Duration) -> Result<u64> {
        let o = self
            .client
            .extend(
                queue.as_str(),
                lease.id.as_str(),
                lease.token,
                len.as_millis() as u64,
            )
            .await
            .map_err(core(Some(&lease.id)))?;
        o.lease_deadline
            .ok_or_else(|| Error::Backend("extend answered no lease_deadline".into()))
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        for l in leases {
            // A lease that is gone already is as good as given back.
            match self
                .client
                .release(queue.as_str(), l.id.as_str(), l.token, undo)
                .await
            {
                Ok(_) => {}
                Err(e) if e.status().is_some_and(|s| s < 500) => {}
                Err(e) => return Err(e.into_core(Some(&l.id))),
            }
        }
        Ok(())
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        self.client
            .cancel(queue.as_str(), id.as_str())
            .await
            .map_err(core(Some(id)))
    }

    async fn cancel_running(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        self.client
            .cancel_running(queue.as_str(), id.as_str())
            .await
            .map_err(core(Some(id)))
    }

    async fn cancelled(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<bool>> {
        let asked = leases
            .iter()
            .map(|l| delayq_wire::LeaseOf {
                queue: queue.to_string(),
                id: l.id.to_string(),
                lease_token: l.token,
            })
            .collect();
        // The server answers the cancelled ones among them, in the order asked.
        let found = self
            .client
            .cancelled_leases(asked)
            .await
            .map_err(core(None))?;
        let mut found = found.iter().peekable();
        Ok(leases
            .iter()
            .map(|l| {
                found
                    .next_if(|f| f.id == l.id.as_str() && f.lease_token == l.token)
                    .is_some()
            })
            .collect())
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, due: Due) -> Result<u64> {
        let o = self
            .client
            .reschedule(
                queue.as_str(),
                id.as_str(),
                &delayq_wire::RescheduleRequest::new(due),
            )
            .await
            .map_err(core(Some(id)))?;
        o.due_at
            .ok_or_else(|| Error::Backend("reschedule answered no due_at".into()))
    }

    async fn wakeups(&self, _queue: &QueueName) -> Result<Wakeups> {
        Ok(self.wake.subscribe())
    }

    async fn stop_polling(&self) {
        self.close().await;
    }
}

impl Inspect for RemoteBackend {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        match self
            .client
            .get(queue.as_str(), id.as_str())
            .await
            .map_err(core(Some(id)))?
        {
            Some(j) => JobInfo::try_from(j).map(Some).map_err(decoded),
            None => Ok(None),
        }
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.client
            .queues()
            .await
            .map_err(core(None))?
            .into_iter()
            .map(|q| QueueName::new(q.queue).map_err(Error::from))
            .collect()
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let v = self
            .client
            .queue(queue.as_str())
            .await
            .map_err(core(None))?;
        Ok((&v).into())
    }

    async fn list(&self, queue: &QueueName, page: ListRequest) -> Result<JobPage> {
        let ListRequest {
            state,
            limit,
            after,
        } = page;
        let query = ListQuery {
            state: Some(state.to_string()),
            limit: Some(limit),
            cursor: after.map(|c| c.to_string()),
            id_prefix: None,
        };
        let page = self
            .client
            .list_jobs(queue.as_str(), &query)
            .await
            .map_err(core(None))?;
        let next = match page.next_cursor {
            Some(c) => Some(c.parse::<Cursor>()?),
            None => None,
        };
        Ok(JobPage {
            jobs: infos(page.jobs)?,
            next,
        })
    }

    async fn search(&self, queue: &QueueName, prefix: &str, limit: usize) -> Result<Found> {
        let query = ListQuery {
            limit: Some(limit),
            id_prefix: Some(prefix.to_owned()),
            ..ListQuery::default()
        };
        let page = self
            .client
            .list_jobs(queue.as_str(), &query)
            .await
            .map_err(core(None))?;
        Ok(Found {
            by_prefix: page.by_prefix.unwrap_or(false),
            jobs: infos(page.jobs)?,
        })
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.client
            .requeue_dead(queue.as_str(), id.as_str())
            .await
            .map(drop)
            .map_err(core(Some(id)))
    }

    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        let o = self
            .client
            .requeue_all_dead(queue.as_str())
            .await
            .map_err(core(None))?;
        Ok(o.count.unwrap_or(0))
    }

    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        let o = self
            .client
            .purge_dead(queue.as_str())
            .await
            .map_err(core(None))?;
        Ok(o.count.unwrap_or(0))
    }

    async fn dead_delete(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.client
            .delete_dead(queue.as_str(), id.as_str())
            .await
            .map(drop)
            .map_err(core(Some(id)))
    }

    async fn cancel_all(&self, queue: &QueueName, state: ListState) -> Result<u64> {
        let o = self
            .client
            .cancel_jobs(queue.as_str(), &state.to_string())
            .await
            .map_err(core(None))?;
        Ok(o.count.unwrap_or(0))
    }

    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        let r = if paused {
            self.client.pause(queue.as_str()).await
        } else {
            self.client.resume(queue.as_str()).await
        };
        r.map(drop).map_err(core(None))
    }

    async fn series(&self, queue: &QueueName) -> Result<QueueSeries> {
        let v = self
            .client
            .series(queue.as_str())
            .await
            .map_err(core(None))?;
        let counts = |c: &delayq_wire::CountsView| {
            let mut out = delayq::series::Counts {
                enqueued: c.enqueued,
                started: c.started,
                completed: c.completed,
                retried: c.retried,
                dead: c.dead,
                ..delayq::series::Counts::default()
            };
            for (slot, n) in out.lateness.iter_mut().zip(&c.lateness_histogram) {
                *slot = *n;
            }
            out
        };
        let interval = v.interval_ms.max(1);
        let parts: Vec<_> = v
            .intervals
            .iter()
            .map(|i| (i.start.unwrap_or(0) / interval, counts(i)))
            .collect();
        let now = delayq::job::system_now_ms();
        Ok(QueueSeries::collect(now, parts, counts(&v.totals)))
    }

    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        let v = self
            .client
            .queue(queue.as_str())
            .await
            .map_err(core(None))?;
        Ok(v.settings.map(Into::into).unwrap_or_default())
    }

    /// Pushers run next to the store, not through a server's API.
    async fn push_queues(&self) -> Result<Vec<QueueName>> {
        Err(Error::Backend(
            "push queues are read from the store: run the pusher with --store or --redis".into(),
        ))
    }

    async fn configure(&self, queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        // Refused here as the stores refuse it (a rate of NaN has no JSON form to send).
        s.validate()?;
        self.client
            .put_queue(queue.as_str(), &(&s).into())
            .await
            .map_err(core(None))?;
        Ok(s)
    }

    async fn pause_key(&self, q: &QueueName, key: &JobKey, hold: KeyHold) -> Result<Option<u64>> {
        let v = match hold {
            KeyHold::Lifted => self.client.resume_key(q.as_str(), key.as_str()).await,
            KeyHold::Until(t) => {
                let body = delayq_wire::KeyPauseRequest {
                    until: Some(t.into()),
                    for_ms: None,
                };
                self.client.pause_key(q.as_str(), key.as_str(), &body).await
            }
            KeyHold::For(d) => {
                let body = delayq_wire::KeyPauseRequest {
                    until: None,
                    for_ms: Some(d.as_millis() as u64),
                };
                self.client.pause_key(q.as_str(), key.as_str(), &body).await
            }
        };
        Ok(v.map_err(core(None))?.paused_until)
    }

    async fn keys(&self, queue: &QueueName, limit: usize) -> Result<Vec<delayq::KeyStats>> {
        let v = self
            .client
            .keys(queue.as_str(), Some(limit))
            .await
            .map_err(core(None))?;
        v.keys
            .into_iter()
            .map(|k| delayq::KeyStats::try_from(k).map_err(|e| Error::Backend(e.to_string())))
            .collect()
    }

    async fn key_jobs(
        &self,
        q: &QueueName,
        key: &JobKey,
        req: delayq::KeyJobsRequest,
    ) -> Result<delayq::KeyJobsPage> {
        let query = delayq_wire::KeyJobsQuery {
            state: req.state.map(|s| s.to_string()),
            limit: Some(req.limit),
            cursor: req.after.map(|a| a.to_string()),
        };
        let page = self
            .client
            .key_jobs(q.as_str(), key.as_str(), &query)
            .await
            .map_err(core(None))?;
        Ok(delayq::KeyJobsPage {
            jobs: infos(page.jobs)?,
            next: page.next_cursor.map(JobId::new).transpose()?,
            // (The server labelled the jobs by its clock; this one is as close as it gets.)
            now_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        })
    }

    async fn cancel_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> Result<delayq::KeyCancelled> {
        let v = self
            .client
            .cancel_key(q.as_str(), key.as_str(), running)
            .await
            .map_err(core(None))?;
        Ok(delayq::KeyCancelled {
            cancelled: v.cancelled,
            running: v.running,
        })
    }

    async fn reschedule_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        to: delayq::KeyMove,
    ) -> Result<u64> {
        let body = delayq_wire::KeyRescheduleRequest::new(to);
        let v = self
            .client
            .reschedule_key(q.as_str(), key.as_str(), &body)
            .await
            .map_err(core(None))?;
        Ok(v.rescheduled)
    }
}

impl RemoteBackend {
    /// A page of dead jobs (`GET …/dead`), oldest failure first.
    pub async fn dead(
        &self,
        queue: &QueueName,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        let page = Page {
            offset: Some(offset),
            limit: Some(limit),
        };
        infos(
            self.client
                .list_dead(queue.as_str(), &page)
                .await
                .map_err(core(None))?,
        )
    }
}
