//! The flow call of [`Client`]: jobs of any queues that wait for one another, in one call.

use delayq_wire::{FlowRequest, FlowResponse};
use reqwest::Method;

use crate::client::{Client, Repeat};
use crate::error::Result;

impl Client {
    /// Enqueues a flow (`POST /v1/flows`): jobs of any queues, each with its `queue` and
    /// `id`, waiting for one another through `depends_on`. Checked whole — a cycle, a
    /// dependency neither in the flow nor stored, or a bad job refuses it all
    /// (`invalid_flow`), nothing written — then written dependencies first. Safe to repeat:
    /// the ids find the jobs written the first time.
    pub async fn create_flow(&self, flow: &FlowRequest) -> Result<FlowResponse> {
        self.json(Method::POST, "/v1/flows", Some(flow), Repeat::Safe)
            .await
    }
}
