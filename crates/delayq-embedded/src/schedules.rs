//! [`Schedules`] on the embedded store (the `schedules` table): a fire is one transaction that
//! moves the next fire on (only while it is the one the ticker read) and inserts the fires'
//! jobs.

use delayq::schedule::{Firing, ScheduleInfo, ScheduleSpec, Schedules, check_name, fire_id};
use delayq::{Counts, Due, QueueName, Result};
use rusqlite::params;

use crate::backend::EmbeddedBackend;
use crate::enqueue::insert;
use crate::store::sql;

impl Schedules for EmbeddedBackend {
    async fn put_schedule(&self, queue: &QueueName, info: ScheduleInfo) -> Result<()> {
        check_name(&info.name)?;
        let json = info.spec.to_json();
        let q = queue.to_string();
        let push = info.spec.target.is_some();
        self.exec(move |c, _| {
            // A schedule's fires must fit the queue's delivery, as every enqueue must.
            crate::push::delivery(c, &q)?.admits(&q, push)?;
            c.execute(
                "INSERT INTO schedules (queue, name, spec, next_ms) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (queue, name) DO UPDATE SET spec = excluded.spec, \
                 next_ms = excluded.next_ms",
                params![q, info.name, json, info.next_ms as i64],
            )
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn schedules(&self, queue: &QueueName) -> Result<Vec<ScheduleInfo>> {
        let q = queue.to_string();
        let rows: Vec<(String, String, i64)> = self
            .exec(move |c, _| {
                c.prepare_cached(
                    "SELECT name, spec, next_ms FROM schedules WHERE queue = ?1 ORDER BY name",
                )
                .map_err(sql)?
                .query_map(params![q], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(sql)?
                .collect::<rusqlite::Result<_>>()
                .map_err(sql)
            })
            .await?;
        rows.into_iter()
            .map(|(name, spec, next)| {
                Ok(ScheduleInfo {
                    name,
                    spec: ScheduleSpec::from_json(&spec)?,
                    next_ms: next as u64,
                })
            })
            .collect()
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &str) -> Result<bool> {
        let (q, name) = (queue.to_string(), name.to_owned());
        self.exec(move |c, _| {
            let n = c
                .execute(
                    "DELETE FROM schedules WHERE queue = ?1 AND name = ?2",
                    params![q, name],
                )
                .map_err(sql)?;
            Ok(n > 0)
        })
        .await
    }

    async fn clock_ms(&self) -> Result<u64> {
        Ok(self.clock_us() / 1000)
    }

    async fn scheduled_queues(&self) -> Result<Vec<QueueName>> {
        self.exec(|c, _| {
            crate::rows::queue_names(c, "SELECT DISTINCT queue FROM schedules ORDER BY queue")
        })
        .await
    }

    async fn fire(&self, queue: &QueueName, name: &str, f: Firing) -> Result<bool> {
        check_name(name)?;
        let (q, name) = (queue.to_string(), name.to_owned());
        let jobs: Vec<_> = f
            .fires
            .iter()
            .map(|&t| f.job.clone().id(fire_id(&name, t)).due(Due::At(t)))
            .collect();
        let (fired, created, wake) = self
            .exec(move |c, now| {
                let moved = c
                    .execute(
                        "UPDATE schedules SET next_ms = ?4 WHERE queue = ?1 AND name = ?2 \
                         AND next_ms = ?3",
                        params![q, name, f.expected as i64, f.next as i64],
                    )
                    .map_err(sql)?;
                if moved == 0 {
                    return Ok((false, 0, false));
                }
                // Due at its fire time; a past one is due now (the fire time is in the id).
                let (out, wake) = insert(c, &q, jobs, now.ms())?;
                let created = out.iter().filter(|e| e.created).count() as u64;
                Ok((true, created, wake))
            })
            .await?;
        if wake {
            self.wake(queue);
        }
        self.count(
            queue,
            &Counts {
                enqueued: created,
                ..Counts::default()
            },
        );
        Ok(fired)
    }
}
