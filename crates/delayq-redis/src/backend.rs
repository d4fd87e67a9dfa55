//! [`RedisBackend`]: the `Backend` and `Inspect` traits over Redis, each method one script.

use std::sync::Arc;
use std::time::Duration;

use delayq::limits::truncate_error;
use delayq::{
    AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Enqueued, Inspect, Job, JobId,
    JobInfo, JobState, LeaseRef, Nack, NackOutcome, NewJob, QueueName, QueueStats, Result,
    Schedule, Wakeups,
};
use redis::Value;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::{self, shape};
use crate::keys::Keys;
use crate::record;
use crate::reply::{Reply, array, bytes, int, job_id, job_info, reply, state};
use crate::scripts::{self, ScriptDef};
use crate::wake::WakeHub;

/// Most jobs leased in one claim (bounded by Lua's `unpack` limit and by reply size).
pub const MAX_CLAIM: usize = 1000;
/// Most expired leases recovered per claim.
const REAP_LIMIT: usize = 100;
/// Jobs per script call when requeueing or purging all dead jobs (keeps each call short).
const ADMIN_CHUNK: usize = 1000;

/// The Redis backend. Cheap to clone: clones share one multiplexed connection (which
/// reconnects by itself) and one Pub/Sub connection for wake-ups.
#[derive(Clone)]
pub struct RedisBackend {
    inner: Arc<Inner>,
}

struct Inner {
    conn: ConnectionManager,
    hub: WakeHub,
}

