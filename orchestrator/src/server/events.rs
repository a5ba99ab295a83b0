//! A session's event log: every event gets the next id (1, 2, ...), is written to the
//! store before anyone sees it, then broadcast to live subscribers. An SSE client that
//! reconnects with `Last-Event-ID: N` is replayed everything after N from the store and
//! then follows live events, so it misses nothing and sees nothing twice.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use axum::response::sse::Event;
use futures::Stream;
use serde_json::Value;
use tokio::sync::broadcast;

use super::store::{Store, StoredEvent};

/// How many live events a slow subscriber may fall behind before it re-reads the store.
const LIVE_BUFFER: usize = 1024;
/// Events read from the store at a time while replaying.
const REPLAY_PAGE: usize = 256;

/// One session's numbered, persisted events.
pub struct EventLog {
    session: String,
    store: Arc<dyn Store>,
    /// The last id given out; held while an event is persisted so ids reach the store
    /// and the subscribers in order.
    last: Mutex<u64>,
    live: broadcast::Sender<Arc<StoredEvent>>,
}

impl EventLog {
    /// The log of `session`, continuing after the last event the store holds.
    pub fn open(session: &str, store: Arc<dyn Store>) -> Result<Self, super::store::StoreError> {
        let last = store.last_seq(session)?;
        Ok(Self {
            session: session.to_string(),
            store,
            last: Mutex::new(last),
            live: broadcast::channel(LIVE_BUFFER).0,
        })
    }

    /// Records and publishes an event; returns its id. A store failure is logged and the
    /// event still goes to live subscribers (a reconnecting client may then miss it).
    pub fn emit(&self, kind: &str, data: Value) -> u64 {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        *last += 1;
        let event = StoredEvent {
            seq: *last,
            kind: kind.to_string(),
            data,
        };
        if let Err(e) = self.store.append_event(&self.session, &event) {
            tracing::error!(session = %self.session, error = %e, "persisting an event failed");
        }
        let seq = event.seq;
        let _ = self.live.send(Arc::new(event));
        seq
    }

    /// The id of the last event.
    pub fn last_id(&self) -> u64 {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything after `after`, then live events; ends after the session's `ended` event.
    pub fn stream(
        self: &Arc<Self>,
        after: u64,
    ) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static + use<> {
        // Subscribed before the first read of the store: nothing falls in between.
        let state = Follow {
            log: self.clone(),
            live: self.live.subscribe(),
            last: after,
            backlog: VecDeque::new(),
            done: false,
        };
        futures::stream::unfold(state, |mut state| async move {
            let event = state.next().await?;
            Some((Ok(to_sse(&event)), state))
        })
    }
}

struct Follow {
    log: Arc<EventLog>,
    live: broadcast::Receiver<Arc<StoredEvent>>,
    last: u64,
    backlog: VecDeque<StoredEvent>,
    done: bool,
}

impl Follow {
    async fn next(&mut self) -> Option<StoredEvent> {
        if self.done {
            return None;
        }
        loop {
            if let Some(event) = self.backlog.pop_front() {
                return Some(self.deliver(event));
            }
            if self.log.last_id() > self.last {
                match self
                    .log
                    .store
                    .events_after(&self.log.session, self.last, REPLAY_PAGE)
                {
                    Ok(page) if !page.is_empty() => {
                        self.backlog.extend(page);
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "replaying events failed"),
                }
            }
            match self.live.recv().await {
                Ok(event) if event.seq == self.last + 1 => {
                    return Some(self.deliver((*event).clone()));
                }
                // Already sent, or a gap the store fills on the next turn of the loop.
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    fn deliver(&mut self, event: StoredEvent) -> StoredEvent {
        self.last = event.seq;
        self.done = is_final(&event);
        event
    }
}

/// The `ended` lifecycle event is the last a session sends.
fn is_final(event: &StoredEvent) -> bool {
    event.kind == "lifecycle" && event.data["state"] == "ended"
}

fn to_sse(event: &StoredEvent) -> Event {
    Event::default()
        .id(event.seq.to_string())
        .event(&event.kind)
        .data(event.data.to_string())
}
