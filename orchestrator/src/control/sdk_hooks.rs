//! The client's hook functions: registered from `initialize`, run through `hook_callback`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::channel::Controller;
use super::protocol::HookMatcherConfig;
use crate::hooks::{HookCallbacks, HookEvent, HookSet};

/// Runs hook callbacks in the client (the Agent SDK's `hooks` option).
pub struct SdkHookCallbacks {
    controller: Arc<Controller>,
}

impl SdkHookCallbacks {
    pub fn new(controller: Arc<Controller>) -> Self {
        Self { controller }
    }
}

#[tonic::async_trait]
impl HookCallbacks for SdkHookCallbacks {
    async fn call(
        &self,
        callback_id: &str,
        input: Value,
        tool_use_id: Option<String>,
    ) -> Result<Value, String> {
        self.controller
            .request(json!({
                "subtype": "hook_callback",
                "callback_id": callback_id,
                "input": input,
                "tool_use_id": tool_use_id,
            }))
            .await
            .map_err(|e| e.to_string())
    }
}

/// Registers the client's matchers (from `initialize`) in the session's hooks; returns
/// how many callbacks were registered. Events Cordon does not know are skipped with a
/// warning (newer SDKs know more events than we fire), a bad matcher regex is an error.
pub fn register(
    set: &HookSet,
    hooks: &BTreeMap<String, Vec<HookMatcherConfig>>,
) -> Result<usize, String> {
    let mut count = 0;
    for (event_name, matchers) in hooks {
        let Some(event) = HookEvent::parse(event_name) else {
            tracing::warn!(event = %event_name, "the client's hooks for an unknown event are ignored");
            continue;
        };
        for m in matchers {
            if m.timeout.is_some() {
                tracing::debug!(event = %event_name, "per-matcher callback timeouts are not applied");
            }
            for id in &m.hook_callback_ids {
                set.add_callback(event, m.matcher.as_deref(), id)
                    .map_err(|e| e.to_string())?;
                count += 1;
            }
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_known_events_and_skips_unknown_ones() {
        let hooks: BTreeMap<String, Vec<HookMatcherConfig>> = serde_json::from_value(json!({
            "PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0", "hook_1"]}],
            "Stop": [{"matcher": null, "hookCallbackIds": ["hook_2"]}],
            "SomeFutureEvent": [{"hookCallbackIds": ["hook_3"]}],
        }))
        .unwrap();
        let set = HookSet::default();
        assert_eq!(register(&set, &hooks).unwrap(), 3);
        assert_eq!(set.for_event(HookEvent::PreToolUse, Some("Bash")).len(), 2);
        assert!(
            set.for_event(HookEvent::PreToolUse, Some("Write"))
                .is_empty()
        );
        assert_eq!(set.for_event(HookEvent::Stop, None).len(), 1);
    }

    #[tokio::test]
    async fn callbacks_go_out_as_hook_callback_requests() {
        let (controller, mut rx) = Controller::new();
        let callbacks = SdkHookCallbacks::new(controller.clone());
        let calling = tokio::spawn(async move {
            callbacks
                .call("hook_0", json!({"tool_name": "Bash"}), Some("t1".into()))
                .await
        });
        let sent = rx.recv().await.unwrap();
        assert_eq!(sent["request"]["subtype"], "hook_callback");
        assert_eq!(sent["request"]["callback_id"], "hook_0");
        assert_eq!(sent["request"]["input"]["tool_name"], "Bash");
        assert_eq!(sent["request"]["tool_use_id"], "t1");
        controller.resolve(
            sent["request_id"].as_str().unwrap(),
            Ok(json!({"continue": true})),
        );
        assert_eq!(calling.await.unwrap(), Ok(json!({"continue": true})));
    }
}
