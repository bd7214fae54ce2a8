//! `cycles fake-provider`: the fake model provider (`cycles-fake-provider`) as a process, for
//! trying an integration by hand or driving one from another language's tests.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::Args;
use cycles_fake_provider::{FakeConfig, FakeProvider, FaultRule};

/// Options of `cycles fake-provider`. Flags override the config file; the file overrides
/// the defaults.
#[derive(Args, Debug)]
#[command(after_help = "\
It speaks OpenAI Chat Completions (POST /v1/chat/completions), OpenAI Responses \
(POST /v1/responses) and Anthropic Messages (POST /v1/messages), whole and streamed (SSE). \
Point an OpenAI client at URL/v1 and an Anthropic client at URL, with any API key.

Tokens are words: prompt tokens are the whitespace-separated words of every text in the \
request, completion tokens the words of the reply, capped by max_tokens, \
max_completion_tokens or max_output_tokens (a capped reply ends with finish reason \
length / status incomplete / stop_reason max_tokens). The X-Fake-Reply header sets one \
request's reply.

Every request is recorded: GET URL/_fake/requests lists them, POST URL/_fake/reset clears \
the log and the run-time fault rules, POST URL/_fake/faults adds a rule, DELETE \
URL/_fake/faults removes them all. See conformance/fake-provider/README.md.")]
pub struct FakeProviderArgs {
    /// Address to bind. Loopback by default: this server has no security at all.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to bind; 0 picks a free one.
    #[arg(long, default_value_t = 7879)]
    port: u16,
    /// JSON configuration (the `FakeConfig` of cycles-fake-provider: reply, replies,
    /// faults; unknown keys are refused).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Reply text of every model without its own (--model-reply).
    #[arg(long)]
    reply: Option<String>,
    /// Reply text of one model, as MODEL=TEXT (repeatable).
    #[arg(long = "model-reply", value_parser = parse_model_reply)]
    model_replies: Vec<(String, String)>,
    /// A scripted fault as JSON (repeatable), e.g.
    /// '{"endpoint":"chat_completions","fault":{"kind":"rate_limited","retry_after":"2"}}',
    /// '{"call":0,"fault":{"kind":"cut_stream","after_chunks":3}}',
    /// '{"fault":{"kind":"stream_error","after_chunks":3}}',
    /// '{"fault":{"kind":"slow_first_byte","ms":500}}', '{"fault":{"kind":"slow_chunks","ms":50}}',
    /// '{"fault":{"kind":"server_error"}}'.
    #[arg(long = "fault", value_parser = parse_fault)]
    faults: Vec<FaultRule>,
}

fn parse_model_reply(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((model, reply)) if !model.is_empty() => Ok((model.to_string(), reply.to_string())),
        _ => Err(format!("model reply {text:?} is not MODEL=TEXT")),
    }
}

fn parse_fault(text: &str) -> Result<FaultRule, String> {
    serde_json::from_str(text).map_err(|err| format!("fault is not a valid fault rule JSON: {err}"))
}

fn build_config(args: FakeProviderArgs) -> Result<FakeConfig, String> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
            serde_json::from_str::<FakeConfig>(&text)
                .map_err(|err| format!("invalid fake provider config {}: {err}", path.display()))?
        }
        None => FakeConfig::default(),
    };
    config.bind = SocketAddr::new(args.host, args.port);
    if let Some(reply) = args.reply {
        config.reply = reply;
    }
    config.replies.extend(args.model_replies);
    config.faults.extend(args.faults);
    Ok(config)
}

/// Starts the fake provider, prints where it listens, and waits for Ctrl-C.
pub async fn run(args: FakeProviderArgs) -> Result<(), String> {
    let config = build_config(args)?;
    let provider = FakeProvider::start(config)
        .await
        .map_err(|err| format!("cannot start the fake provider: {err}"))?;
    let url = provider.url();
    // Written without println!'s panic on a closed stdout, as `cycles serve` does.
    let banner = format!(
        "cycles fake provider listening on {url}\n  \
         OpenAI base URL: {url}/v1 (chat/completions, responses)\n  \
         Anthropic base URL: {url} (v1/messages)\n  \
         recorder: {url}/_fake/requests, reset: POST {url}/_fake/reset\n\
         press Ctrl-C to stop\n"
    );
    let ctrl_c = crate::ctrl_c::registered().await?;
    let mut out = std::io::stdout();
    let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
    ctrl_c.await?;
    provider.shutdown().await;
    Ok(())
}
