//! `Schedules` over a running server's API (`…/schedules`), for [`super::RemoteBackend`].

use base64::Engine;
use delayq::{Error, Firing, QueueName, Result, ScheduleInfo, ScheduleSpec, Schedules, Timing};
use serde_json::{Value, json};

use super::{RemoteBackend, enc, q, shape, target_of, u64_of};

/// A schedule as `GET …/schedules` shows it.
fn schedule_of(v: &Value) -> Result<ScheduleInfo> {
    let timing = match (v["cron"].as_str(), v["every_ms"].as_u64()) {
        (Some(cron), _) => Timing::Cron {
            cron: cron.to_owned(),
            tz: v["tz"].as_str().unwrap_or("UTC").to_owned(),
        },
        (None, Some(every_ms)) => Timing::Every { every_ms },
        _ => return Err(shape("schedule: cron or every_ms")),
    };
    let payload = match (&v["payload"], v["payload_b64"].as_str()) {
        (_, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| shape(&format!("schedule payload: {e}")))?,
        (Value::Null, None) => Vec::new(),
        (p, None) => p.to_string().into_bytes(),
    };
    Ok(ScheduleInfo {
        name: v["name"]
            .as_str()
            .ok_or_else(|| shape("schedule: name"))?
            .to_owned(),
        spec: ScheduleSpec {
            timing,
            payload,
            catch_up: v["catch_up"].as_str().unwrap_or("none").parse()?,
            max_attempts: v["max_attempts"].as_u64().map(|m| m as u32),
            backoff: serde_json::from_value(v["backoff"].clone()).ok(),
            lease_ms: v["lease_ms"].as_u64(),
            timeout_ms: v["timeout_ms"].as_u64(),
            target: target_of(&v["target"])?,
        },
        next_ms: u64_of(v, "next_fire")?,
    })
}

fn sp(queue: &QueueName, name: &str) -> String {
    format!("{}/schedules/{}", q(queue), enc(name))
}

/// Over HTTP the server keeps (and fires) the schedules: a stored schedule's next fire is the
/// one the server computes.
impl Schedules for RemoteBackend {
    async fn put_schedule(&self, queue: &QueueName, info: ScheduleInfo) -> Result<()> {
        let s = info.spec;
        let mut body = match s.timing {
            Timing::Cron { cron, tz } => json!({"cron": cron, "tz": tz}),
            Timing::Every { every_ms } => json!({"every_ms": every_ms}),
        };
        body["payload_b64"] = base64::engine::general_purpose::STANDARD
            .encode(&s.payload)
            .into();
        body["catch_up"] = serde_json::to_value(s.catch_up).unwrap_or(Value::Null);
        if let Some(m) = s.max_attempts {
            body["max_attempts"] = m.into();
        }
        if let Some(b) = s.backoff {
            body["backoff"] = serde_json::to_value(b).unwrap_or(Value::Null);
        }
        if let Some(l) = s.lease_ms {
            body["lease_ms"] = l.into();
        }
        if let Some(t) = &s.target {
            body["target"] = serde_json::to_value(t).expect("a target serializes");
        }
        if let Some(t) = s.timeout_ms {
            body["timeout_ms"] = t.into();
        }
        self.ok("PUT", &sp(queue, &info.name), Some(body), None)
            .await
            .map(|_| ())
    }

    async fn schedules(&self, queue: &QueueName) -> Result<Vec<ScheduleInfo>> {
        let v = self
            .ok("GET", &format!("{}/schedules", q(queue)), None, None)
            .await?;
        v["schedules"]
            .as_array()
            .ok_or_else(|| shape("schedules: an array"))?
            .iter()
            .map(schedule_of)
            .collect()
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &str) -> Result<bool> {
        match self.ok("DELETE", &sp(queue, name), None, None).await {
            Ok(_) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn scheduled_queues(&self) -> Result<Vec<QueueName>> {
        // The server ticks its own schedules.
        Ok(Vec::new())
    }

    /// The server plans every fire on its store's clock (a `PUT` is answered with the next
    /// fire it stored); this host's clock is only what the caller passes along.
    async fn clock_ms(&self) -> Result<u64> {
        Ok(delayq::job::system_now_ms())
    }

    async fn fire(&self, _queue: &QueueName, _name: &str, _f: Firing) -> Result<bool> {
        Err(Error::Backend(
            "a delayq serve fires its own schedules; there is nothing to fire over HTTP".into(),
        ))
    }
}