impl RedisBackend {
    /// Connects to `url` (`redis://[user:pass@]host:port[/db]`, `rediss://…`,
    /// `redis+unix:///path`). Must be called inside a Tokio runtime.
    pub async fn connect(url: &str) -> std::result::Result<Self, crate::Error> {
        let client = redis::Client::open(url).map_err(crate::Error::Url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(3)
            .set_max_delay(Duration::from_secs(1));
        let conn = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(crate::Error::Connect)?;
        let hub = WakeHub::start(client);
        Ok(Self {
            inner: Arc::new(Inner { conn, hub }),
        })
    }

    /// A clone of the command connection, for tools that need plain commands (`INFO`, …).
    pub fn connection(&self) -> ConnectionManager {
        self.inner.conn.clone()
    }

    /// Runs `def` on `queue`'s keys (in the order the script declares them) with `args`.
    async fn call(&self, def: &ScriptDef, k: &Keys, args: Vec<Vec<u8>>) -> Result<Value> {
        let mut inv = def.script().prepare_invoke();
        for name in def.key_names(k) {
            inv.key(name);
        }
        for a in args {
            inv.arg(a);
        }
        let mut conn = self.inner.conn.clone();
        inv.invoke_async(&mut conn).await.map_err(error::map)
    }
}

fn arg(v: impl ToString) -> Vec<u8> {
    v.to_string().into_bytes()
}

fn schedule_args(s: Schedule) -> [Vec<u8>; 2] {
    match s {
        Schedule::Now => [arg("n"), arg(0)],
        Schedule::Delay(d) => [arg("d"), arg(d.as_millis())],
        Schedule::At(t) => [arg("a"), arg(t)],
    }
}

fn lease_args(leases: Vec<LeaseRef>, args: &mut Vec<Vec<u8>>) {
    for l in leases {
        args.push(l.id.as_str().as_bytes().to_vec());
        args.push(arg(l.token));
    }
}

fn ack_outcomes(v: Value) -> Result<Vec<AckOutcome>> {
    array(v)?
        .iter()
        .map(|v| match reply(v)? {
            Reply::Ok => Ok(AckOutcome::Acked),
            Reply::LeaseLost => Ok(AckOutcome::LeaseLost),
            Reply::Missing => Ok(AckOutcome::NotFound),
            r => Err(shape(&format!("ack: {r:?}"))),
        })
        .collect()
}

/// `{ code, value? }`: the code and the number after it (0 when absent).
fn coded(v: Value, what: &str) -> Result<(Reply, u64)> {
    let a = array(v)?;
    let code = reply(a.first().ok_or_else(|| shape(&format!("{what}: empty")))?)?;
    let value = a.get(1).map(int).transpose()?.unwrap_or(0);
    Ok((code, value as u64))
}

impl Backend for RedisBackend {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let k = Keys::new(queue);
        let mut args = Vec::with_capacity(1 + jobs.len() * 6);
        args.push(arg(jobs.len()));
        let mut ids = Vec::with_capacity(jobs.len());
        for mut job in jobs {
            let id = job.id.take().unwrap_or_else(JobId::generate);
            args.push(id.as_str().as_bytes().to_vec());
            args.extend(schedule_args(job.schedule));
            args.push(arg(job
                .max_attempts
                .unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS)));
            let (flags, tail) = record::tail(job);
            args.push(arg(flags));
            args.push(tail);
            ids.push(id);
        }
        let v = self.call(&scripts::ENQUEUE, &k, args).await?;
        let flat = array(v)?;
        if flat.len() != ids.len() * 2 {
            return Err(shape("enqueue: 2 values per job expected"));
        }
        ids.into_iter()
            .zip(flat.chunks(2))
            .map(|(id, pair)| {
                let created = match reply(&pair[0])? {
                    Reply::Ok => true,
                    Reply::Exists => false,
                    r => return Err(shape(&format!("enqueue: {r:?}"))),
                };
                Ok(Enqueued {
                    id,
                    created,
                    due_at_ms: int(&pair[1])? as u64,
                })
            })
            .collect()
    }

    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        let k = Keys::new(queue);
        let mut args = vec![
            arg(req.max.min(MAX_CLAIM)),
            arg(req.lease.as_millis()),
            arg(REAP_LIMIT),
            arg(req.acks.len()),
        ];
        lease_args(req.acks, &mut args);
        let v = self.call(&scripts::CLAIM, &k, args).await?;
        let [acks, jobs, next]: [Value; 3] = array(v)?
            .try_into()
            .map_err(|_| shape("claim: 3 values expected"))?;
        let next = int(&next)?;
        let flat = array(jobs)?;
        if flat.len() % 4 != 0 {
            return Err(shape("claim: 4 values per job expected"));
        }
        let mut out = Vec::with_capacity(flat.len() / 4);
        let mut it = flat.into_iter();
        while let (Some(id), Some(deadline), Some(lease_ms), Some(raw)) =
            (it.next(), it.next(), it.next(), it.next())
        {
            let r = record::decode(&bytes(raw)?)?;
            out.push(Job {
                id: job_id(id)?,
                queue: queue.clone(),
                payload: r.payload,
                attempt: r.attempt,
                max_attempts: r.max_attempts,
                due_at_ms: r.due_ms,
                created_at_ms: r.created_ms,
                lease_token: r.token,
                lease_deadline_ms: int(&deadline)? as u64,
                lease: Duration::from_millis(int(&lease_ms)? as u64),
                last_error: r.last_error,
            });
        }
        Ok(ClaimBatch {
            jobs: out,
            acks: ack_outcomes(acks)?,
            next_due_in: (next >= 0).then(|| Duration::from_micros(next as u64)),
        })
    }

    async fn ack(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<AckOutcome>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let k = Keys::new(queue);
        let mut args = Vec::with_capacity(leases.len() * 2);
        lease_args(leases, &mut args);
        ack_outcomes(self.call(&scripts::ACK, &k, args).await?)
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        let k = Keys::new(queue);
        let retry = nack.retry_in.map_or(-1, |d| d.as_millis() as i64);
        let args = vec![
            lease.id.as_str().as_bytes().to_vec(),
            arg(lease.token),
            truncate_error(&nack.error).as_bytes().to_vec(),
            arg(retry),
            arg(u8::from(nack.dead)),
            arg(rand::random::<f64>()),
        ];
        let v = self.call(&scripts::NACK, &k, args).await?;
        match coded(v, "nack")? {
            (Reply::Retry, at) => Ok(NackOutcome::Retrying { due_at_ms: at }),
            (Reply::Buried, at) => Ok(NackOutcome::Dead { failed_at_ms: at }),
            (r, _) => Err(r.refusal(&lease.id, JobState::Leased)),
        }
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, lease_len: Duration) -> Result<u64> {
        delayq::job::validate_lease(lease_len)?;
        let k = Keys::new(queue);
        let args = vec![
            lease.id.as_str().as_bytes().to_vec(),
            arg(lease.token),
            arg(lease_len.as_millis()),
        ];
        let v = self.call(&scripts::EXTEND, &k, args).await?;
        match coded(v, "extend")? {
            (Reply::Ok, deadline) => Ok(deadline),
            (r, _) => Err(r.refusal(&lease.id, JobState::Leased)),
        }
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        if leases.is_empty() {
            return Ok(());
        }
        let k = Keys::new(queue);
        let mut args = vec![arg(u8::from(undo))];
        lease_args(leases, &mut args);
        self.call(&scripts::RELEASE, &k, args).await?;
        Ok(())
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let k = Keys::new(queue);
        let v = self
            .call(&scripts::CANCEL, &k, vec![id.as_str().as_bytes().to_vec()])
            .await?;
        match reply(&v)? {
            Reply::Ok => Ok(CancelOutcome::Cancelled),
            Reply::Leased => Ok(CancelOutcome::Leased),
            Reply::Dead => Ok(CancelOutcome::Dead),
            Reply::Missing => Ok(CancelOutcome::NotFound),
            r => Err(shape(&format!("cancel: {r:?}"))),
        }
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, schedule: Schedule) -> Result<u64> {
        let k = Keys::new(queue);
        let [mode, t] = schedule_args(schedule);
        let args = vec![id.as_str().as_bytes().to_vec(), mode, t];
        let v = self.call(&scripts::RESCHEDULE, &k, args).await?;
        match coded(v, "reschedule")? {
            (Reply::Ok, due) => Ok(due),
            (r, _) => Err(r.refusal(id, JobState::Scheduled)),
        }
    }

    async fn wakeups(&self, queue: &QueueName) -> Result<Wakeups> {
        self.inner
            .hub
            .subscribe(&Keys::new(queue).wake, Duration::from_secs(2))
            .await
    }
}

