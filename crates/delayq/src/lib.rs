//! # delayq — jobs that run at a future time
//!
//! The core crate: the job model, the [`Backend`] and [`Inspect`] traits every store
//! implements, the [`Producer`] and the [`Consumer`] engine. It knows nothing of Redis or
//! HTTP; `delayq-redis` is the production backend.
//!
//! ```no_run
//! # async fn demo<B: delayq::Backend + delayq::Inspect>(backend: B) -> Result<(), delayq::Error> {
//! use std::time::Duration;
//! use delayq::{Consumer, ConsumerOptions, Failure, Job, NewJob, Producer, QueueName};
//!
//! let queue = QueueName::new("orders")?;
//! let producer = Producer::new(backend.clone(), queue.clone());
//! producer
//!     .enqueue(NewJob::new(b"order-42".to_vec()).delay(Duration::from_secs(1800)))
//!     .await?;
//!
//! let consumer = Consumer::new(backend, queue, ConsumerOptions::default())?;
//! consumer
//!     .run(
//!         |job: Job| async move {
//!             println!("cancel order {}", String::from_utf8_lossy(&job.payload));
//!             Ok::<(), Failure>(())
//!         },
//!         async { tokio::signal::ctrl_c().await.ok(); },
//!     )
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Parts: [`name`] (validated names), [`job`] (the model), [`backoff`], [`limits`],
//! [`backend`] (the traits), [`producer`], [`handler`], [`consumer`], [`wait`], [`clock`],
//! [`instrumented`] and [`telemetry`] (metrics), [`schedule`] and [`ticker`] (cron and interval schedules; a job's own due time is [`Due`]), [`settings`] (per-queue settings),
//! [`target`] and [`delivery`] (HTTP push targets and the log of their requests), [`trace`]
//! (the W3C trace context a job carries).

pub mod backend;
pub mod backoff;
pub mod batch;
pub mod cancellation;
pub mod clock;
pub mod consumer;
pub mod delivery;
pub mod deps;
pub mod error;
pub mod flow;
pub mod handler;
pub mod instrumented;
pub mod job;
pub mod key_jobs;
pub mod keyed;
pub mod limits;
pub mod listing;
pub mod name;
pub mod otel;
pub mod producer;
pub mod rfc3339;
pub mod schedule;
pub mod series;
pub mod settings;
pub mod target;
pub mod telemetry;
pub mod ticker;
pub mod trace;
pub mod wait;

pub use backend::{Backend, ClaimBatch, ClaimOverRequest, ClaimRequest, Inspect, Wakeups};
pub use backoff::Backoff;
pub use batch::{BatchAdd, BatchId, BatchInfo, BatchPut, BatchSpec, BatchState, Batches, Callback};
pub use cancellation::Cancellation;
pub use clock::{Clock, OffsetClock, SharedClock, SystemClock, TestClock};
pub use consumer::{Consumer, ConsumerOptions, QueueOrder, RunReport};
pub use delivery::{Delivery, DeliveryLog};
pub use deps::{DepOutcome, DepRef, DepStatus, Dependencies, OnDependencyFailure};
pub use error::{Error, InvalidInput, Result};
pub use handler::{Completion, Failure, Handler};
pub use instrumented::Instrumented;
pub use job::{
    Ack, AckOutcome, CancelOutcome, DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY, Due, Enqueued, Expiry,
    Job, JobInfo, JobState, LeaseRef, Nack, NackOutcome, NewJob, OnConflict, QueueStats, Retention,
};
pub use key_jobs::{KeyCancelled, KeyJobsPage, KeyJobsRequest, KeyMove};
pub use keyed::{KeyHold, KeyStats};
pub use listing::{Cursor, Found, JobPage, ListRequest, ListState};
pub use name::{JobId, JobKey, QueueName, placement_hash};
pub use otel::TraceMode;
pub use producer::Producer;
pub use schedule::{CatchUp, Firing, ScheduleInfo, ScheduleSpec, Schedules, Timing};
pub use series::{Counts, QueueSeries};
pub use settings::{DeliveryMode, DeliveryRule, QueueSettings, Rate, Throttle};
pub use target::Target;
pub use ticker::Ticker;
pub use trace::TraceContext;
