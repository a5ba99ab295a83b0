//! The web tools' keys (Cordon's own): `webSearch` (bool, default false) offers WebSearch,
//! which needs an endpoint that runs the server-side web search; `webFetchModel` (string)
//! names the model that answers WebFetch prompts (default: the session's model).
//!
//! The highest-precedence file that sets a key wins.

use serde_json::Value;

use super::Settings;

impl Settings {
    /// Whether WebSearch is offered.
    pub fn web_search_enabled(&self) -> bool {
        self.files()
            .iter()
            .find_map(|f| f.value.get("webSearch").and_then(Value::as_bool))
            .unwrap_or(false)
    }

    /// The model WebFetch asks, when the settings name one.
    pub fn web_fetch_model(&self) -> Option<String> {
        self.files().iter().find_map(|f| {
            f.value
                .get("webFetchModel")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .map(str::to_string)
        })
    }
}
