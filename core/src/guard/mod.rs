//! The guarded lifecycle every binding wraps idiomatically: reserve, heartbeat while the
//! user's work runs, then settle the actual amount the work reported.
//!
//! The rules (recovery profile and issue 4):
//! - work succeeded and reported an actual: settle it (journal first, then commit, with the
//!   event fallback if the reservation expired): [`Guarded::settlement`];
//! - work failed AFTER reporting usage (e.g. a stream broke midway): the known usage is settled,
//!   not released, and the work's error is returned unchanged ([`GuardError::Work`]);
//! - work failed before any actual was known: the reservation is released and the error is
//!   returned unchanged;
//! - work ended WITHOUT an actual (or with a negative one, which the protocol cannot carry):
//!   no commit and no event is sent (the profile's boundary scenario), and the reservation is
//!   released in the same call, so the estimate is never left held until the lease expires;
//!   [`GuardError::MissingActual`] / [`GuardError::InvalidActual`] say whether the release
//!   succeeded (issue 28: one rule for every language);
//! - the host may end an action early with [`ActiveGuard::release`] (e.g. an agent that
//!   decides not to proceed under `ALLOW_WITH_CAPS`): the reservation is released, unless
//!   usage was already reported, which is then settled instead (a known actual is never
//!   dropped);
//! - settlement never releases because it is ambiguous or authentication failed: a pending
//!   settlement stays journaled and is replayed;
//! - a reservation that cannot be made runs no work ([`GuardError::Reserve`]). After a create
//!   timeout, connection error, 5xx or ambiguous 2xx the create is retried ONCE immediately with
//!   the same idempotency key (HEARTBEAT GUIDANCE), then surfaced. Immediately means in the
//!   first attempt's request slot: a retry queued behind a burst could time out unsent, and
//!   a create the server applied before its response was lost would stay held until its TTL.
//!
//! - an [`ActiveGuard`] dropped without [`ActiveGuard::finish`] (a cancelled future, a host
//!   object collected while its work was abandoned) is finished as failed work in a
//!   background task: its known usage is settled, otherwise the reservation is released, and
//!   the heartbeat stops. Settlement never depends on the host reaching its exit code.
//!
//! Idempotency keys derive from the spec's base key: `{key}` for the create, `{key}:commit`
//! for the commit (and its event fallback), `{key}:release` for a release.

mod usage;

use std::future::Future;
use std::sync::Arc;

pub use usage::Usage;

use crate::config::Config;
use crate::error::{Error, ErrorKind};
use crate::events::{Event, EventSink};
use crate::lease::{FailurePolicy, Heartbeat, HeartbeatConfig, HeartbeatLapse, LeaseReport};
use crate::model::{
    Action, Amount, Caps, CommitRequest, Decision, JsonObject, OveragePolicy, ReleaseRequest,
    ReservationCreateRequest, ReservationCreateResponse, Subject, Unit,
};
use crate::pricing::wire::{self, Api, CapsPlan};
use crate::settle::{EventFallback, SettleOutcome, Settlement, Settler};
use crate::transport::{CyclesClient, Response};

/// What to reserve and how to guard it.
#[derive(Clone, Debug)]
pub struct GuardSpec {
    /// Base idempotency key of this guarded action (see the module docs for derived keys).
    pub idempotency_key: String,
    /// Who spends.
    pub subject: Subject,
    /// What is guarded.
    pub action: Action,
    /// The estimate to reserve; the actual is settled in the same unit.
    pub estimate: Amount,
    /// Requested TTL (ms); also every heartbeat extension's `extend_by_ms`.
    pub ttl_ms: i64,
    /// Grace after expiry for in-flight commits (server default when `None`).
    pub grace_period_ms: Option<i64>,
    /// Overage policy (server default when `None`); the event fallback carries it too.
    pub overage_policy: Option<OveragePolicy>,
    /// Reserve-time metadata, sent exactly as given.
    pub metadata: Option<JsonObject>,
    /// Whether to heartbeat the lease while the work runs (default true).
    pub heartbeat: bool,
    /// What a heartbeat failure does to the work (default warn).
    pub policy: FailurePolicy,
}

