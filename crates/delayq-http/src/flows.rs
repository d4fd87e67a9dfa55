//! A flow (`POST /v1/flows`): jobs of any queues that wait for one another, in one call —
//! parsed here, checked whole and written dependencies first by [`delayq::flow`].

use axum::Json;
use axum::extract::State;
use delayq::{Backend, Inspect, NewJob, QueueName};
use delayq_wire::{EnqueueRequest, FlowJobView, FlowRequest, FlowResponse};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::ApiJson;
use crate::state::AppState;

fn bad(text: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidFlow, text)
}

/// Enqueues a whole graph: refused whole (400 `invalid_flow` naming the job: a bad job, an id
/// twice, a job without `queue` or `id`, a dependency neither in the flow nor in the store,
/// a cycle) before anything is written, then written dependencies first.
#[utoipa::path(
    post, path = "/v1/flows", operation_id = "create_flow", tag = "jobs",
    request_body = FlowRequest,
    responses((status = 201, body = FlowResponse), (status = "4XX", body = ErrorBody))
)]
pub async fn create<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    ApiJson(body): ApiJson<FlowRequest>,
) -> Result<(axum::http::StatusCode, Json<FlowResponse>), ApiError> {
    let mut jobs: Vec<(QueueName, NewJob)> = Vec::with_capacity(body.jobs.len());
    for (i, v) in body.jobs.into_iter().enumerate() {
        let (q, job) = parse(i, v)?;
        st.config()
            .check_target(job.target.as_ref())
            .map_err(|e| bad(format!("job {i}: {}", e.message)))?;
        jobs.push((q, job));
    }
    let queues: Vec<QueueName> = jobs.iter().map(|(q, _)| q.clone()).collect();
    for q in &queues {
        st.note(q);
    }
    let out = delayq::flow::enqueue_flow(st.backend(), jobs).await?;
    let jobs = queues
        .into_iter()
        .zip(out)
        .map(|(q, e)| FlowJobView {
            queue: q.to_string(),
            enqueued: e.into(),
        })
        .collect();
    Ok((axum::http::StatusCode::CREATED, Json(FlowResponse { jobs })))
}

/// Job `i` of a flow: its `queue`, and the rest as an enqueue body.
pub fn parse(i: usize, mut v: serde_json::Value) -> Result<(QueueName, NewJob), ApiError> {
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
    Ok((q, job))
}