impl Inspect for RedisBackend {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        let k = Keys::new(queue);
        let v = self
            .call(&scripts::GET, &k, vec![id.as_str().as_bytes().to_vec()])
            .await?;
        match v {
            Value::Nil => Ok(None),
            v => {
                let [st, extra, raw]: [Value; 3] = array(v)?
                    .try_into()
                    .map_err(|_| shape("get: 3 values expected"))?;
                job_info(id.clone(), state(int(&st)?)?, int(&extra)?, &bytes(raw)?).map(Some)
            }
        }
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let mut conn = self.inner.conn.clone();
        let mut names = std::collections::BTreeSet::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(crate::keys::SCAN_PATTERN)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .map_err(error::map)?;
            names.extend(keys.iter().filter_map(|k| crate::keys::queue_of(k)));
            if next == 0 {
                return Ok(names.into_iter().collect());
            }
            cursor = next;
        }
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let k = Keys::new(queue);
        let v = self.call(&scripts::STATS, &k, vec![]).await?;
        let a = array(v)?;
        let n = |i: usize| -> Result<u64> {
            a.get(i)
                .ok_or_else(|| shape("stats: 6 values expected"))
                .and_then(int)
                .map(|x| x as u64)
        };
        Ok(QueueStats {
            scheduled: n(0)?,
            due: n(1)?,
            due_next_minute: n(2)?,
            leased: n(3)?,
            dead: n(4)?,
            oldest_overdue_ms: n(5)?,
        })
    }

    async fn dead_list(&self, queue: &QueueName, from: usize, n: usize) -> Result<Vec<JobInfo>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let k = Keys::new(queue);
        let v = self
            .call(
                &scripts::DEAD_LIST,
                &k,
                vec![arg(from), arg(n.min(MAX_CLAIM))],
            )
            .await?;
        let flat = array(v)?;
        flat.chunks(3)
            .map(|c| match c {
                [id, at, raw] => job_info(
                    job_id(id.clone())?,
                    JobState::Dead,
                    int(at)?,
                    &bytes(raw.clone())?,
                ),
                _ => Err(shape("dead_list: 3 values per job expected")),
            })
            .collect()
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        let k = Keys::new(queue);
        let args = vec![arg("one"), id.as_str().as_bytes().to_vec()];
        match reply(&self.call(&scripts::DEAD_REQUEUE, &k, args).await?)? {
            Reply::Ok => Ok(()),
            r => Err(r.refusal(id, JobState::Dead)),
        }
    }

    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        let k = Keys::new(queue);
        let mut total = 0;
        loop {
            let v = self
                .call(
                    &scripts::DEAD_REQUEUE,
                    &k,
                    vec![arg("all"), arg(ADMIN_CHUNK)],
                )
                .await?;
            let n = int(&v)? as u64;
            total += n;
            if n < ADMIN_CHUNK as u64 {
                return Ok(total);
            }
        }
    }

    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        let k = Keys::new(queue);
        let mut total = 0;
        loop {
            let v = self
                .call(&scripts::DEAD_PURGE, &k, vec![arg(ADMIN_CHUNK)])
                .await?;
            let n = int(&v)? as u64;
            total += n;
            if n < ADMIN_CHUNK as u64 {
                return Ok(total);
            }
        }
    }
}
