//! `delayq get | cancel | reschedule | stats | dead …`: the admin commands.

use crate::postgres::Served as AnyBackend;
use delayq::{
    Backend, CancelOutcome, Due, Inspect, JobId, Producer, QueueName, QueueSettings, Rate,
    ScheduleSpec, Schedules, Timing,
};

use crate::args::{DeadCommand, JobsCommand, QueueCommand, ScheduleCommand};
use crate::output::{format_ms, job_json, job_text};

/// `delayq get ID`: exits with 3 when the job does not exist.
pub(crate) async fn get(p: &Producer<AnyBackend>, id: &JobId, json: bool) -> anyhow::Result<u8> {
    match p.get(id).await? {
        Some(j) if json => println!("{}", job_json(&j)),
        Some(j) => println!("{}", job_text(&j)),
        None if json => {
            let e =
                serde_json::json!({"code": "not_found", "message": format!("job {id} not found")});
            eprintln!("{e}");
            return Ok(3);
        }
        None => {
            eprintln!("job {id} not found");
            return Ok(3);
        }
    }
    Ok(0)
}

/// `delayq cancel ID [--running]`: exit 0 only when this call cancelled the job.
pub(crate) async fn cancel(
    p: &Producer<AnyBackend>,
    id: &JobId,
    running: bool,
) -> anyhow::Result<u8> {
    let out = if running {
        p.cancel_running(id).await?
    } else {
        p.cancel(id).await?
    };
    let (text, code) = match out {
        CancelOutcome::Cancelled => ("cancelled", 0),
        CancelOutcome::Cancelling => ("cancelling: its worker is told to stop it", 0),
        CancelOutcome::Leased => (
            "not cancelled: a consumer is running it (--running cancels it)",
            4,
        ),
        CancelOutcome::Dead => ("not cancelled: it is dead-lettered", 4),
        CancelOutcome::NotFound => ("not found (done, cancelled or never enqueued)", 3),
    };
    println!("{id}\t{text}");
    Ok(code)
}

/// `delayq reschedule ID`.
pub(crate) async fn reschedule(p: &Producer<AnyBackend>, id: &JobId, s: Due) -> anyhow::Result<u8> {
    let due = p.reschedule(id, s).await?;
    println!("{id}\tdue {}", format_ms(due));
    Ok(0)
}

