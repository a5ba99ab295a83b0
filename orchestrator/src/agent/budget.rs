//! What model calls cost (`policies/model-prices.json`, compiled in) and the session's
//! running total, for `--max-budget-usd` and the results' `total_cost_usd`.

use std::sync::LazyLock;

use serde::Deserialize;

use crate::model::Usage;

const TEXT: &str = include_str!("../../../policies/model-prices.json");

static PRICES: LazyLock<Result<PriceTable, String>> = LazyLock::new(|| PriceTable::parse(TEXT));

/// The shipped table (checked by a unit test). Should it ever fail to parse, nothing is
/// priced, and a session with a budget ends before it spends: failing closed.
pub fn prices() -> Result<&'static PriceTable, String> {
    PRICES
        .as_ref()
        .map_err(|e| format!("policies/model-prices.json: {e}"))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    pub version: u32,
    pub why: String,
    pub models: Vec<ModelPrice>,
}

/// US dollars per million tokens.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub prefix: String,
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
    /// The rates of a request whose prompt is longer (models priced by prompt length).
    #[serde(default)]
    pub long_prompt: Option<LongPrompt>,
    pub why: String,
}

/// A model's rates for a request whose prompt (input, cache reads and cache writes) is
/// over `above_tokens`: every token of that request, output included, is billed at them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongPrompt {
    pub above_tokens: u64,
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
}

impl PriceTable {
    pub fn parse(text: &str) -> Result<Self, String> {
        let table: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if table.version != 1 {
            return Err(format!("unknown version {}", table.version));
        }
        for m in &table.models {
            let mut prices = vec![m.input, m.output, m.cache_write, m.cache_read];
            if let Some(l) = &m.long_prompt {
                prices.extend([l.input, l.output, l.cache_write, l.cache_read]);
            }
            if m.prefix.is_empty() || m.why.trim().is_empty() {
                return Err("every model needs a prefix and a why".into());
            }
            if prices.iter().any(|p| !p.is_finite() || *p < 0.0) {
                return Err(format!("{}: prices must be non-negative numbers", m.prefix));
            }
        }
        Ok(table)
    }

    /// The price of `model`: the entry with the longest prefix it starts with.
    pub fn for_model(&self, model: &str) -> Option<&ModelPrice> {
        self.models
            .iter()
            .filter(|m| model.starts_with(&m.prefix))
            .max_by_key(|m| m.prefix.len())
    }
}

impl ModelPrice {
    /// What `usage` (one request) cost, in US dollars.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let prompt =
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
        let [input, output, cache_write, cache_read] = match &self.long_prompt {
            Some(l) if prompt > l.above_tokens => [l.input, l.output, l.cache_write, l.cache_read],
            _ => [self.input, self.output, self.cache_write, self.cache_read],
        };
        // Token counts stay far below 2^53: the conversion is exact.
        #[allow(clippy::cast_precision_loss)]
        let per_million = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per_million(usage.input_tokens, input)
            + per_million(usage.output_tokens, output)
            + per_million(usage.cache_creation_input_tokens, cache_write)
            + per_million(usage.cache_read_input_tokens, cache_read)
    }
}

/// One session's [`Spend`], shared by its loop and its sub-agents' loops (clones share it).
#[derive(Debug, Clone, Default)]
pub struct SharedSpend(std::sync::Arc<std::sync::Mutex<Spend>>);

impl SharedSpend {
    fn lock(&self) -> std::sync::MutexGuard<'_, Spend> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn add(&self, model: &str, usage: &Usage) {
        self.lock().add(model, usage);
    }

    pub fn total(&self) -> Option<f64> {
        self.lock().total()
    }

    pub fn over(&self, budget: f64) -> Option<String> {
        self.lock().over(budget)
    }
}

/// The session's spending so far.
#[derive(Debug, Clone, Default)]
pub struct Spend {
    /// US dollars of the priced calls.
    pub usd: f64,
    /// A model without a price answered: the total is incomplete.
    pub unpriced: Option<String>,
}