impl GuardSpec {
    /// A spec with the protocol's default TTL (60 s), heartbeat on, warn policy.
    pub fn new(
        idempotency_key: impl Into<String>,
        subject: Subject,
        action: Action,
        estimate: Amount,
    ) -> GuardSpec {
        GuardSpec {
            idempotency_key: idempotency_key.into(),
            subject,
            action,
            estimate,
            ttl_ms: 60_000,
            grace_period_ms: None,
            overage_policy: None,
            metadata: None,
            heartbeat: true,
            policy: FailurePolicy::Warn,
        }
    }
}

impl GuardSpec {
    /// A spec with a client's defaults, the rule every language shares (the bridge applies
    /// it to the specs hosts send): a fresh idempotency key ([`GuardSpec::fresh_key`]), the
    /// subject of the config's tenant ([`GuardSpec::default_subject`]), the estimate in the
    /// config's default unit ([`Config::unit`]).
    pub fn with_defaults(
        config: &Config,
        action: Action,
        estimate: i64,
    ) -> Result<GuardSpec, Error> {
        Ok(GuardSpec::new(
            GuardSpec::fresh_key(),
            GuardSpec::default_subject(config.tenant.as_deref())?,
            action,
            Amount::new(config.unit(), estimate),
        ))
    }

    /// A fresh base idempotency key: `cycles-<uuid v4>`.
    pub fn fresh_key() -> String {
        format!("cycles-{}", uuid::Uuid::new_v4())
    }

    /// The subject of a client's default tenant; INVALID_ARGUMENT without one.
    pub fn default_subject(tenant: Option<&str>) -> Result<Subject, Error> {
        tenant.map(Subject::tenant).ok_or_else(|| {
            Error::invalid_argument("subject is required (or configure a tenant on the client)")
        })
    }
}

/// A guarded action that ran and whose actual was known.
#[derive(Debug)]
pub struct Guarded<T> {
    /// The work's own result, unchanged.
    pub value: T,
    /// The reservation that guarded it.
    pub reservation_id: String,
    /// The actual amount settled.
    pub actual: Amount,
    /// Committed, recovered via event, pending (journaled and being retried) or rejected.
    pub settlement: SettleOutcome,
    /// What the heartbeat did (`None` when disabled).
    pub lease: Option<LeaseReport>,
}

