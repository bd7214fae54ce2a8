//! Bridge dispatch benchmark: the cost of the host-neutral boundary (`cycles-bridge`) over
//! calling core directly, measured in the same run against the local server (its own runtime,
//! in this process). Both paths read the same reservation (`get_reservation`, no side effect):
//!
//! - core: `CyclesClient::get_reservation` awaited on core's runtime (`block_on`);
//! - bridge: what a host does: `ClientHandle::prepare` (operation name and JSON arguments),
//!   `task::start` of `Call::run` (dispatch, body encoded as JSON) and `Blocking::wait` slices
//!   (from the third call on, driven on the calling thread, as for every blocking host).
//!
//! Rounds alternate the two paths so drift hits both; the report is the median per call and
//! the ratio bridge / core. Run: `cargo run --release -p cycles-bench --bin bridge-dispatch`
//! (see docs/benchmarks.md).

use std::time::{Duration, Instant};

use clap::Parser;
use cycles_bridge::task::{self, Wait};
use cycles_bridge::{ClientHandle, ClientOptions};
use cycles_core::runtime;
use cycles_core::{Action, Amount, CyclesClient, ReservationCreateRequest, Subject, Unit};
use cycles_local_server::{LocalServer, ServerConfig};

#[derive(Parser, Debug)]
#[command(about = "Bridge dispatch against calling core directly")]
struct Args {
    /// Rounds; each round times `calls` calls of each path.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Calls per path per round.
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bridge_call(handle: &ClientHandle, args: &str) {
    let call = handle.prepare("get_reservation", args).expect("prepare");
    let mut work = task::start(call.run()).expect("start");
    loop {
        match work.wait(Duration::from_millis(50)) {
            Wait::Ready(r) => {
                let reply = r.expect("bridge get_reservation");
                assert_eq!(reply.status, 200);
                return;
            }
            Wait::Pending => {}
            Wait::Failed(f) => panic!("{f:?}"),
        }
    }
}

fn main() {
    let args = Args::parse();
    // The server on its own runtime, so it does not share core's workers.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let server = server_rt
        .block_on(LocalServer::start(ServerConfig::default()))
        .expect("local server");
    let options = ClientOptions {
        base_url: server.url(),
        api_key: "cycles-local-key".into(),
        journal_enabled: Some(false),
        ..ClientOptions::default()
    };
    let config = options.into_config();
    let core = CyclesClient::new(config.clone()).expect("client");
    let handle = ClientHandle::new(config).expect("bridge client");
    let rt = runtime::handle().expect("core runtime");

    let created = rt
        .block_on(core.create_reservation(&ReservationCreateRequest::new(
            "bench-bridge-dispatch",
            Subject::tenant("acme"),
            Action::new("llm.completion", "bench"),
            Amount::new(Unit::UsdMicrocents, 1),
        )))
        .expect("create");
    let id = created.body.reservation_id.clone().expect("reservation id");
    let bridge_args = serde_json::json!({ "reservation_id": id }).to_string();

    // Warm both paths (connection pool, allocator).
    for _ in 0..args.calls.min(50) {
        rt.block_on(core.get_reservation(&id)).expect("warm core");
        bridge_call(&handle, &bridge_args);
    }

    let (mut core_us, mut bridge_us) = (Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        let t = Instant::now();
        for _ in 0..args.calls {
            rt.block_on(core.get_reservation(&id)).expect("core");
        }
        core_us.push(t.elapsed().as_secs_f64() * 1e6 / args.calls as f64);
        let t = Instant::now();
        for _ in 0..args.calls {
            bridge_call(&handle, &bridge_args);
        }
        bridge_us.push(t.elapsed().as_secs_f64() * 1e6 / args.calls as f64);
    }
    let (c, b) = (median(core_us), median(bridge_us));
    if args.json {
        println!(
            "{}",
            serde_json::json!({"rounds": args.rounds, "calls": args.calls,
                "core_us_per_call": c, "bridge_us_per_call": b, "ratio": b / c})
        );
    } else {
        println!(
            "bridge-dispatch: get_reservation over loopback, {} rounds x {} calls, median per call",
            args.rounds, args.calls
        );
        println!("  core   {c:>9.1} us");
        println!(
            "  bridge {b:>9.1} us  (+{:.1} us, ratio {:.3})",
            b - c,
            b / c
        );
    }
    drop(server);
}
