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

/// Waits until `deadline` (with sub-millisecond precision; `None`: no due time, no timer), a
/// wake-up on `wake`, or (tests only) a move of a test clock since `moves` was last marked —
/// mark it, as `wake` is marked, before reading what `deadline` came from. Marks the wake-up
/// as seen. Cancel-safe.
pub async fn until_due_or_woken(
    deadline: Option<Instant>,
    wake: &mut Option<Wakeups>,
    moves: &mut crate::clock::Moves,
) -> Woke {
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
    let moved = moves.moved();
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
        let mut moves = crate::clock::Moves::watch();
        let start = Instant::now();
        let d = start + Duration::from_secs(5);
        assert_eq!(
            until_due_or_woken(Some(d), &mut wake, &mut moves).await,
            Woke::Due
        );
        assert!(Instant::now() >= d);
        tx.send(1).unwrap();
        let far = Some(Instant::now() + Duration::from_secs(3600));
        assert_eq!(
            until_due_or_woken(far, &mut wake, &mut moves).await,
            Woke::Signalled
        );
        tx.send(2).unwrap();
        assert_eq!(
            until_due_or_woken(None, &mut wake, &mut moves).await,
            Woke::Signalled
        );
        drop(tx);
        assert_eq!(
            until_due_or_woken(None, &mut wake, &mut moves).await,
            Woke::NoChannel
        );
        assert!(wake.is_none());
        let t = Instant::now();
        assert_eq!(
            until_due_or_woken(far, &mut wake, &mut moves).await,
            Woke::NoChannel
        );
        assert_eq!(Instant::now() - t, RESUBSCRIBE);
    }

    /// A test clock that moves after the loop marked its moves — during its claim, before
    /// the wait begins — still ends the wait (it used to be lost: the wait slept on).
    #[cfg(feature = "test-clock")]
    #[tokio::test(start_paused = true)]
    async fn a_clock_move_before_the_wait_begins_ends_it() {
        let (_tx, rx) = watch::channel(0u64);
        let mut wake = Some(rx);
        let mut moves = crate::clock::Moves::watch();
        moves.mark();
        crate::clock::TestClock::new().advance(Duration::from_secs(3600));
        let far = Some(Instant::now() + Duration::from_secs(3600));
        let t = Instant::now();
        assert_eq!(
            until_due_or_woken(far, &mut wake, &mut moves).await,
            Woke::Signalled
        );
        assert_eq!(Instant::now(), t, "woken at once, not at the deadline");
    }
}