/// Why a guarded action did not end in a settled success.
#[derive(Debug, thiserror::Error)]
pub enum GuardError<E> {
    /// The reservation could not be made (denied, invalid, unreachable): the work did not run.
    #[error("reservation failed: {0}")]
    Reserve(#[source] Error),
    /// The work failed. Its error is returned unchanged; known usage was settled, otherwise the
    /// reservation was released.
    #[error("the guarded work failed")]
    Work {
        /// The work's own error.
        error: E,
        /// The reservation.
        reservation_id: String,
        /// The settlement of the usage known when the work failed, if any.
        settlement: Option<SettleOutcome>,
        /// The release's error, when no usage was known and the release itself failed.
        release_error: Option<Error>,
        /// What the heartbeat did.
        lease: Option<LeaseReport>,
    },
    /// The work succeeded but reported no actual amount: nothing was committed, and the
    /// reservation was released (see `release_error`).
    #[error("{}", missing_actual_text(reservation_id, release_error.as_ref()))]
    MissingActual {
        /// The reservation.
        reservation_id: String,
        /// What the heartbeat did.
        lease: Option<LeaseReport>,
        /// `None`: the reservation was released; else why the release failed (the estimate
        /// then stays held until the lease expires).
        release_error: Option<Error>,
    },
    /// The work reported a negative actual amount, which the protocol cannot carry: nothing
    /// was committed, and the reservation was released (see `release_error`).
    #[error("{}", invalid_actual_text(reservation_id, *actual, release_error.as_ref()))]
    InvalidActual {
        /// The reservation.
        reservation_id: String,
        /// The amount reported.
        actual: i64,
        /// `None`: the reservation was released; else why the release failed.
        release_error: Option<Error>,
    },
    /// Under [`FailurePolicy::FailOnFinalize`], the heartbeat stopped before the work ended.
    /// The known actual WAS settled (see `settlement`); the work's value is not returned.
    #[error("{lapse}")]
    HeartbeatLapsed {
        /// Why the heartbeat stopped.
        lapse: Box<HeartbeatLapse>,
        /// The settlement of the actual amount.
        settlement: SettleOutcome,
    },
}

/// The message of a missing actual, in every language (the bridge hands it to hosts).
pub fn missing_actual_text(reservation_id: &str, release_error: Option<&Error>) -> String {
    format!(
        "the guarded work on reservation {reservation_id} finished without reporting its \
         actual amount; nothing was committed, {}",
        released_text(release_error)
    )
}

/// The message of a negative actual, in every language.
pub fn invalid_actual_text(
    reservation_id: &str,
    actual: i64,
    release_error: Option<&Error>,
) -> String {
    format!(
        "the guarded work reported a negative actual amount ({actual}) for reservation \
         {reservation_id}; nothing was committed, {}",
        released_text(release_error)
    )
}

/// The message of a provider call an integration did not send (`why`: a caps plan's
/// [`crate::pricing::wire::CapsPlan::refusal`], or the host library's own reason), once
/// [`ActiveGuard::release`] ended its action (`ended`): the `CallNotSent` error of every
/// language.
pub fn not_sent_text(why: &str, reservation_id: &str, ended: &Finished) -> String {
    match ended {
        Finished::Released { release_error, .. } => format!(
            "{why}: the call was not sent, nothing was charged to reservation \
             {reservation_id}, {}",
            released_text(release_error.as_ref())
        ),
        // Usage reported while the call was refused is never dropped: the release settled it.
        _ => format!(
            "{why}: the call was not sent; usage reported on reservation {reservation_id} \
             meanwhile was settled instead of released"
        ),
    }
}

/// The reason a not-sent call's release sends to the server.
pub fn not_sent_reason(why: &str) -> String {
    format!("{why}: the call was not sent")
}

/// The end of a missing- or invalid-actual message: whether the estimate was given back.
fn released_text(release_error: Option<&Error>) -> String {
    match release_error {
        None => "and the reservation was released".to_string(),
        Some(e) => format!(
            "and releasing the reservation failed ({}: {}); the estimate stays held until \
             the lease expires",
            e.kind().name(),
            e.message()
        ),
    }
}

impl<E> GuardError<E> {
    /// The stable error kind of a guard outcome, as bindings report it; `None` for the work's
    /// own error, which passes through unchanged.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            GuardError::Reserve(e) => Some(e.kind().clone()),
            GuardError::Work { .. } => None,
            GuardError::MissingActual { .. } => Some(ErrorKind::MissingActual),
            GuardError::InvalidActual { .. } => Some(ErrorKind::InvalidArgument),
            GuardError::HeartbeatLapsed { .. } => Some(ErrorKind::HeartbeatLapsed),
        }
    }
}

/// Runs guarded work: owns a client, a settler and where events go.
#[derive(Clone, Debug)]
pub struct Guard {
    client: Arc<CyclesClient>,
    settler: Settler,
    events: EventSink,
}

fn transient_create_error(kind: &ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Connect
            | ErrorKind::Timeout
            | ErrorKind::ConnectionReset
            | ErrorKind::Transport
            | ErrorKind::ServerError
            | ErrorKind::AmbiguousSuccess
    )
}

impl Guard {
    /// A guard over `client` settling through `settler`; heartbeat events go to `events`.
    pub fn new(client: Arc<CyclesClient>, settler: Settler, events: EventSink) -> Guard {
        Guard {
            client,
            settler,
            events,
        }
    }

