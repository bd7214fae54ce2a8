//! Byte-faithful settlement requests: the journaled bodies go out exactly as stored, through
//! the one transport ([`CyclesClient::commit_reservation_raw`] and
//! [`CyclesClient::create_event_raw`]), so classification, timeouts and headers are shared
//! with every other operation.

use serde_json::value::RawValue;

use crate::config::Config;
use crate::error::Error;
use crate::model::{CommitResponse, EventCreateResponse};
use crate::transport::CyclesClient;

/// The settlement transport for one server and credential.
pub(crate) struct Wire {
    client: CyclesClient,
}

impl Wire {
    pub(crate) fn new(config: &Config) -> Result<Wire, Error> {
        Ok(Wire {
            client: CyclesClient::new(config.clone())?,
        })
    }

    /// `POST /v1/reservations/{id}/commit` with `body` verbatim; 200 `CommitResponse` only.
    pub(crate) async fn commit(&self, id: &str, body: &RawValue) -> Result<CommitResponse, Error> {
        Ok(self.client.commit_reservation_raw(id, body).await?.body)
    }

    /// `POST /v1/events` with `body` verbatim; 201 `EventCreateResponse` only.
    pub(crate) async fn event(&self, body: &RawValue) -> Result<EventCreateResponse, Error> {
        Ok(self.client.create_event_raw(body).await?.body)
    }
}
