//! `delayq enqueue`: one job from flags, or many from JSON lines on stdin.

use std::io::BufRead;
use std::time::Duration;

use crate::postgres::Served as AnyBackend;
use anyhow::Context;
use delayq::{Due, Enqueued, Expiry, InvalidInput, JobId, NewJob, Producer};
use serde::Deserialize;

use crate::args::{EnqueueArgs, parse_time};
use crate::output::format_ms;

/// One line of `--jsonl` input.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Line {
    id: Option<String>,
    payload: serde_json::Value,
    delay_ms: Option<f64>,
    run_at: Option<RunAt>,
    max_attempts: Option<u32>,
    key: Option<String>,
}

/// `run_at` as RFC 3339 text or ms since the epoch.
#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum RunAt {
    Ms(u64),
    Text(String),
}

/// A `--jsonl` line that is not a job, and why (exit code 2, as any bad input).
#[derive(Debug)]
pub(crate) struct BadLine(String);

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadLine {}

/// The fields of a line, with what each must be (for the error that names one).
const FIELDS: [(&str, &str); 6] = [
    ("id", "a string"),
    ("payload", "any JSON value"),
    ("delay_ms", "a number of ms"),
    ("run_at", "RFC 3339 text or ms since the epoch"),
    ("max_attempts", "a whole number 1-10000"),
    ("key", "a string of 1-128 bytes (the job's key)"),
];

impl Line {
    /// One line, or what is wrong with it: not JSON, not an object, an unknown field, or a
    /// field of the wrong type — naming the field and what it must be.
    fn parse(text: &str) -> Result<Self, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
        let obj = v.as_object().ok_or_else(|| {
            format!("expected a JSON object like {{\"id\": \"order-1\", \"payload\": {{}}, \"delay_ms\": 60000}}, got {v}")
        })?;
        for (k, value) in obj {
            let Some((_, what)) = FIELDS.iter().find(|(f, _)| f == k) else {
                let known: Vec<&str> = FIELDS.iter().map(|(f, _)| *f).collect();
                return Err(format!(
                    "unknown field `{k}` (the fields: {})",
                    known.join(", ")
                ));
            };
            let mut one = serde_json::Map::new();
            one.insert(k.clone(), value.clone());
            if *k != "payload" {
                one.insert("payload".into(), serde_json::Value::Null);
            }
            if serde_json::from_value::<Line>(serde_json::Value::Object(one)).is_err() {
                return Err(format!("field `{k}` must be {what}, got {value}"));
            }
        }
        if !obj.contains_key("payload") {
            return Err("field `payload` is missing (any JSON value)".into());
        }
        serde_json::from_value(v).map_err(|e| format!("invalid job: {e}"))
    }

    fn into_job(self) -> anyhow::Result<NewJob> {
        // A JSON string payload is stored as its text; anything else as compact JSON.
        let payload = match self.payload {
            serde_json::Value::String(s) => s.into_bytes(),
            v => serde_json::to_vec(&v)?,
        };
        let schedule = match (self.delay_ms, self.run_at) {
            (Some(_), Some(_)) => {
                return Err(InvalidInput::Delay("give delay_ms or run_at, not both".into()).into());
            }
            (Some(ms), None) => Due::delay_ms(ms)?,
            (None, Some(RunAt::Ms(ms))) => Due::At(ms),
            (None, Some(RunAt::Text(t))) => Due::at(parse_time(&t).map_err(InvalidInput::Delay)?)?,
            (None, None) => Due::Now,
        };
        // An id before the first try: a retry after an unknown outcome (503) cannot store
        // the job twice.
        let id = match self.id {
            Some(id) => JobId::new(id)?,
            None => JobId::generate(),
        };
        let mut job = NewJob::new(payload).due(schedule).id(id);
        if let Some(n) = self.max_attempts {
            job = job.max_attempts(n);
        }
        if let Some(k) = self.key {
            job = job.key(delayq::JobKey::new(k)?);
        }
        job.trace = env_trace();
        Ok(job)
    }
}