    /// The settlement engine (for `flush`/`drain` at shutdown).
    pub fn settler(&self) -> &Settler {
        &self.settler
    }

    async fn reserve(
        &self,
        spec: &GuardSpec,
    ) -> Result<(String, Response<ReservationCreateResponse>), Error> {
        let mut req = ReservationCreateRequest::new(
            spec.idempotency_key.clone(),
            spec.subject.clone(),
            spec.action.clone(),
            spec.estimate.clone(),
        );
        req.ttl_ms = Some(spec.ttl_ms);
        req.grace_period_ms = spec.grace_period_ms;
        req.overage_policy = spec.overage_policy.clone();
        req.metadata = spec.metadata.clone();
        let created = self
            .client
            .create_reservation_retrying(&req, |e| transient_create_error(e.kind()))
            .await?;
        let id = created.body.reservation_id.clone().ok_or_else(|| {
            Error::invalid_argument(
                "the create response carries no reservation_id (not a live reservation)",
            )
        })?;
        Ok((id, created))
    }

    /// Phase one of a guarded action, for hosts whose work is not a closure (context
    /// managers, decorators, streams): reserves `spec.estimate` and starts the heartbeat.
    /// Every [`ActiveGuard`] must end with [`ActiveGuard::finish`].
    pub async fn begin(&self, spec: GuardSpec) -> Result<ActiveGuard, Error> {
        let (reservation_id, created) = self.reserve(&spec).await?;
        let heartbeat = spec.heartbeat.then(|| {
            let config = HeartbeatConfig {
                policy: spec.policy,
                events: self.events.clone(),
                ..HeartbeatConfig::new(spec.ttl_ms)
            };
            Heartbeat::start(self.client.clone(), &reservation_id, &created, config)
        });
        let cancel = heartbeat
            .as_ref()
            .map_or_else(Default::default, Heartbeat::cancellation);
        let created = created.body;
        Ok(ActiveGuard {
            reservation_id,
            unit: spec.estimate.unit.clone(),
            decision: created.decision,
            caps: created.caps,
            usage: Usage::new(cancel),
            rest: Some(Unfinished {
                guard: self.clone(),
                spec,
                heartbeat,
            }),
        })
    }

