//! How a throwaway server's processes are owned: what one leaves behind and how another
//! test process finds it ([`Stoppable`]), and the process group of a server started to be
//! shared by a run ([`DetachIfShared`]). Every server type implements these; `shared` uses
//! them — so the server types need not know `shared`.

use std::cell::Cell;
use std::path::PathBuf;
use std::process::Command;

/// A server that can be shared: what it leaves behind, and how another test process finds it.
pub trait Stoppable: Sized {
    /// Process ids to kill and directories to remove at exit.
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>);
    /// Text from which [`Stoppable::attach`] rebuilds it in another process.
    fn describe(&self) -> String;
    /// The server `text` describes, started by another test process of the run.
    fn attach(text: &str) -> Self;
}

thread_local! {
    /// Whether this thread is starting a server that outlives its process (a run's).
    static STARTING_SHARED: Cell<bool> = const { Cell::new(false) };
}

/// Spawning a server: one started to be shared by a run's test processes gets a process group
/// of its own, so the end of the test process that happened to start it (nextest signals a
/// test's group when it times out or is cancelled) does not take it from the others.
pub(crate) trait DetachIfShared {
    /// Puts the command in a new process group while a run's shared server starts.
    fn detached_if_shared(&mut self) -> &mut Self;
    /// Puts the command in a new process group when `detach`.
    fn detached_if(&mut self, detach: bool) -> &mut Self;
}

impl DetachIfShared for Command {
    fn detached_if_shared(&mut self) -> &mut Self {
        self.detached_if(STARTING_SHARED.get())
    }
    fn detached_if(&mut self, detach: bool) -> &mut Self {
        if detach {
            use std::os::unix::process::CommandExt as _;
            self.process_group(0);
        }
        self
    }
}

/// Marks this thread as starting a run's shared server (or no longer).
pub(crate) fn starting_shared(on: bool) {
    STARTING_SHARED.set(on);
}
