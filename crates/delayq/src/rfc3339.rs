//! RFC 3339 timestamps (`2026-12-01T10:00:00Z`, `…T11:00:00.250+01:00`), parsed in one place
//! for every entry point (HTTP `run_at`, the CLI's `--at` and `--jsonl`).

/// Formats ms since the epoch as `YYYY-MM-DDTHH:MM:SS.fffZ` (what [`parse_ms`] reads).
pub fn format_ms(ms: u64) -> String {
    match jiff::Timestamp::from_millisecond(ms.min(i64::MAX as u64) as i64) {
        Ok(t) => format!("{t:.3}"),
        Err(_) => ms.to_string(),
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` to ms since the epoch.
pub fn parse_ms(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[13] != b':' || b[16] != b':' || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut ms = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits: String = frac.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            return None;
        }
        ms = format!("{:0<3}", &digits[..digits.len().min(3)])
            .parse()
            .ok()?;
        rest = &frac[digits.len()..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let v = o[1..3].parse::<i64>().ok()? * 60 + o[4..6].parse::<i64>().ok()?;
            if o.starts_with('-') { -v } else { v }
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    u64::try_from(secs * 1000 + ms).ok()
}

#[cfg(test)]
mod tests {

    #[test]
    fn formats_what_it_parses() {
        let ms = 1_764_585_000_250;
        let s = format_ms(ms);
        assert_eq!(s, "2025-12-01T10:30:00.250Z");
        assert_eq!(parse_ms(&s), Some(ms));
    }

    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(parse_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_ms("2030-01-01T00:00:00Z"), Some(1_893_456_000_000));
        assert_eq!(
            parse_ms("2030-01-01T01:00:00.250+01:00"),
            Some(1_893_456_000_250)
        );
        assert_eq!(
            parse_ms("2029-12-31T23:30:00-00:30"),
            Some(1_893_456_000_000)
        );
        for bad in [
            "2030-01-01",
            "2030-13-01T00:00:00Z",
            "2030-01-01T00:00:00",
            "soon",
            "2030-01-01T00:00:00.Z",
        ] {
            assert_eq!(parse_ms(bad), None, "{bad}");
        }
    }
}
