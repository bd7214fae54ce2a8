//! Results of asynchronous calls, queued for the Java completion thread. Work runs on core's
//! runtime; its result goes into a channel as one line `"<id> v <value>"` or
//! `"<id> e <error fields JSON>"`; the Java daemon thread `cycles-completions` takes lines with
//! `Native.poll` and completes the future of that id off the native threads. No runtime
//! thread is ever attached to the JVM.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use cycles_bridge::task::{self, Work};
use cycles_bridge::ErrorFields;
use cycles_core::runtime;

struct Queue {
    tx: Mutex<Sender<String>>,
    rx: Mutex<Receiver<String>>,
}

fn queue() -> &'static Queue {
    static Q: OnceLock<Queue> = OnceLock::new();
    Q.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        Queue {
            tx: Mutex::new(tx),
            rx: Mutex::new(rx),
        }
    })
}

/// The line of one result.
pub fn line(id: i64, r: Result<String, ErrorFields>) -> String {
    match r {
        Ok(v) => format!("{id} v {v}"),
        Err(e) => format!("{id} e {}", e.to_json()),
    }
}

/// Runs `work` on core's runtime; its result (a panic: INTERNAL) is queued under `id`.
pub fn submit(id: i64, work: Work<Result<String, ErrorFields>>) -> Result<(), ErrorFields> {
    let rt = runtime::handle()?;
    let tx = queue().tx.lock().unwrap_or_else(|p| p.into_inner()).clone();
    rt.spawn(async move {
        let r = task::joined(work).await;
        let _ = tx.send(line(id, r));
    });
    Ok(())
}

/// The next result line, waiting up to `timeout` (None: nothing yet).
pub fn poll(timeout: Duration) -> Option<String> {
    let rx = queue().rx.lock().unwrap_or_else(|p| p.into_inner());
    match rx.recv_timeout(timeout) {
        Ok(l) => Some(l),
        Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
    }
}
