//! What the examples share: the benchmark workloads' job (docs/BENCHMARKS.md).

use std::time::Duration;

use delayq::{Due, JobId, NewJob};

/// Job `i`: the workloads' 100-byte payload, its order id as the job id, due after `delay_ms`.
pub(crate) fn job_in(i: usize, delay_ms: u64) -> NewJob {
    let id = format!("1{i:019}");
    let payload = format!(
        r#"{{"orderId":"{id}","action":"cancel","pad":"{}"}}"#,
        "x".repeat(39)
    );
    NewJob::new(payload.into_bytes())
        .id(JobId::new(id).unwrap())
        .due(Due::Delay(Duration::from_millis(delay_ms)))
}
