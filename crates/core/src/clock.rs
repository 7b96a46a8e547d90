//! Wall-clock timestamps as RFC 3339 UTC strings and sortable ids, without a
//! date library.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch.
pub fn unix_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `2026-11-30T04:31:51Z` for the current time.
pub fn now_rfc3339() -> String {
    rfc3339(unix_seconds())
}

/// `2026-11-30T04:31:51Z` for a Unix time.
pub fn rfc3339(secs: u64) -> String {
    let (y, m, d, hh, mm, ss) = civil(secs);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// A new session id: UTC time plus 4 random hex digits, e.g. `20261130-043151-9f2c`.
/// Sorts by creation time; short enough to type after `--resume`.
pub fn session_id() -> String {
    let (y, m, d, hh, mm, ss) = civil(unix_seconds());
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}-{:04x}", fastrand::u16(..))
}

/// Year, month, day, hour, minute, second of a Unix time (proleptic Gregorian, UTC).
fn civil(secs: u64) -> (i64, u32, u32, u64, u64, u64) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_013_111), "2026-11-30T04:31:51Z");
    }

    #[test]
    fn session_ids_sort_by_time() {
        let id = session_id();
        assert_eq!(id.len(), 20, "{id}");
        assert!(id.starts_with("20"));
    }
}
