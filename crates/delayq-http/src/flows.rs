//! A flow (`POST /v1/flows`): jobs of any queues that wait for one another, checked whole —
//! every job valid, every dependency in the flow or in the store, no cycle — before anything
//! is written, then enqueued dependencies first, so each dependent registers with jobs that
//! exist. Ids make a repeated flow harmless: it finds its jobs and writes nothing twice.

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::State;
use delayq::{Backend, DepRef, Inspect, NewJob, QueueName};
use delayq_wire::{EnqueueRequest, FlowJobView, FlowRequest, FlowResponse};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::ApiJson;
use crate::state::AppState;

/// Most jobs one flow holds.
const MAX_FLOW: usize = delayq::limits::MAX_BATCH;

fn bad(text: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidFlow, text)
}

/// Enqueues a whole graph: all or nothing refused (400 `invalid_flow` naming the job: a bad
/// job, an id twice, a job without `queue` or `id`, a dependency neither in the flow nor in
/// the store, a cycle), then written dependencies first.
#[utoipa::path(
    post, path = "/v1/flows", operation_id = "create_flow", tag = "jobs",
    request_body = FlowRequest,
    responses((status = 201, body = FlowResponse), (status = "4XX", body = ErrorBody))
)]
pub async fn create<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    ApiJson(body): ApiJson<FlowRequest>,
) -> Result<(axum::http::StatusCode, Json<FlowResponse>), ApiError> {
    if body.jobs.is_empty() || body.jobs.len() > MAX_FLOW {
        return Err(bad(format!(
            "a flow holds 1-{MAX_FLOW} jobs, not {}",
            body.jobs.len()
        )));
    }
    // Each job: its queue, its id, the enqueue body's checks.
    let mut jobs: Vec<(QueueName, NewJob)> = Vec::with_capacity(body.jobs.len());
    let mut at: HashMap<DepRef, usize> = HashMap::new();
    let now = delayq::job::system_now_ms();
    for (i, mut v) in body.jobs.into_iter().enumerate() {
        let name = |q: &str, id: &str| format!("job {i} ({q}/{id})");
        let queue = v
            .as_object_mut()
            .and_then(|o| o.remove("queue"))
            .and_then(|q| q.as_str().map(str::to_owned))
            .ok_or_else(|| bad(format!("job {i}: give its queue")))?;
        let q = QueueName::new(&queue).map_err(|e| bad(format!("job {i}: {e}")))?;
        let req: EnqueueRequest =
            serde_json::from_value(v).map_err(|e| bad(format!("job {i}: {e}")))?;
        let job = req
            .into_job(&q)
            .map_err(|e| bad(format!("job {i}: {}", e.message)))?;
        let Some(id) = job.id.clone() else {
            return Err(bad(format!("job {i}: a flow's job needs its id")));
        };
        let me = name(q.as_str(), id.as_str());
        job.validate(delayq::limits::DEFAULT_MAX_PAYLOAD_BYTES, now)
            .map_err(|e| bad(format!("{me}: {e}")))?;
        if let Some(d) = &job.depends {
            d.check(&q, Some(&id))
                .map_err(|e| bad(format!("{me}: {e}")))?;
        }
        st.config()
            .check_target(job.target.as_ref())
            .map_err(|e| bad(format!("{me}: {}", e.message)))?;
        let key = DepRef {
            queue: q.clone(),
            id,
        };
        if at.insert(key, i).is_some() {
            return Err(bad(format!("{me} is in the flow twice")));
        }
        jobs.push((q, job));
    }
    // Every dependency in the flow or in the store; the flow's edges for the order.
    let mut waits_for: Vec<Vec<usize>> = vec![Vec::new(); jobs.len()];
    for (i, (q, job)) in jobs.iter().enumerate() {
        for d in job.depends.iter().flat_map(|d| &d.on) {
            match at.get(d) {
                Some(&j) => waits_for[i].push(j),
                None => {
                    if st.backend().get(&d.queue, &d.id).await?.is_none() {
                        let id = job.id.as_ref().map_or("", |i| i.as_str());
                        return Err(bad(format!(
                            "job {i} ({q}/{id}) depends on {d}, neither in the flow nor in the store"
                        )));
                    }
                }
            }
        }
    }
    let order = delayq::deps::topological(&waits_for).map_err(|i| {
        let (q, job) = &jobs[i];
        let id = job.id.as_ref().map_or("", |i| i.as_str());
        bad(format!("job {i} ({q}/{id}) is in a cycle of dependencies"))
    })?;
    // Written dependencies first.
    let mut slots: Vec<Option<(QueueName, NewJob)>> = jobs.into_iter().map(Some).collect();
    let mut out: BTreeMap<usize, FlowJobView> = BTreeMap::new();
    for i in order {
        let Some((q, job)) = slots[i].take() else {
            continue;
        };
        st.note(&q);
        let e = st.producer(&q).enqueue(job).await?;
        out.insert(
            i,
            FlowJobView {
                queue: q.to_string(),
                enqueued: e.into(),
            },
        );
    }
    Ok((
        axum::http::StatusCode::CREATED,
        Json(FlowResponse {
            jobs: out.into_values().collect(),
        }),
    ))
}