    /// Reserves `spec.estimate`, runs `work` with a [`Usage`] while the heartbeat keeps the
    /// lease alive, then settles or releases as the module docs describe.
    pub async fn run<T, E, F, Fut>(
        &self,
        spec: GuardSpec,
        work: F,
    ) -> Result<Guarded<T>, GuardError<E>>
    where
        F: FnOnce(Usage) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let active = self.begin(spec).await.map_err(GuardError::Reserve)?;
        let outcome = work(active.usage().clone()).await;
        let finished = active.finish(outcome.is_ok()).await;
        match (outcome, finished) {
            (
                Ok(value),
                Finished::Settled {
                    reservation_id,
                    actual,
                    settlement,
                    lease,
                },
            ) => Ok(Guarded {
                value,
                reservation_id,
                actual,
                settlement,
                lease,
            }),
            (
                Err(error),
                Finished::WorkFailed {
                    reservation_id,
                    settlement,
                    release_error,
                    lease,
                },
            ) => Err(GuardError::Work {
                error,
                reservation_id,
                settlement,
                release_error,
                lease,
            }),
            (
                _,
                Finished::MissingActual {
                    reservation_id,
                    lease,
                    release_error,
                },
            ) => Err(GuardError::MissingActual {
                reservation_id,
                lease,
                release_error,
            }),
            (
                _,
                Finished::InvalidActual {
                    reservation_id,
                    actual,
                    release_error,
                },
            ) => Err(GuardError::InvalidActual {
                reservation_id,
                actual,
                release_error,
            }),
            (_, Finished::HeartbeatLapsed { lapse, settlement }) => {
                Err(GuardError::HeartbeatLapsed { lapse, settlement })
            }
            // `finish` mirrors `outcome.is_ok()` and never releases on request, so the other
            // pairs cannot occur.
            (Ok(_), Finished::WorkFailed { reservation_id, .. })
            | (Err(_), Finished::Settled { reservation_id, .. })
            | (_, Finished::Released { reservation_id, .. }) => {
                unreachable!("finish() disagreed with the work outcome for {reservation_id}")
            }
        }
    }

    async fn settle(
        &self,
        spec: &GuardSpec,
        reservation_id: &str,
        amount: i64,
        metrics: Option<crate::model::StandardMetrics>,
        metadata: Option<crate::model::JsonObject>,
    ) -> SettleOutcome {
        let commit = CommitRequest {
            metrics,
            metadata,
            ..CommitRequest::new(
                format!("{}:commit", spec.idempotency_key),
                Amount::new(spec.estimate.unit.clone(), amount),
            )
        };
        self.settler
            .settle(Settlement {
                reservation_id: reservation_id.to_string(),
                commit,
                fallback: Some(EventFallback {
                    subject: spec.subject.clone(),
                    action: spec.action.clone(),
                    overage_policy: spec.overage_policy.clone(),
                }),
            })
            .await
    }

    /// Releases the reservation with `{key}:release`; the release's error, if it failed.
    async fn release(&self, spec: &GuardSpec, reservation_id: &str, reason: &str) -> Option<Error> {
        let release = ReleaseRequest {
            reason: Some(reason.into()),
            ..ReleaseRequest::new(format!("{}:release", spec.idempotency_key))
        };
        self.client
            .release_reservation(reservation_id, &release)
            .await
            .err()
    }
}

/// How a guarded action ended, from [`ActiveGuard::finish`] (the work's own value or error
/// stays with the host).
#[derive(Debug)]
pub enum Finished {
    /// The work succeeded with a known actual, which was settled.
    Settled {
        /// The reservation.
        reservation_id: String,
        /// The actual amount settled.
        actual: Amount,
        /// Committed, recovered via event, pending or rejected.
        settlement: SettleOutcome,
        /// What the heartbeat did.
        lease: Option<LeaseReport>,
    },
    /// The work failed: known usage was settled, otherwise the reservation was released.
    WorkFailed {
        /// The reservation.
        reservation_id: String,
        /// The settlement of the usage known when the work failed, if any.
        settlement: Option<SettleOutcome>,
        /// The release's error, when no usage was known and the release failed.
        release_error: Option<Error>,
        /// What the heartbeat did.
        lease: Option<LeaseReport>,
    },
    /// The work succeeded without reporting an actual: nothing was committed, and the
    /// reservation was released.
    MissingActual {
        /// The reservation.
        reservation_id: String,
        /// What the heartbeat did.
        lease: Option<LeaseReport>,
        /// `None`: released; else why the release failed.
        release_error: Option<Error>,
    },
    /// The work reported a negative actual: nothing was committed, and the reservation was
    /// released.
    InvalidActual {
        /// The reservation.
        reservation_id: String,
        /// The amount reported.
        actual: i64,
        /// `None`: released; else why the release failed.
        release_error: Option<Error>,
    },
    /// The host ended the action with [`ActiveGuard::release`] before any usage was
    /// reported: the reservation was released.
    Released {
        /// The reservation.
        reservation_id: String,
        /// `None`: released; else why the release failed.
        release_error: Option<Error>,
        /// What the heartbeat did.
        lease: Option<LeaseReport>,
    },
    /// Under `FailOnFinalize` the heartbeat stopped early; the actual was still settled.
    HeartbeatLapsed {
        /// Why the heartbeat stopped.
        lapse: Box<HeartbeatLapse>,
        /// The settlement of the actual amount.
        settlement: SettleOutcome,
    },
}

