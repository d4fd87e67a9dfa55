//! Waiting for work, written once: sleep until the next due time or until the backend says an
//! earlier job may have arrived. The consumer engine and the HTTP long poll both wait here.

use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::backend::Wakeups;

/// Why a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woke {
    /// The deadline came.
    Due,
    /// The backend signalled a possibly earlier job, or (tests only) a test clock moved.
    Signalled,
    /// There is no wake-up channel (never had one, or it closed): the caller should subscribe
    /// again. Returned after at most [`RESUBSCRIBE`] so an outage is not a busy loop.
    NoChannel,
}

/// Longest wait without a wake-up channel before the caller is asked to resubscribe.
pub const RESUBSCRIBE: Duration = Duration::from_millis(500);

/// Waits until `deadline` (with sub-millisecond precision; `None`: no due time, no timer) or a
/// wake-up on `wake`. Marks the wake-up as seen. Cancel-safe.
pub async fn until_due_or_woken(deadline: Option<Instant>, wake: &mut Option<Wakeups>) -> Woke {
    let Some(w) = wake.as_mut() else {
        let give_up = Instant::now() + RESUBSCRIBE;
        if let Some(d) = deadline.filter(|d| *d <= give_up) {
            precise_sleep_until(d).await;
            return Woke::Due;
        }
        sleep_until(give_up).await;
        return Woke::NoChannel;
    };
    // Never resolves outside tests (feature `test-clock`): there, the deadline was read on a
    // clock the test may move forward.
    let moved = crate::clock::moved();
    let due = async {
        match deadline {
            Some(d) => precise_sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = due => Woke::Due,
        () = moved => Woke::Signalled,
        changed = w.changed() => {
            if changed.is_ok() {
                Woke::Signalled
            } else {
                *wake = None;
                Woke::NoChannel
            }
        }
    }
}

/// Sleeps until `deadline` with sub-millisecond precision: the timer wheel (1 ms ticks,
/// rounded up) covers all but the last stretch, which yields in a loop. A consumer thus starts
/// a job within a round trip of its due time instead of up to two timer ticks after it.
pub async fn precise_sleep_until(deadline: Instant) {
    const SPIN: Duration = Duration::from_micros(1500);
    if let Some(coarse) = deadline.checked_sub(SPIN)
        && coarse > Instant::now()
    {
        sleep_until(coarse).await;
    }
    // The spin is bounded in real time: under a paused test clock time does not move while a
    // task spins, so after twice the stretch it hands over to the timer.
    let spin_start = std::time::Instant::now();
    while Instant::now() < deadline {
        if spin_start.elapsed() > 2 * SPIN {
            sleep_until(deadline).await;
            return;
        }
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::watch;

    #[tokio::test(start_paused = true)]
    async fn ends_at_the_deadline_on_a_signal_or_without_a_channel() {
        let (tx, rx) = watch::channel(0u64);
        let mut wake = Some(rx);
        let start = Instant::now();
        let d = start + Duration::from_secs(5);
        assert_eq!(until_due_or_woken(Some(d), &mut wake).await, Woke::Due);
        assert!(Instant::now() >= d);
        tx.send(1).unwrap();
        let far = Some(Instant::now() + Duration::from_secs(3600));
        assert_eq!(until_due_or_woken(far, &mut wake).await, Woke::Signalled);
        tx.send(2).unwrap();
        assert_eq!(until_due_or_woken(None, &mut wake).await, Woke::Signalled);
        drop(tx);
        assert_eq!(until_due_or_woken(None, &mut wake).await, Woke::NoChannel);
        assert!(wake.is_none());
        let t = Instant::now();
        assert_eq!(until_due_or_woken(far, &mut wake).await, Woke::NoChannel);
        assert_eq!(Instant::now() - t, RESUBSCRIBE);
    }
}
