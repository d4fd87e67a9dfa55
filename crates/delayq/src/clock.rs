//! The clock, injectable. On Redis the server's clock decides every due time; the embedded
//! store and local measurements (lateness) read a [`Clock`], so tests can skew it or move it
//! forward instead of sleeping. With feature `test-clock` (tests only) a test moves the clock
//! of the processes it starts too ([`from_env`], `TestClock::publish`), and whatever waits
//! for a due time wakes when a [`TestClock`] moves ([`Moves`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of "now".
pub trait Clock: Send + Sync + 'static {
    /// Now, in µs since the epoch.
    fn now_us(&self) -> u64;

    /// Now, in ms since the epoch.
    fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }
}

/// µs since the Unix epoch on this host's clock.
pub fn system_now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// This host's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        system_now_us()
    }
}

/// This host's clock shifted by a fixed offset in ms (for tests of clock skew).
#[derive(Clone, Copy, Debug)]
pub struct OffsetClock(pub i64);

impl Clock for OffsetClock {
    fn now_us(&self) -> u64 {
        (system_now_us() as i64)
            .saturating_add(self.0.saturating_mul(1000))
            .max(0) as u64
    }
}

/// This host's clock plus an offset that only grows: tests call [`TestClock::advance`] to let
/// an hour pass at once (leases expire, backoffs end, delayed jobs fall due) while time keeps
/// flowing in between, so consumers and long polls behave as they do in production. Clones
/// share the offset.
#[derive(Clone, Debug, Default)]
pub struct TestClock {
    offset_us: Arc<AtomicU64>,
}

impl TestClock {
    /// A clock that reads like the system clock until advanced.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock `by` forward (and, with feature `test-clock`, wakes what waits in this
    /// process: [`Moves`]).
    pub fn advance(&self, by: Duration) {
        self.offset_us
            .fetch_add(by.as_micros() as u64, Ordering::SeqCst);
        #[cfg(feature = "test-clock")]
        moves::bump();
    }

    /// Tests only: writes this clock's offset to `path`, which the processes started with
    /// `DELAYQ_TEST_CLOCK=path` follow ([`from_env`]). Call it after each advance.
    #[cfg(feature = "test-clock")]
    pub fn publish(&self, path: &std::path::Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.offset().as_micros().to_string())?;
        std::fs::rename(&tmp, path)
    }

    /// How far it has been moved ahead of the system clock.
    pub fn offset(&self) -> Duration {
        Duration::from_micros(self.offset_us.load(Ordering::SeqCst))
    }
}

impl Clock for TestClock {
    fn now_us(&self) -> u64 {
        system_now_us() + self.offset_us.load(Ordering::SeqCst)
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// The environment variable naming the file of a test clock's offset ([`from_env`]).
pub const TEST_CLOCK_ENV: &str = "DELAYQ_TEST_CLOCK";

/// The clock a test gave this process: with feature `test-clock` and `DELAYQ_TEST_CLOCK`
/// naming a file, a [`TestClock`] that follows the offset (µs) written there by
/// `TestClock::publish` (`follow`), one for the process however many stores ask; otherwise
/// `None` — a build without the feature ignores the variable.
pub fn from_env() -> Option<TestClock> {
    #[cfg(feature = "test-clock")]
    {
        static FOLLOWED: std::sync::OnceLock<Option<TestClock>> = std::sync::OnceLock::new();
        FOLLOWED
            .get_or_init(|| {
                let path = std::env::var_os(TEST_CLOCK_ENV)?;
                Some(follow(std::path::PathBuf::from(path)))
            })
            .clone()
    }
    #[cfg(not(feature = "test-clock"))]
    None
}

/// Tests only: a [`TestClock`] that follows the offset (µs) written to `path` by
/// `TestClock::publish`, read by a thread every 5 ms.
#[cfg(feature = "test-clock")]
pub fn follow(path: std::path::PathBuf) -> TestClock {
    let clock = TestClock::new();
    let follower = clock.clone();
    let _ = std::thread::Builder::new()
        .name("test-clock".into())
        .spawn(move || {
            loop {
                let want = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| t.trim().parse::<u64>().ok());
                let have = follower.offset().as_micros() as u64;
                if let Some(by) = want.and_then(|w| w.checked_sub(have)).filter(|b| *b > 0) {
                    follower.advance(Duration::from_micros(by));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
    clock
}

/// The moves of this process's [`TestClock`]s as one waiting loop sees them (feature
/// `test-clock`; without it nothing ever moves and [`Moves::moved`] never resolves). A loop
/// marks it before it reads the clock — a claim, a tick — and waits on it after, so a move in
/// between wakes the wait instead of being lost: a wait that subscribed only once it began
/// would sleep until a due time read before the move (a long poll would run out its wait).
#[derive(Debug)]
pub struct Moves {
    #[cfg(feature = "test-clock")]
    rx: tokio::sync::watch::Receiver<u64>,
}

impl Moves {
    /// Starts watching: moves from now on count.
    pub fn watch() -> Self {
        Self {
            #[cfg(feature = "test-clock")]
            rx: moves::TX.subscribe(),
        }
    }

    /// Marks every move so far as seen: call it before reading the clock.
    pub fn mark(&mut self) {
        #[cfg(feature = "test-clock")]
        self.rx.borrow_and_update();
    }

    /// Resolves once a test clock has moved since the last [`Moves::mark`] (at once if one
    /// already has); never without feature `test-clock`. Cancel-safe.
    pub async fn moved(&mut self) {
        #[cfg(feature = "test-clock")]
        {
            let _ = self.rx.changed().await;
        }
        #[cfg(not(feature = "test-clock"))]
        std::future::pending::<()>().await
    }
}

#[cfg(feature = "test-clock")]
mod moves {
    use std::sync::LazyLock;

    /// Counts the moves of every test clock of this process.
    pub(super) static TX: LazyLock<tokio::sync::watch::Sender<u64>> =
        LazyLock::new(|| tokio::sync::watch::Sender::new(0));

    pub(super) fn bump() {
        TX.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_clock_moves_forward_by_what_it_is_told() {
        let c = TestClock::new();
        let before = c.now_ms();
        c.clone().advance(Duration::from_secs(3600));
        let after = c.now_ms();
        assert!(after >= before + 3_600_000 && after < before + 3_700_000);
        assert!(OffsetClock(-60_000).now_ms() + 59_000 < SystemClock.now_ms());
    }

    #[cfg(feature = "test-clock")]
    #[tokio::test]
    async fn a_published_clock_is_followed_and_its_moves_wake_waiters() {
        let dir = std::env::temp_dir().join(format!("delayq-clock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("clock");
        let test = TestClock::new();
        test.publish(&file).unwrap();
        let followed = follow(file.clone());
        let mut moves = Moves::watch();
        moves.mark();
        // The move comes before the wait begins: it still wakes it (marked, not lost).
        test.advance(Duration::from_secs(3600));
        test.publish(&file).unwrap();
        tokio::time::timeout(Duration::from_secs(5), moves.moved())
            .await
            .expect("a move wakes a waiter");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while followed.offset() < Duration::from_secs(3600) {
            assert!(
                std::time::Instant::now() < deadline,
                "the file was not followed"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(followed.offset(), Duration::from_secs(3600));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