/// Runs `delayq enqueue`.
pub(crate) async fn run(p: &Producer<AnyBackend>, a: EnqueueArgs) -> anyhow::Result<()> {
    if a.jsonl {
        return run_jsonl(p, a.batch.clamp(1, delayq::limits::MAX_BATCH)).await;
    }
    let payload = match (a.payload, a.payload_file) {
        (Some(t), None) => t.into_bytes(),
        (None, Some(f)) => std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?,
        _ => {
            return Err(
                InvalidInput::Payload("give --payload TEXT or --payload-file FILE".into()).into(),
            );
        }
    };
    let id = a.id.unwrap_or_else(JobId::generate);
    let mut job = NewJob::new(payload).due(a.when.due()?).id(id);
    if let Some(n) = a.max_attempts {
        job = job.max_attempts(n);
    }
    if let Some(t) = a.timeout {
        job = job.timeout(t);
    }
    if let Some(at) = a.expires_at
        && let Due::At(ms) = Due::at(at)?
    {
        job = job.expires(Expiry::At(ms));
    }
    if let Some(after) = a.expire_after {
        job = job.expires(Expiry::AfterDue(after));
    }
    if a.replace {
        job = job.replace();
    }
    job.priority = a.priority;
    job.key = a.key.clone();
    if !a.after.is_empty() {
        let on = a
            .after
            .iter()
            .map(|d| {
                let (q, id) = d.split_once('/').unwrap_or(("", d));
                Ok(delayq::DepRef {
                    queue: if q.is_empty() {
                        p.queue().clone()
                    } else {
                        delayq::QueueName::new(q)?
                    },
                    id: JobId::new(id)?,
                })
            })
            .collect::<Result<Vec<_>, InvalidInput>>()?;
        job = job.depends_on(on);
    }
    if a.keep_done.is_some() || a.dedupe.is_some() {
        job.retention = Some(delayq::Retention {
            keep_done_ms: a.keep_done.map_or(0, |d| d.as_millis() as u64),
            dedupe_ms: a.dedupe.map_or(0, |d| d.as_millis() as u64),
        });
    }
    job.target = a.target.target()?;
    job.trace = env_trace();
    print(&p.enqueue(job).await?);
    Ok(())
}

/// The trace context of the environment (`TRACEPARENT`, `TRACESTATE`: the OpenTelemetry
/// environment carrier a traced script or `delayq worker --exec` hands on); an invalid one is
/// ignored, as propagators do.
pub(crate) fn env_trace() -> Option<delayq::TraceContext> {
    let tp = std::env::var("TRACEPARENT").ok();
    let ts = std::env::var("TRACESTATE").ok();
    delayq::TraceContext::from_headers(tp.as_deref(), ts.as_deref())
}

fn print(e: &Enqueued) {
    let what = match (e.created, e.replaced, e.existing) {
        (true, _, _) => "created".to_owned(),
        (_, true, _) => "replaced".to_owned(),
        (_, _, Some(state)) => format!("exists, {state}: not replaced"),
        _ => "exists".to_owned(),
    };
    println!("{}\t{what}\tdue {}", e.id, format_ms(e.due_at_ms));
}

/// `delayq flow create`: the flow on stdin (`{"jobs": [...]}`), checked whole, then written
/// dependencies first; one line per job, in the order given.
pub(crate) async fn flow(b: &AnyBackend) -> anyhow::Result<u8> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
        .context("reading stdin")?;
    let req: delayq_http::model::FlowRequest =
        serde_json::from_str(&text).map_err(|e| BadLine(format!("the flow: {e}")))?;
    let mut jobs = Vec::with_capacity(req.jobs.len());
    for (i, v) in req.jobs.into_iter().enumerate() {
        jobs.push(delayq_http::flows::parse(i, v).map_err(|e| BadLine(e.message))?);
    }
    let queues: Vec<delayq::QueueName> = jobs.iter().map(|(q, _)| q.clone()).collect();
    for (q, e) in queues
        .iter()
        .zip(delayq::flow::enqueue_flow(b, jobs).await?)
    {
        print!("{q}/");
        print(&e);
    }
    Ok(0)
}

/// Reads every line first so that a bad line refuses the whole input before anything is
/// written, then enqueues in batches.
async fn run_jsonl(p: &Producer<AnyBackend>, batch: usize) -> anyhow::Result<()> {
    let jobs = read_jsonl()?;
    let (mut created, mut existing) = (0u64, 0u64);
    for chunk in jobs.chunks(batch) {
        let out = retry(|| p.enqueue_batch(chunk.to_vec())).await?;
        for e in &out {
            if e.created {
                created += 1;
            } else {
                existing += 1;
            }
        }
    }
    println!("created {created}\texisting {existing}");
    Ok(())
}

/// The jobs of the JSON lines on stdin, each checked: a bad line refuses the whole input.
pub(crate) fn read_jsonl() -> anyhow::Result<Vec<NewJob>> {
    let mut jobs = Vec::new();
    for (i, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.context("reading stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed = Line::parse(&line).map_err(|e| BadLine(format!("line {}: {e}", i + 1)))?;
        let job = parsed
            .into_job()
            .with_context(|| format!("line {}: invalid job", i + 1))?;
        job.validate(
            delayq::limits::DEFAULT_MAX_PAYLOAD_BYTES,
            delayq::job::system_now_ms(),
        )
        .with_context(|| format!("line {}: invalid job", i + 1))?;
        jobs.push(job);
    }
    Ok(jobs)
}

/// Retries a call that is safe to repeat while the backend is unavailable (a few seconds).
async fn retry<T, F, Fut>(mut f: F) -> delayq::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = delayq::Result<T>>,
{
    let mut delay = Duration::from_millis(50);
    for _ in 0..8 {
        match f().await {
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            other => return other,
        }
    }
    f().await
}
