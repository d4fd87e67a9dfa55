//! The request and response bodies of the API: the wire crate's types ([`delayq_wire`]),
//! named here as the handlers use them.

pub use delayq_wire::{
    AckBatchRequest, AckBatchResponse, AckRequest, ClaimAck, ClaimRequest, ClaimResponse,
    ClaimedJob, EnqueueRequest, EnqueueResponse, ExtendRequest, FlowRequest, JobView, KeyView,
    NackRequest, Outcome, OutcomeKind, Page, QueueView, RateView, ReleaseRequest,
    RescheduleRequest, SettingsPatch, SettingsView,
};
