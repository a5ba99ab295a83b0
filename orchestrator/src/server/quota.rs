//! Per-tenant quotas: how many sessions may be open at once, how many session starts
//! and exec calls a minute, and how many model tokens a day. A refusal says which quota and when to try again (429 with
//! `Retry-After`). The sandbox's memory, pids and CPU are the tenant's managed settings
//! (`sandbox.limits`), which a session cannot override.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::errors::ApiError;

/// A tenant's quotas; an absent field is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quotas {
    /// Sessions not ended (starting, running, idle, paused, failed).
    pub max_sessions: Option<usize>,
    pub session_starts_per_minute: Option<usize>,
    pub exec_per_minute: Option<usize>,
    /// Model tokens (input, output, cache reads and writes) per UTC day.
    pub tokens_per_day: Option<u64>,
}

/// What a rate quota counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rate {
    SessionStart,
    Exec,
}

const WINDOW: Duration = Duration::from_secs(60);

/// Sliding one-minute windows per tenant and rate.
#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<(String, Rate), VecDeque<Instant>>>,
}

impl RateLimiter {
    /// Counts one use of `rate` by `tenant`, or refuses it when `limit` uses fell in the
    /// last minute.
    pub fn take(&self, tenant: &str, rate: Rate, limit: Option<usize>) -> Result<(), ApiError> {
        let Some(limit) = limit else {
            return Ok(());
        };
        let now = Instant::now();
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let window = windows.entry((tenant.to_string(), rate)).or_default();
        while window
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            window.pop_front();
        }
        if window.len() >= limit {
            let oldest = window.front().copied().unwrap_or(now);
            let wait = WINDOW.saturating_sub(now.duration_since(oldest)).as_secs() + 1;
            let what = match rate {
                Rate::SessionStart => "session starts per minute",
                Rate::Exec => "exec calls per minute",
            };
            return Err(ApiError::quota(
                format!("quota exceeded: {limit} {what} for this tenant"),
                wait,
            ));
        }
        window.push_back(now);
        Ok(())
    }
}

/// Refuses one more session when `open` sessions already count against `max`.
pub fn check_sessions(open: usize, quotas: &Quotas) -> Result<(), ApiError> {
    match quotas.max_sessions {
        Some(max) if open >= max => Err(ApiError::quota(
            format!(
                "quota exceeded: at most {max} open sessions for this tenant; delete one first"
            ),
            // No clock frees a session slot: a minute is a fair hint to poll again.
            60,
        )),
        _ => Ok(()),
    }
}

/// Refuses a new turn once `used` tokens reached the tenant's daily quota; the retry hint
/// is the time left until midnight UTC.
pub fn check_tokens(used: u64, quotas: &Quotas, now_unix: u64) -> Result<(), ApiError> {
    match quotas.tokens_per_day {
        Some(max) if used >= max => Err(ApiError::quota(
            format!("quota exceeded: {max} model tokens a day for this tenant (used {used})"),
            86_400 - now_unix % 86_400,
        )),
        _ => Ok(()),
    }
}

/// Today's date (UTC), the key of the daily token count.
pub fn today() -> String {
    crate::session::record::now_rfc3339()[..10].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_refuses_past_the_limit_and_counts_tenants_apart() {
        let limiter = RateLimiter::default();
        limiter.take("a", Rate::Exec, Some(2)).unwrap();
        limiter.take("a", Rate::Exec, Some(2)).unwrap();
        let refused = limiter.take("a", Rate::Exec, Some(2)).unwrap_err();
        assert_eq!(refused.status, axum::http::StatusCode::TOO_MANY_REQUESTS);
        assert!(refused.retry_after.is_some_and(|s| (1..=61).contains(&s)));
        limiter.take("b", Rate::Exec, Some(2)).unwrap();
        limiter.take("a", Rate::SessionStart, None).unwrap();
    }

    #[test]
    fn the_daily_token_quota_says_when_it_resets() {
        let q = Quotas {
            tokens_per_day: Some(100),
            ..Quotas::default()
        };
        assert!(check_tokens(99, &q, 0).is_ok());
        let refused = check_tokens(100, &q, 86_400 * 3 + 86_000).unwrap_err();
        assert_eq!(refused.retry_after, Some(400));
    }

    #[test]
    fn open_sessions_are_capped() {
        let q = Quotas {
            max_sessions: Some(1),
            ..Quotas::default()
        };
        assert!(check_sessions(0, &q).is_ok());
        assert!(check_sessions(1, &q).is_err());
    }
}
