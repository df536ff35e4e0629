//! The threads the switch cannot forward without (datapath threads,
//! handlers, the revalidator) under watch. A panic in one is caught where
//! the thread ends and reported to whoever listens (`eswitchd run`'s main
//! loop), which stops the daemon with the thread's name and message, so a
//! service manager restarts it (Open vSwitch's `--monitor` restarts a
//! crashed ovs-vswitchd the same way). Left alone, the daemon would go on
//! answering its control socket and controllers while the dead thread's
//! ports drop everything.
//!
//! A panic before anyone listens is kept and reported when the listener
//! comes.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

type Notify = Box<dyn Fn(String) + Send>;

/// Watches critical threads; see the module documentation.
#[derive(Default)]
pub(crate) struct Supervisor {
    state: Mutex<(Option<Notify>, Vec<String>)>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Supervisor")
    }
}

impl Supervisor {
    /// Failures go to `notify` from now on; those seen before, at once.
    pub(crate) fn notify(&self, notify: impl Fn(String) + Send + 'static) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for msg in s.1.drain(..) {
            notify(msg);
        }
        s.0 = Some(Box::new(notify));
    }

    fn failed(&self, msg: String) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match &s.0 {
            Some(n) => n(msg),
            None => s.1.push(msg),
        }
    }

    /// Starts thread `name` running `f`, its panic reported.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> anyhow::Result<JoinHandle<()>> {
        let me = Arc::clone(self);
        let label = name.to_string();
        super::spawn(name, move || {
            if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
                me.failed(format!("thread {label} panicked: {}", panic_text(&*p)));
            }
        })
    }
}

/// A panic's message, when it has one.
fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_panic_is_reported_with_the_threads_name_and_message_even_before_a_listener() {
        let sup = Arc::new(Supervisor::default());
        // Before anyone listens: kept.
        let t = sup
            .spawn("esw-test-early", || panic!("ring {} overrun", 3))
            .expect("spawn");
        assert!(
            t.join().is_ok(),
            "the panic is caught where the thread ends"
        );
        let (tx, rx) = mpsc::channel();
        sup.notify(move |m| {
            let _ = tx.send(m);
        });
        let got = rx.recv_timeout(Duration::from_secs(5)).expect("reported");
        assert_eq!(got, "thread esw-test-early panicked: ring 3 overrun");
        // A thread that ends well reports nothing; a later panic is sent.
        sup.spawn("esw-test-ok", || {}).expect("spawn").join().ok();
        sup.spawn("esw-test-late", || panic!("late"))
            .expect("spawn")
            .join()
            .ok();
        let got = rx.recv_timeout(Duration::from_secs(5)).expect("reported");
        assert_eq!(got, "thread esw-test-late panicked: late");
        assert!(rx.try_recv().is_err(), "one report a panic");
    }
}