/// A reservation whose work is running: phase two of [`Guard::begin`].
#[derive(Debug)]
pub struct ActiveGuard {
    reservation_id: String,
    unit: Unit,
    decision: Decision,
    caps: Option<Caps>,
    usage: Usage,
    /// Taken by `finish`; still present on drop means the host abandoned the action.
    rest: Option<Unfinished>,
}

/// What only `finish` needs (kept apart so a dropped guard can be finished without itself).
#[derive(Debug)]
struct Unfinished {
    guard: Guard,
    spec: GuardSpec,
    heartbeat: Option<Heartbeat>,
}

impl Drop for ActiveGuard {
    /// Finishes an abandoned action as failed work on a runtime (the caller's, else core's):
    /// the known usage is settled (journal first), otherwise the reservation is released.
    fn drop(&mut self) {
        let Some(rest) = self.rest.take() else {
            return;
        };
        let reservation_id = std::mem::take(&mut self.reservation_id);
        let usage = self.usage.clone();
        let handle = crate::runtime::spawn_target();
        tracing::warn!(
            target: "cycles::guard",
            reservation_id = %reservation_id,
            "a guarded action was dropped without finishing; settling its known usage, \
             else releasing it"
        );
        if let Some(handle) = handle {
            // The task owns only plain parts: if the runtime drops it unpolled (shutdown),
            // nothing re-enters this Drop; the heartbeat stops with its own Drop.
            handle.spawn(end_parts(reservation_id, usage, rest, End::Failed));
        }
    }
}

impl ActiveGuard {
    /// The reservation guarding the work.
    pub fn reservation_id(&self) -> &str {
        &self.reservation_id
    }

    /// The server's decision: `Allow` or `AllowWithCaps` (a denial never starts an action).
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The estimate's unit: the unit every actual of this action is in (an actual given in
    /// another unit is refused).
    pub fn unit(&self) -> &Unit {
        &self.unit
    }

    /// The limits the work should honour under `AllowWithCaps` (`None` otherwise), e.g. a
    /// lower `max_tokens` for the model call.
    pub fn caps(&self) -> Option<&Caps> {
        self.caps.as_ref()
    }

    /// Where the work reports its actual amount (and sees cancellation).
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// The rewrite this action's caps ask of a provider `request` for `api`
    /// ([`crate::pricing::wire::plan_caps`]; no caps: nothing to change). A rewrite, or a
    /// refusal to send, is reported as [`Event::CapsApplied`] before it is returned, so
    /// every integration says so the same way.
    pub fn plan_caps(&self, api: Api, request: &serde_json::Value) -> Result<CapsPlan, Error> {
        let Some(caps) = &self.caps else {
            return Ok(CapsPlan {
                bound_from: crate::pricing::tokens::request_output_bound(request)?,
                send: true,
                ..CapsPlan::default()
            });
        };
        let plan = wire::plan_caps(api, request, caps)?;
        if plan.changed() || !plan.send {
            if let Some(rest) = &self.rest {
                rest.guard.events.emit(Event::CapsApplied {
                    reservation_id: self.reservation_id.clone(),
                    api: api.as_str(),
                    bound_from: plan.bound_from,
                    bound_to: plan.bound_to,
                    removed_tools: plan.removed_tools.clone(),
                    send: plan.send,
                });
            }
        }
        Ok(plan)
    }

    /// Whether [`ActiveGuard::release`] may be called now: INVALID_ARGUMENT, the action left
    /// running, once usage was reported (a release would drop a known actual; end the
    /// action normally to commit it). Every language refuses a release with this check.
    pub fn check_release(&self) -> Result<(), Error> {
        match self.usage.actual() {
            None => Ok(()),
            Some(n) => Err(Error::invalid_argument(format!(
                "usage was already reported on reservation {} ({n}): a release would drop it; \
                 end the action normally to commit it",
                self.reservation_id
            ))),
        }
    }

