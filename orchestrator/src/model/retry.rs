//! Retry policy: exponential backoff with full jitter, and the server's `retry-after`.

use std::time::Duration;

use rand::Rng;
use reqwest::header::HeaderMap;

/// How often and how long to wait before sending a failed model request again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so at most `max_retries + 1` requests).
    pub max_retries: u32,
    /// Backoff cap for the first retry; doubles per retry.
    pub base_delay: Duration,
    /// Upper bound of the exponential backoff.
    pub max_delay: Duration,
    /// Upper bound on a server-requested `retry-after`, so a bogus header cannot park a
    /// session for hours.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 8,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(32),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0 for the first retry). A server-requested
    /// delay wins; otherwise full jitter: uniform in `[0, min(max_delay, base * 2^retry)]`,
    /// which spreads a crowd of clients hit by the same overload.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(requested) = retry_after {
            return requested.min(self.max_retry_after);
        }
        let ceiling = self
            .base_delay
            .saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
            .min(self.max_delay);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

/// `retry-after-ms` (milliseconds, the API's precise form) or `retry-after` (seconds).
/// HTTP-date values are not used by the API and are ignored.
pub fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    // try_from: an absurd value must not panic the client.
    if let Some(ms) = number("retry-after-ms") {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    number("retry-after").and_then(|s| Duration::try_from_secs_f64(s).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn full_jitter_stays_under_the_exponential_ceiling() {
        let policy = RetryPolicy {
            max_retries: 8,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(5),
        };
        for retry in 0..40 {
            let ceiling = Duration::from_millis(100 << retry.min(4)).min(Duration::from_secs(1));
            for _ in 0..20 {
                assert!(policy.delay(retry, None) <= ceiling);
            }
        }
    }

    #[test]
    fn server_delay_wins_but_is_capped() {
        let policy = RetryPolicy {
            max_retry_after: Duration::from_secs(5),
            ..Default::default()
        };
        let two = Some(Duration::from_secs(2));
        assert_eq!(policy.delay(3, two), Duration::from_secs(2));
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(900))),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn zero_base_delay_means_no_wait() {
        let policy = RetryPolicy {
            base_delay: Duration::ZERO,
            ..Default::default()
        };
        assert_eq!(policy.delay(5, None), Duration::ZERO);
    }

    #[test]
    fn retry_after_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(parse_retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(
            parse_retry_after(&headers),
            Some(Duration::from_millis(250))
        );
        headers.insert("retry-after-ms", HeaderValue::from_static("soon"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(parse_retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("1e300"));
        assert_eq!(parse_retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("-1"));
        assert_eq!(parse_retry_after(&headers), None);
    }
}
