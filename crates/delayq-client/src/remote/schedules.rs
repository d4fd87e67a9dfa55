//! `Schedules` over a running server's API (`…/schedules`), for [`super::RemoteBackend`]: the
//! server keeps and fires them.

use delayq::{Error, Firing, QueueName, Result, ScheduleInfo, Schedules};
use delayq_wire::ScheduleBody;

use super::{RemoteBackend, core, decoded};

/// Over HTTP the server keeps (and fires) the schedules: a stored schedule's next fire is the
/// one the server computes.
impl Schedules for RemoteBackend {
    async fn put_schedule(&self, queue: &QueueName, info: ScheduleInfo) -> Result<()> {
        let body = ScheduleBody::from_spec(info.spec);
        self.client
            .put_schedule(queue.as_str(), &info.name, &body)
            .await
            .map(drop)
            .map_err(core(None))
    }

    async fn schedules(&self, queue: &QueueName) -> Result<Vec<ScheduleInfo>> {
        self.client
            .list_schedules(queue.as_str())
            .await
            .map_err(core(None))?
            .into_iter()
            .map(|s| ScheduleInfo::try_from(s).map_err(decoded))
            .collect()
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &str) -> Result<bool> {
        self.client
            .delete_schedule(queue.as_str(), name)
            .await
            .map_err(core(None))
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
