//! The accept loop. We run our own loop (instead of `axum::serve`) so that a fault can reset a
//! connection with a TCP RST: each accepted socket keeps a duplicated fd on which we set
//! SO_LINGER 0 before dropping it, which makes the kernel send RST instead of FIN.

use crate::shared::Shared;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use socket2::SockRef;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

/// Per-connection control: a handler asks for the connection to be reset.
#[derive(Default)]
pub(crate) struct ConnCtl {
    notify: Notify,
}

impl ConnCtl {
    /// Reset the connection (RST) as soon as the connection task sees it.
    pub fn reset(&self) {
        // notify_one stores a permit, so the request is not lost if the task is not yet waiting.
        self.notify.notify_one();
    }
}

/// Accept connections until shutdown is signalled.
pub(crate) async fn serve(
    listener: TcpListener,
    sh: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            r = listener.accept() => {
                if let Ok((stream, _)) = r {
                    tokio::spawn(connection(stream, sh.clone(), shutdown.clone()));
                }
            }
            _ = shutdown.changed() => break,
        }
    }
}

async fn connection(stream: TcpStream, sh: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let Ok(std_stream) = stream.into_std() else {
        return;
    };
    let Ok(dup) = std_stream.try_clone() else {
        return;
    };
    let Ok(stream) = TcpStream::from_std(std_stream) else {
        return;
    };
    let ctl = Arc::new(ConnCtl::default());
    let svc = {
        let ctl = ctl.clone();
        service_fn(move |req| {
            let sh = sh.clone();
            let ctl = ctl.clone();
            async move { Ok::<_, Infallible>(crate::pipeline::handle(sh, req, ctl).await) }
        })
    };
    let conn =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = conn => {}
        _ = ctl.notify.notified() => {
            let _ = SockRef::from(&dup).set_linger(Some(Duration::ZERO));
        }
        _ = shutdown.changed() => {}
    }
    // `conn` (and the in-flight handler) is dropped by now; closing the last fd sends the RST.
    drop(dup);
}