impl Spend {
    /// Adds one call of `model`.
    pub fn add(&mut self, model: &str, usage: &Usage) {
        match prices().ok().and_then(|t| t.for_model(model)) {
            Some(price) => self.usd += price.cost(usage),
            None => self.unpriced = Some(model.to_string()),
        }
    }

    /// The total to report (none once an unpriced model answered).
    pub fn total(&self) -> Option<f64> {
        self.unpriced.is_none().then_some(self.usd)
    }

    /// Why no further call may start under `budget`, if one may not.
    pub fn over(&self, budget: f64) -> Option<String> {
        if let Some(model) = &self.unpriced {
            return Some(format!(
                "model {model} has no price in policies/model-prices.json, so the budget \
                 of ${budget} (--max-budget-usd) cannot be kept"
            ));
        }
        (self.usd >= budget).then(|| {
            format!(
                "reached the maximum budget of ${budget} (--max-budget-usd): ${:.6} spent",
                self.usd
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses_and_prices_by_the_longest_prefix() {
        let table = prices().unwrap();
        assert_eq!(
            table.for_model("claude-opus-4-5-20251101").unwrap().input,
            5.0
        );
        assert_eq!(
            table.for_model("claude-opus-4-20250514").unwrap().input,
            15.0
        );
        assert_eq!(table.for_model("claude-sonnet-4-5").unwrap().output, 15.0);
        assert!(table.for_model("gpt-4").is_none());
        // Newer models get their own entries, not an older family's by a shorter prefix.
        let input = |m: &str| table.for_model(m).unwrap().input;
        assert_eq!(input("claude-opus-4-6"), 5.0, "not claude-opus-4's $15");
        assert_eq!(input("claude-opus-5-5"), 4.0);
        assert_eq!(input("claude-opus-5"), 5.0);
        assert_eq!(input("claude-sonnet-5-5"), 2.0);
        assert_eq!(
            table.for_model("claude-fable-5-1").unwrap().cache_read,
            0.25
        );
        assert_eq!(table.for_model("claude-fable-5").unwrap().cache_read, 1.0);
    }

    #[test]
    fn a_long_prompt_is_billed_wholly_at_its_tier() {
        let haiku = prices().unwrap().for_model("claude-haiku-5-5").unwrap();
        let short = Usage {
            input_tokens: 60_000,
            output_tokens: 1_000_000,
            cache_read_input_tokens: 40_000,
            cache_creation_input_tokens: 0,
        };
        // 60k x $0.10 + 1M x $0.50 + 40k x $0.01 per million.
        assert!((haiku.cost(&short) - (0.006 + 0.5 + 0.0004)).abs() < 1e-9);
        let long = Usage {
            cache_read_input_tokens: 40_001,
            ..short
        };
        // Over 100,000 prompt tokens: every token at the higher rates, output included.
        let expected = 60_000.0 * 0.5 / 1e6 + 2.5 + 40_001.0 * 0.05 / 1e6;
        assert!((haiku.cost(&long) - expected).abs() < 1e-9);
    }

    #[test]
    fn spend_adds_every_token_kind_and_stops_at_the_budget() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_input_tokens: 1_000_000,
            cache_creation_input_tokens: 0,
        };
        let mut spend = Spend::default();
        spend.add("claude-sonnet-4-5", &usage);
        assert!((spend.usd - (3.0 + 1.5 + 0.3)).abs() < 1e-9);
        assert_eq!(spend.over(10.0), None);
        assert!(spend.over(4.0).unwrap().contains("maximum budget"));
        spend.add("someone-elses-model", &usage);
        assert_eq!(spend.total(), None);
        assert!(spend.over(100.0).unwrap().contains("no price"));
    }

    #[test]
    fn bad_tables_are_refused() {
        assert!(PriceTable::parse(r#"{"version":2,"why":"x","models":[]}"#).is_err());
        assert!(
            PriceTable::parse(
                r#"{"version":1,"why":"x","models":[{"prefix":"a","input":-1,"output":1,"cache_write":1,"cache_read":1,"why":"y"}]}"#
            )
            .is_err()
        );
    }
}
