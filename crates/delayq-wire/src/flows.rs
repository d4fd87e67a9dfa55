//! A flow over HTTP (`POST /v1/flows`): jobs of any queues that wait for one another,
//! enqueued in one call.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::jobs::EnqueueResponse;

/// `POST /v1/flows`: the jobs, each an enqueue body (`POST /v1/queues/{q}/jobs`) with its
/// `queue` and an `id`; `depends_on` names jobs of the flow or of the store.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct FlowRequest {
    /// The jobs (1-10,000): `{queue, id, payload, depends_on?, …}` — any enqueue field.
    #[schema(value_type = Vec<Object>)]
    pub jobs: Vec<serde_json::Value>,
}

/// One job of a flow, as its enqueue answered.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
pub struct FlowJobView {
    /// Its queue.
    pub queue: String,
    /// The enqueue's answer (`created: false`: the id existed, as a repeated flow finds it).
    #[serde(flatten)]
    pub enqueued: EnqueueResponse,
}

/// What a flow enqueued, in the order given.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
pub struct FlowResponse {
    /// One answer per job.
    pub jobs: Vec<FlowJobView>,
}
