//! The request and response bodies of delayq's HTTP API (`/v1`), written once: the server
//! (`delayq-http`) answers with them, the Rust client (`delayq-client`) sends and reads them,
//! and the OpenAPI document (`/openapi.json`) is derived from them. A field changed here is a
//! compile error in every Rust user of it.
//!
//! Each type converts to and from the core's (`delayq`) where one exists: a request body
//! into what the engine takes (refusing a bad shape with an [`Invalid`] that carries its
//! [`ErrorCode`]), an engine result into the answer, and the answer back into the core type on
//! the client's side. Payloads travel as `payload` (raw JSON, byte for byte) or
//! `payload_b64` ([`payload`]).

pub mod batches;
pub mod error;
pub mod fields;
pub mod flows;
pub mod jobs;
pub mod keys;
pub mod lease;
pub mod payload;
pub mod queues;
pub mod schedules;
pub mod schema;

pub use batches::{
    BatchAddedView, BatchJobsRequest, BatchList, BatchQuery, BatchRequest, BatchView, CallbackBody,
};
pub use error::{ErrorBody, ErrorCode, Invalid};
pub use fields::{Carried, ClaimPoll, JobFacts, RunOptions, ScheduleTiming};
pub use flows::{FlowJobView, FlowRequest, FlowResponse};
pub use jobs::{
    CancelQuery, Deliveries, DeliveryView, DepSpec, DepView, EnqueueRequest, EnqueueResponse,
    JobList, JobRefView, JobView, ListQuery, Outcome, OutcomeKind, Page, RescheduleRequest,
    StateQuery, TargetView,
};
pub use keys::{
    KeyCancelRequest, KeyCancelView, KeyHoldView, KeyJobsQuery, KeyList, KeyPauseRequest, KeyQuery,
    KeyRescheduleRequest, KeyRescheduleView, KeyView,
};
pub use lease::{
    AckBatchRequest, AckBatchResponse, AckRequest, CancelledRequest, CancelledResponse, ClaimAck,
    ClaimManyRequest, ClaimRequest, ClaimResponse, ClaimedJob, ExtendRequest, LeaseOf, NackRequest,
    QueueAck, QueueClaim, ReleaseRequest,
};
pub use queues::{
    Action, CountsView, DepthSample, QueueView, RateView, SeriesView, SettingsPatch, SettingsView,
    Whoami,
};
pub use schedules::{ScheduleBody, ScheduleList, ScheduleView};
