//! Minimal RFC 3339 date-time parsing (the list window filters), without a date crate.

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn num(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parse `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` into epoch milliseconds.
pub(crate) fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.len() < 20 || !s.is_ascii() {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let sep = rest.as_bytes()[0];
    if sep != b'T' && sep != b't' && sep != b' ' {
        return None;
    }
    let rest = &rest[1..];
    let db = date.as_bytes();
    if db[4] != b'-' || db[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (num(&date[0..4])?, num(&date[5..7])?, num(&date[8..10])?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let tb = rest.as_bytes();
    if rest.len() < 9 || tb[2] != b':' || tb[5] != b':' {
        return None;
    }
    let (h, mi, sec) = (num(&rest[0..2])?, num(&rest[3..5])?, num(&rest[6..8])?);
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut tail = &rest[8..];
    let mut frac_ms = 0i64;
    if let Some(f) = tail.strip_prefix('.') {
        let digits: String = f.chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() {
            return None;
        }
        let ms3: String = format!("{:0<3}", &digits[..digits.len().min(3)]);
        frac_ms = num(&ms3)?;
        tail = &f[digits.len()..];
    }
    let offset_min = match tail {
        "Z" | "z" => 0,
        t if t.len() == 6 && (t.starts_with('+') || t.starts_with('-')) && &t[3..4] == ":" => {
            let oh = num(&t[1..3])?;
            let om = num(&t[4..6])?;
            if oh > 23 || om > 59 {
                return None;
            }
            let v = oh * 60 + om;
            if t.starts_with('-') {
                -v
            } else {
                v
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(secs * 1000 + frac_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parses() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(parse_rfc3339_ms("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("2026-11-29T00:00:00Z"),
            Some(1_795_910_400_000)
        );
        assert_eq!(parse_rfc3339_ms("nope"), None);
    }
}