    /// Ends the action early and gives the estimate back: stops the heartbeat and releases
    /// the reservation (`{key}:release`) with `reason`. Call [`ActiveGuard::check_release`]
    /// first; usage reported after that check (a report racing the release) is never
    /// dropped: it is settled instead, as [`ActiveGuard::finish`] with a successful work
    /// would.
    pub async fn release(mut self, reason: Option<String>) -> Finished {
        let rest = self
            .rest
            .take()
            .expect("an ActiveGuard is finished once (release consumes it)");
        let reservation_id = std::mem::take(&mut self.reservation_id);
        end_parts(
            reservation_id,
            self.usage.clone(),
            rest,
            End::Release(reason),
        )
        .await
    }

    /// Ends the guarded action: stops the heartbeat, then settles the known actual, else
    /// releases the reservation (work that failed, or succeeded, without an actual; a success
    /// without one is still reported as [`Finished::MissingActual`]).
    pub async fn finish(mut self, work_succeeded: bool) -> Finished {
        let rest = self
            .rest
            .take()
            .expect("an ActiveGuard is finished once (finish consumes it)");
        let reservation_id = std::mem::take(&mut self.reservation_id);
        let end = if work_succeeded {
            End::Succeeded
        } else {
            End::Failed
        };
        end_parts(reservation_id, self.usage.clone(), rest, end).await
    }
}

/// How the host ended an action.
enum End {
    /// The work succeeded.
    Succeeded,
    /// The work failed (or the action was abandoned).
    Failed,
    /// The host asked for a release, with this reason.
    Release(Option<String>),
}

/// [`ActiveGuard::finish`] / [`ActiveGuard::release`] on the guard's parts (also what an
/// abandoned guard's drop runs).
async fn end_parts(reservation_id: String, usage: Usage, rest: Unfinished, end: End) -> Finished {
    let Unfinished {
        guard,
        spec,
        heartbeat,
    } = rest;
    let lease = match heartbeat {
        Some(hb) => Some(hb.finish().await),
        None => None,
    };
    let (actual, metrics, metadata) = usage.take();
    if let Some(amount) = actual.filter(|a| *a < 0) {
        let release_error = guard
            .release(
                &spec,
                &reservation_id,
                "the guarded work reported a negative actual amount",
            )
            .await;
        return Finished::InvalidActual {
            reservation_id,
            actual: amount,
            release_error,
        };
    }
    match (end, actual) {
        (End::Succeeded | End::Release(_), Some(amount)) => {
            let settlement = guard
                .settle(&spec, &reservation_id, amount, metrics, metadata)
                .await;
            if let Some(Err(lapse)) = lease.as_ref().map(LeaseReport::check) {
                return Finished::HeartbeatLapsed { lapse, settlement };
            }
            Finished::Settled {
                reservation_id,
                actual: Amount::new(spec.estimate.unit.clone(), amount),
                settlement,
                lease,
            }
        }
        (End::Succeeded, None) => {
            let release_error = guard
                .release(
                    &spec,
                    &reservation_id,
                    "the guarded work ended without reporting an actual amount",
                )
                .await;
            Finished::MissingActual {
                reservation_id,
                lease,
                release_error,
            }
        }
        (End::Release(reason), None) => {
            let reason = reason.unwrap_or_else(|| "released by the caller".to_string());
            let release_error = guard.release(&spec, &reservation_id, &reason).await;
            Finished::Released {
                reservation_id,
                release_error,
                lease,
            }
        }
        (End::Failed, Some(amount)) => {
            let settlement = guard
                .settle(&spec, &reservation_id, amount, metrics, metadata)
                .await;
            Finished::WorkFailed {
                reservation_id,
                settlement: Some(settlement),
                release_error: None,
                lease,
            }
        }
        (End::Failed, None) => {
            let release_error = guard
                .release(
                    &spec,
                    &reservation_id,
                    "guarded work failed before reporting an actual amount",
                )
                .await;
            Finished::WorkFailed {
                reservation_id,
                settlement: None,
                release_error,
                lease,
            }
        }
    }
}
