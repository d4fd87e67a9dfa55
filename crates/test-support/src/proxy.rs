//! A TCP proxy between a client under test and a server, for network faults: it can stall
//! the connections open now (they stay open but carry nothing, like a socket whose NAT or
//! load-balancer state was dropped) while new connections pass, reset every open connection,
//! delay everything it carries, refuse new connections (all, or the next few), or cut connections as the answer
//! comes back (the request arrived, the client never hears the outcome). Threads only; dropping it stops
//! accepting and closes every connection.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A running proxy.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Connections numbered below this carry nothing.
    stall_below: AtomicU64,
    /// Connections accepted so far.
    accepted: AtomicU64,
    stopped: AtomicBool,
    /// Added to every chunk carried, in ms.
    delay_ms: AtomicU64,
    /// New connections are closed at once.
    refuse: AtomicBool,
    /// This many of the next new connections are closed at once.
    refuse_next: AtomicU64,
    /// When > 0: connections whose number is not a multiple of it are closed as soon as the
    /// server answers, the answer dropped.
    cut_answers: AtomicU64,
    /// Both ends of every open connection, by connection number (for resets; a connection
    /// leaves it when it closes).
    open: std::sync::Mutex<Vec<(u64, TcpStream)>>,
}

impl Proxy {
    /// Listens on a free port and forwards to `127.0.0.1:target`.
    pub fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        std::thread::spawn(move || {
            while !s.stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let n = s.accepted.fetch_add(1, Ordering::Relaxed);
                        let once = s
                            .refuse_next
                            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| {
                                k.checked_sub(1)
                            })
                            .is_ok();
                        if once || s.refuse.load(Ordering::Relaxed) {
                            let _ = client.shutdown(Shutdown::Both);
                            continue;
                        }
                        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                            continue;
                        };
                        if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
                            s.open.lock().expect("proxy lock").extend([(n, a), (n, b)]);
                        }
                        let _ = client.set_nonblocking(false);
                        for (from, to, answers) in [
                            (client.try_clone(), server.try_clone(), false),
                            (server.try_clone(), client.try_clone(), true),
                        ] {
                            if let (Ok(from), Ok(to)) = (from, to) {
                                let s = s.clone();
                                std::thread::spawn(move || pump(from, to, n, answers, &s));
                            }
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => break,
                }
            }
        });
        Self { port, shared }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stalls every connection open now; later ones pass.
    pub fn stall_existing(&self) {
        let n = self.shared.accepted.load(Ordering::Relaxed);
        self.shared.stall_below.store(n, Ordering::Relaxed);
    }

    /// Resets every open connection (both ends closed at once); later ones pass.
    pub fn reset_all(&self) {
        for (_, c) in self.shared.open.lock().expect("proxy lock").drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Delays every chunk carried by `d` (zero: none).
    pub fn delay(&self, d: Duration) {
        self.shared
            .delay_ms
            .store(d.as_millis() as u64, Ordering::Relaxed);
    }

    /// Closes new connections at once while `on` (the server looks down).
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::Relaxed);
    }

    /// Closes the next `n` new connections at once (a server that drops a connection or two).
    pub fn refuse_next(&self, n: u64) {
        self.shared.refuse_next.store(n, Ordering::Relaxed);
    }

    /// Cuts the answers of all but every `keep`-th new connection (0: none cut): the
    /// request reaches the server, then the connection closes before the client reads a byte
    /// of the answer.
    pub fn cut_answers(&self, keep: u64) {
        self.shared.cut_answers.store(keep, Ordering::Relaxed);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::Relaxed);
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, n: u64, answers: bool, s: &Shared) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        if s.stopped.load(Ordering::Relaxed) {
            break;
        }
        if n < s.stall_below.load(Ordering::Relaxed) {
            // Stalled: hold the socket open, carry nothing.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            // Bytes read as the stall began are lost with it.
            Ok(_) if n < s.stall_below.load(Ordering::Relaxed) => {}
            // An answer to cut: dropped, the connection closed.
            Ok(_)
                if answers && {
                    let keep = s.cut_answers.load(Ordering::Relaxed);
                    keep > 0 && !n.is_multiple_of(keep)
                } =>
            {
                break;
            }
            Ok(k) => {
                let delay = s.delay_ms.load(Ordering::Relaxed);
                if delay > 0 {
                    std::thread::sleep(Duration::from_millis(delay));
                }
                if to.write_all(&buf[..k]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
    if let Ok(mut open) = s.open.lock() {
        open.retain(|(m, _)| *m != n);
    }
}