/// `delayq stats`.
pub(crate) async fn stats(p: &Producer<AnyBackend>, json: bool, all: bool) -> anyhow::Result<u8> {
    let queues = if all {
        p.backend().queues().await?
    } else {
        vec![p.queue().clone()]
    };
    let mut rows = Vec::with_capacity(queues.len());
    for q in queues {
        let s = p.backend().stats(&q).await?;
        rows.push((q, s));
    }
    if json {
        if all {
            let v: Vec<serde_json::Value> = rows
                .iter()
                .map(|(q, s)| {
                    let mut v = serde_json::to_value(s).unwrap_or_default();
                    v["queue"] = q.as_str().into();
                    v
                })
                .collect();
            println!("{}", serde_json::to_string(&v)?);
        } else if let Some((_, s)) = rows.first() {
            println!("{}", serde_json::to_string(s)?);
        }
        return Ok(0);
    }
    let header = [
        "queue",
        "scheduled",
        "due now",
        "due next min",
        "leased",
        "dead",
        "oldest overdue",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|(q, s)| {
            [
                q.to_string(),
                s.scheduled.to_string(),
                s.due.to_string(),
                s.due_next_minute.to_string(),
                s.leased.to_string(),
                s.dead.to_string(),
                format!("{:.1} s", s.oldest_overdue_ms as f64 / 1000.0),
            ]
        })
        .collect();
    let width: Vec<usize> = (0..7)
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |r: &[&str]| {
        r.iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = width[i])
                } else {
                    format!("{c:>w$}", w = width[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", line(&header));
    for r in &cells {
        println!(
            "{}",
            line(&r.iter().map(String::as_str).collect::<Vec<_>>())
        );
    }
    Ok(0)
}

/// `delayq dead …`.
pub(crate) async fn dead<B: Backend + Inspect>(
    b: &B,
    q: &QueueName,
    cmd: DeadCommand,
) -> anyhow::Result<u8> {
    match cmd {
        DeadCommand::List {
            offset,
            limit,
            json,
        } => {
            let dead = delayq::ListState::Dead;
            let jobs = delayq::backend::skip_take(b, q, dead, offset, limit).await?;
            if jobs.is_empty() && !json {
                eprintln!("no dead jobs in queue {q}{}", from_offset(offset));
            }
            for j in jobs {
                if json {
                    println!("{}", job_json(&j));
                } else {
                    println!(
                        "{}\tattempts {}\tfailed {}\t{}",
                        j.id,
                        j.attempt,
                        j.failed_at_ms.map(format_ms).unwrap_or_default(),
                        crate::output::one_line(&j.last_error.unwrap_or_default())
                    );
                }
            }
        }
        DeadCommand::Requeue { id: Some(id), .. } => {
            b.dead_requeue(q, &id).await?;
            println!("{id}\trequeued");
        }
        DeadCommand::Requeue { id: None, .. } => {
            println!("requeued {}", b.dead_requeue_all(q).await?);
        }
        DeadCommand::Purge => println!("purged {}", b.dead_purge(q).await?),
    }
    Ok(0)
}

/// " from offset N" for a listing that skipped some.
fn from_offset(offset: usize) -> String {
    if offset == 0 {
        String::new()
    } else {
        format!(" from offset {offset}")
    }
}

/// A window width in ms as the settings keep it (saturated: a width past the range is
/// refused by their check, not wrapped into it).
fn window_ms(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// A queue's settings on one line: `shards N[\trate P/s burst B][\tmax in flight M]`.
fn settings_line(s: &QueueSettings) -> String {
    let mut out = format!("{}\tshards {}", s.delivery.as_str(), s.shards);
    if s.lane {
        out.push_str("\tlane");
        if s.lane_window_ms > 0 {
            out.push_str(&format!(" windows {} ms", s.lane_window_ms));
        }
    }
    if let Some(r) = s.rate {
        out.push_str(&format!("\trate {}/s burst {}", r.per_s, r.burst));
    }
    if let Some(m) = s.max_in_flight {
        out.push_str(&format!("\tmax in flight {m}"));
    }
    if s.retention.keep_done_ms > 0 {
        out.push_str(&format!("\tkeep done {} ms", s.retention.keep_done_ms));
    }
    if s.retention.dedupe_ms > 0 {
        out.push_str(&format!("\tdedupe {} ms", s.retention.dedupe_ms));
    }
    if let Some(t) = &s.target {
        out.push_str(&format!("\ttarget {} {}", t.method, t.url));
    }
    if let Some(m) = s.key_max_in_flight {
        out.push_str(&format!("\tkey max in flight {m}"));
    }
    if let Some(r) = s.key_rate {
        out.push_str(&format!("\tkey rate {}/s burst {}", r.per_s, r.burst));
    }
    if s.pause_key_on_429 {
        out.push_str("\tpause key on 429");
    }
    if let Some(c) = s.cold_after_ms {
        out.push_str(&format!(
            "\tcold after {}",
            humantime::format_duration(std::time::Duration::from_millis(c))
        ));
    }
    out
}

/// `delayq queue create|set|show|pause|resume`.
pub(crate) async fn queue(b: &AnyBackend, cmd: QueueCommand) -> anyhow::Result<u8> {
    match cmd {
        QueueCommand::Create {
            name,
            shards,
            lane,
            lane_window,
        } => {
            let mut s = QueueSettings {
                shards,
                ..b.settings(&name).await?
            };
            s.set_lane(Some(lane), lane_window.map(window_ms));
            let s = b.configure(&name, s).await?;
            println!("{name}\t{}", settings_line(&s));
        }
        QueueCommand::Set {
            name,
            shards,
            lane,
            lane_window,
            rate,
            burst,
            max_in_flight,
            no_rate,
            no_max_in_flight,
            keep_done,
            dedupe,
            cold_after,
            no_cold,
            target,
            no_target,
            delivery,
            keys,
        } => {
            let mut s = b.settings(&name).await?;
            keys.apply(&mut s);
            if let Some(c) = cold_after {
                s.cold_after_ms = Some(c.as_millis() as u64);
            }
            if no_cold {
                s.cold_after_ms = None;
            }
            if let Some(t) = target.target()? {
                s.set_target(Some(t));
            }
            if no_target {
                s.set_target(None);
            }
            if let Some(d) = delivery {
                s.delivery = d.parse()?;
            }
            if let Some(n) = shards {
                s.shards = n;
            }
            s.set_lane(lane, lane_window.map(window_ms));
            if let Some(per_s) = rate {
                let burst = burst.unwrap_or_else(|| per_s.ceil().max(1.0) as u32);
                s.rate = Some(Rate { per_s, burst });
            }
            if no_rate {
                s.rate = None;
            }
            if max_in_flight.is_some() {
                s.max_in_flight = max_in_flight;
            }
            if no_max_in_flight {
                s.max_in_flight = None;
            }
            if let Some(k) = keep_done {
                s.retention.keep_done_ms = k.as_millis() as u64;
            }
            if let Some(d) = dedupe {
                s.retention.dedupe_ms = d.as_millis() as u64;
            }
            let s = b.configure(&name, s).await?;
            println!("{name}\t{}", settings_line(&s));
        }
        QueueCommand::Show { name, json } => {
            let settings = b.settings(&name).await?;
            let stats = b.stats(&name).await?;
            if json {
                let v = serde_json::json!({
                    "queue": name.as_str(),
                    "settings": settings,
                    "stats": stats,
                });
                println!("{v}");
            } else {
                println!(
                    "{name}\t{}\tscheduled {}\tdue {}\tleased {}\tdead {}{}{}",
                    settings_line(&settings),
                    stats.scheduled,
                    stats.due,
                    stats.leased,
                    stats.dead,
                    if stats.waiting_on_limit > 0 {
                        format!("\twaiting on limit {}", stats.waiting_on_limit)
                    } else {
                        String::new()
                    },
                    if stats.paused { "\tpaused" } else { "" }
                );
            }
        }
        QueueCommand::Keys { name, limit, json } => {
            let keys = b.keys(&name, limit.clamp(1, 1000)).await?;
            if json {
                let rows: Vec<delayq_http::model::KeyView> = keys
                    .into_iter()
                    .map(delayq_http::model::KeyView::from)
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else if keys.is_empty() {
                println!("(no key of {name} has jobs in flight, due or held)");
            } else {
                println!("key\tin flight\tdue\tpaused until");
                for k in keys {
                    let until = k.paused_until_ms.map_or("-".into(), format_ms);
                    println!("{}\t{}\t{}\t{until}", k.key, k.in_flight, k.due);
                }
            }
        }
        QueueCommand::PauseKey {
            name,
            key,
            for_,
            until,
        } => {
            let hold = match (for_, until) {
                (Some(d), _) => delayq::KeyHold::For(d),
                (None, Some(t)) => match Due::at(t)? {
                    Due::At(ms) => delayq::KeyHold::Until(ms),
                    _ => unreachable!("Due::at answers a time"),
                },
                (None, None) => anyhow::bail!("give --for or --until"),
            };
            match b.pause_key(&name, &key, hold).await? {
                Some(end) => println!("{name}\t{key}\tpaused until {}", format_ms(end)),
                None => println!("{name}\t{key}\tnot paused (the time is past)"),
            }
        }
        QueueCommand::ResumeKey { name, key } => {
            b.pause_key(&name, &key, delayq::KeyHold::Lifted).await?;
            println!("{name}\t{key}\tresumed");
        }
        QueueCommand::Pause { name } => {
            b.set_paused(&name, true).await?;
            println!("{name}\tpaused");
        }
        QueueCommand::Resume { name } => {
            b.set_paused(&name, false).await?;
            println!("{name}\tresumed");
        }
    }
    Ok(0)
}

/// `delayq jobs list`: one page; after a full page, the cursor of the next one (on stderr).
pub(crate) async fn jobs<B: Backend + Inspect>(
    b: &B,
    q: &QueueName,
    cmd: JobsCommand,
) -> anyhow::Result<u8> {
    let JobsCommand::List {
        state,
        limit,
        cursor,
        json,
    } = cmd;
    let page = b
        .list(q, delayq::ListRequest::new(state, limit, cursor))
        .await?;
    if page.jobs.is_empty() && !json {
        eprintln!("no {state} jobs in queue {q}");
    }
    for j in &page.jobs {
        if json {
            println!("{}", job_json(j));
        } else {
            let when = match state {
                delayq::ListState::Leased => {
                    format!(
                        "lease until {}",
                        j.lease_deadline_ms.map(format_ms).unwrap_or_default()
                    )
                }
                delayq::ListState::Dead => {
                    format!(
                        "failed {}",
                        j.failed_at_ms.map(format_ms).unwrap_or_default()
                    )
                }
                delayq::ListState::Done => {
                    format!(
                        "completed {}",
                        j.completed_at_ms.map(format_ms).unwrap_or_default()
                    )
                }
                _ => format!("due {}", format_ms(j.due_at_ms)),
            };
            // A done job's last column is its result (as text); the others' their last error.
            let last = match (&j.result, state) {
                (Some(r), delayq::ListState::Done) => String::from_utf8_lossy(r).into_owned(),
                _ => j.last_error.clone().unwrap_or_default(),
            };
            println!(
                "{}\t{when}\tattempts {}/{}\t{}",
                j.id,
                j.attempt,
                j.max_attempts,
                crate::output::one_line(last.trim_end())
            );
        }
    }
    if let Some(next) = page.next {
        eprintln!("more: --cursor {next}");
    }
    Ok(0)
}

/// `delayq schedule set|list|rm`.
pub(crate) async fn schedule(
    b: &AnyBackend,
    q: &QueueName,
    cmd: ScheduleCommand,
) -> anyhow::Result<u8> {
    match cmd {
        ScheduleCommand::Set {
            name,
            cron,
            tz,
            every,
            payload,
            catch_up,
            max_attempts,
            target,
        } => {
            let timing = match (cron, every) {
                (Some(cron), _) => Timing::Cron { cron, tz },
                (None, Some(e)) => Timing::Every {
                    every_ms: e.as_millis() as u64,
                },
                (None, None) => anyhow::bail!("give --cron EXPR or --every DURATION"),
            };
            let spec = ScheduleSpec {
                timing,
                payload: payload.into_bytes(),
                catch_up: catch_up.parse()?,
                max_attempts,
                backoff: None,
                lease_ms: None,
                timeout_ms: None,
                target: target.target()?,
                trace: crate::enqueue::env_trace(),
            };
            let now = b.clock_ms().await?;
            let max = delayq::limits::DEFAULT_MAX_PAYLOAD_BYTES;
            let info = delayq::schedule::put(b, q, &name, spec, max, now).await?;
            // Over HTTP the server computes the next fire: show the stored one.
            let info = b.schedule(q, &name).await?.unwrap_or(info);
            println!("{name}\tnext {}", format_ms(info.next_ms));
        }
        ScheduleCommand::List { json } => {
            let all = b.schedules(q).await?;
            if all.is_empty() && !json {
                eprintln!("no schedules in queue {q}");
            }
            for s in all {
                let timing = match &s.spec.timing {
                    Timing::Cron { cron, tz } => format!("cron {cron:?} {tz}"),
                    Timing::Every { every_ms } => format!("every {every_ms} ms"),
                };
                if json {
                    let v = serde_json::json!({
                        "name": s.name, "timing": s.spec.timing, "next_fire": s.next_ms,
                        "catch_up": s.spec.catch_up,
                    });
                    println!("{v}");
                } else {
                    println!("{}\t{timing}\tnext {}", s.name, format_ms(s.next_ms));
                }
            }
        }
        ScheduleCommand::Rm { name } => {
            if b.delete_schedule(q, &name).await? {
                println!("{name}\tdeleted");
            } else {
                eprintln!("no schedule {name} in queue {q}");
                return Ok(1);
            }
        }
    }
    Ok(0)
}
