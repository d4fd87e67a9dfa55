//! `Batches` over a running server's API (`…/batches`), for [`super::RemoteBackend`]: the
//! server keeps the batches and enqueues their callbacks.

use delayq::batch::{BatchAdded, BatchInfo};
use delayq::{BatchAdd, BatchId, BatchPut, Batches, Enqueued, QueueName, Result};
use delayq_wire::{
    BatchAddedView, BatchJobsRequest, BatchRequest, BatchView, CallbackBody, EnqueueRequest,
    ErrorCode,
};

use super::{RemoteBackend, core, decoded};

/// `None` for the server's `not_found`.
fn found<T>(r: std::result::Result<T, crate::Error>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(None),
        Err(e) => Err(core(None)(e)),
    }
}

fn info(v: BatchView) -> Result<BatchInfo> {
    v.into_info().map_err(decoded)
}

fn added(v: BatchAddedView) -> Result<BatchAdded> {
    Ok(BatchAdded {
        id: BatchId::new(v.batch.id).map_err(|e| decoded(e.into()))?,
        jobs: v
            .jobs
            .into_iter()
            .map(|e| Enqueued::try_from(e).map_err(decoded))
            .collect::<Result<_>>()?,
    })
}

impl Batches for RemoteBackend {
    async fn put_batch(&self, queue: &QueueName, put: BatchPut) -> Result<BatchAdded> {
        let req = BatchRequest {
            id: put.id.map(String::from),
            jobs: put.jobs.into_iter().map(EnqueueRequest::from_job).collect(),
            on_complete: put.spec.on_complete.map(CallbackBody::from),
            on_success: put.spec.on_success.map(CallbackBody::from),
            open: put.open,
            include_results: put.spec.include_results,
        };
        let v = self
            .client
            .create_batch(queue.as_str(), &req)
            .await
            .map_err(core(None))?;
        added(v)
    }

    async fn add_to_batch(&self, queue: &QueueName, add: BatchAdd) -> Result<Option<BatchAdded>> {
        let BatchAdd { id, jobs, close } = add;
        let req = BatchJobsRequest {
            jobs: jobs.into_iter().map(EnqueueRequest::from_job).collect(),
            close,
        };
        let r = self
            .client
            .add_to_batch(queue.as_str(), id.as_str(), &req)
            .await;
        found(r)?.map(added).transpose()
    }

    async fn close_batch(&self, queue: &QueueName, id: &BatchId) -> Result<Option<BatchInfo>> {
        let r = self.client.close_batch(queue.as_str(), id.as_str()).await;
        found(r)?.map(info).transpose()
    }

    async fn batch(&self, queue: &QueueName, id: &BatchId) -> Result<Option<BatchInfo>> {
        let r = self.client.batch(queue.as_str(), id.as_str()).await;
        found(r)?.map(info).transpose()
    }

    async fn open_batches(&self, queue: &QueueName, limit: usize) -> Result<Vec<BatchInfo>> {
        self.client
            .batches(queue.as_str(), Some(limit.clamp(1, 1000)))
            .await
            .map_err(core(None))?
            .batches
            .into_iter()
            .map(info)
            .collect()
    }

    /// The server finishes its batches itself (in the step that ends a batch's last job, or
    /// its sweep every half second on Redis): nothing to do from here.
    async fn finish_batches(&self, _thorough: bool) -> Result<usize> {
        Ok(0)
    }
}
