//! Schedules and times as people say them: `Every 5 minutes`, `Monday to
//! Friday at 09:00`, `Every day at 07:30 and 18:00`, and a job's next run
//! as `Mon 7 Dec 2026, 09:00 CET` in the job's own time zone. Shapes that
//! have no short phrase here are left to the cron library's description.

use chrono::{Local, TimeZone};

const DAYS: [&str; 7] =
    ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// A 5-field cron expression in words, for the common shapes; `None` for
/// the others (and for 6-field or `@` expressions).
pub fn cron_in_words(expr: &str) -> Option<String> {
    let f: Vec<&str> = expr.split_whitespace().collect();
    let [minute, hour, day, month, weekday] = f.as_slice() else { return None };
    if *month != "*" {
        return None;
    }
    let minute_n: Option<u32> = minute.parse().ok().filter(|m| *m < 60);
    // Every N minutes / every minute.
    if (*hour, *day, *weekday) == ("*", "*", "*") {
        if *minute == "*" {
            return Some("Every minute".into());
        }
        if let Some(n) = minute.strip_prefix("*/").and_then(|n| n.parse::<u32>().ok()) {
            return Some(plural(n, "minute"));
        }
        return minute_n.map(|m| format!("Every hour at :{m:02}"));
    }
    let m = minute_n?;
    if let Some(n) = hour.strip_prefix("*/").and_then(|n| n.parse::<u32>().ok())
        && (*day, *weekday) == ("*", "*")
    {
        return Some(format!("{} at :{m:02}", plural(n, "hour")));
    }
    let hours: Vec<u32> =
        hour.split(',').map(|h| h.parse().ok().filter(|h| *h < 24)).collect::<Option<_>>()?;
    let at = join(&hours.iter().map(|h| format!("{h:02}:{m:02}")).collect::<Vec<_>>());
    match (*day, *weekday) {
        ("*", "*") => Some(format!("Every day at {at}")),
        ("*", days) => Some(format!("{} at {at}", weekdays(days)?)),
        (d, "*") => {
            let d: u32 = d.parse().ok().filter(|d| (1..=31).contains(d))?;
            Some(format!("Every month on the {} at {at}", ordinal(d)))
        }
        _ => None,
    }
}

/// `1-5` → `Monday to Friday`, `0,6` → `Saturday and Sunday`, `1` → `Every Monday`.
fn weekdays(field: &str) -> Option<String> {
    let day = |s: &str| s.parse::<usize>().ok().filter(|d| *d <= 7).map(|d| DAYS[d % 7]);
    if let Some((from, to)) = field.split_once('-') {
        return Some(format!("{} to {}", day(from)?, day(to)?));
    }
    let mut list: Vec<usize> = field
        .split(',')
        .map(|s| s.parse::<usize>().ok().filter(|d| *d <= 7).map(|d| d % 7))
        .collect::<Option<_>>()?;
    // The week as people count it: Monday first, Sunday last.
    list.sort_by_key(|d| (d + 6) % 7);
    list.dedup();
    let names: Vec<String> = list.iter().map(|d| DAYS[*d].to_string()).collect();
    match names.len() {
        1 => Some(format!("Every {}", names[0])),
        _ => Some(join(&names)),
    }
}

fn plural(n: u32, unit: &str) -> String {
    match n {
        1 => format!("Every {unit}"),
        n => format!("Every {n} {unit}s"),
    }
}

fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A duration in words: `2 hours`, `45 minutes`, `90 seconds`.
pub fn duration_in_words(ms: u64) -> String {
    let secs = ms / 1000;
    let (n, unit) = match secs {
        s if s > 0 && s % 86_400 == 0 => (s / 86_400, "day"),
        s if s > 0 && s % 3_600 == 0 => (s / 3_600, "hour"),
        s if s > 0 && s % 60 == 0 => (s / 60, "minute"),
        s => (s, "second"),
    };
    if n == 1 { format!("1 {unit}") } else { format!("{n} {unit}s") }
}

/// `ms` as a person reads it in time zone `tz` (the gateway's local time
/// when `None` or unknown): `Mon 7 Dec 2026, 09:00 CET`.
pub fn time_in_words(ms: u64, tz: Option<&str>) -> String {
    const FORMAT: &str = "%a %-d %b %Y, %H:%M %Z";
    let ms = ms as i64;
    match tz.and_then(|tz| tz.parse::<chrono_tz::Tz>().ok()) {
        Some(zone) => zone.timestamp_millis_opt(ms).single().map(|t| t.format(FORMAT).to_string()),
        None => Local.timestamp_millis_opt(ms).single().map(|t| t.format(FORMAT).to_string()),
    }
    .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_schedules_read_as_people_say_them() {
        let cases = [
            ("*/5 * * * *", "Every 5 minutes"),
            ("* * * * *", "Every minute"),
            ("15 * * * *", "Every hour at :15"),
            ("0 */2 * * *", "Every 2 hours at :00"),
            ("30 7 * * *", "Every day at 07:30"),
            ("0 9,18 * * *", "Every day at 09:00 and 18:00"),
            ("0 9 * * 1-5", "Monday to Friday at 09:00"),
            ("0 10 * * 0,6", "Saturday and Sunday at 10:00"),
            ("0 8 * * 1", "Every Monday at 08:00"),
            ("0 6 1 * *", "Every month on the 1st at 06:00"),
        ];
        for (expr, words) in cases {
            assert_eq!(cron_in_words(expr).as_deref(), Some(words), "{expr}");
        }
        assert_eq!(cron_in_words("0 9 1 1 *"), None, "left to the library");
    }

    #[test]
    fn a_time_reads_in_the_jobs_own_zone() {
        // 2026-12-07 08:00 UTC is 09:00 in Paris (winter time).
        let ms = 1_796_630_400_000;
        assert_eq!(time_in_words(ms, Some("Europe/Paris")), "Mon 7 Dec 2026, 09:00 CET");
        assert_eq!(time_in_words(ms, Some("UTC")), "Mon 7 Dec 2026, 08:00 UTC");
        assert_eq!(duration_in_words(7_200_000), "2 hours");
        assert_eq!(duration_in_words(60_000), "1 minute");
    }
}
