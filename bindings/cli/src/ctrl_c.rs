//! Waiting for Ctrl-C with the handler in place before the banner says the server is up.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Ctrl-C's arrival, or why it cannot be waited for.
pub type CtrlC = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Ctrl-C, its handler registered now: tokio registers it on the future's first poll, and a
/// Ctrl-C that came between the banner and that poll took the process down (by the default
/// action, or Python's handler in the wheel's in-process `cycles`) instead of stopping the
/// server cleanly. Await the returned future after printing the banner.
pub async fn registered() -> Result<CtrlC, String> {
    let describe = |err: std::io::Error| format!("cannot wait for Ctrl-C: {err}");
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    // One poll registers the handler (Pending unless a Ctrl-C was already seen).
    match std::future::poll_fn(|cx| Poll::Ready(ctrl_c.as_mut().poll(cx))).await {
        Poll::Pending => Ok(Box::pin(async move { ctrl_c.await.map_err(describe) })),
        Poll::Ready(Ok(())) => Ok(Box::pin(std::future::ready(Ok(())))),
        Poll::Ready(Err(err)) => Err(describe(err)),
    }
}
