//! Regular expressions for leaf values: bounded integers and numbers, string formats, and the
//! small escaping helpers the grammar generator needs.
//!
//! Every regex here is written for llguidance's regex dialect (Rust `regex-syntax`), uses no
//! raw `/` (so it can sit inside a Lark `/.../` literal) and no anchors (lexemes are always
//! matched whole).

/// Largest number of digits a generated integer may have: keeps every value inside `i64`
/// and exactly representable as `f64` (so JSON parsers and `str::parse` both agree).
pub const MAX_DIGITS: u32 = 15;
const MAX_MAGNITUDE: u64 = 10u64.pow(MAX_DIGITS) - 1;
/// Fraction digits allowed in generated non-integer numbers.
const MAX_FRACTION_DIGITS: usize = 6;

/// Regex for the integers in `[lo, hi]` (either side may be open), with no leading zeros,
/// no `+`, no `-0`. `None` when the range is empty.
pub fn integer_range(lo: Option<i64>, hi: Option<i64>) -> Option<String> {
    let cap = MAX_MAGNITUDE as i64;
    let lo = lo.unwrap_or(-cap).max(-cap);
    let hi = hi.unwrap_or(cap).min(cap);
    if lo > hi {
        return None;
    }
    let mut alts = Vec::new();
    if lo < 0 {
        // negatives: "-" followed by the magnitudes in [max(1, -hi), -lo]
        let m_lo = if hi < 0 { (-hi) as u64 } else { 1 };
        let m_hi = (-lo) as u64;
        for p in nonneg_range(m_lo, m_hi) {
            alts.push(format!("-{p}"));
        }
    }
    if hi >= 0 {
        alts.extend(nonneg_range(lo.max(0) as u64, hi as u64));
    }
    Some(group(&alts))
}

/// Regex for `number` values in `[lo, hi]` (bounds inclusive unless the `exclusive` flag is
/// set). The language is a subset of the interval: integers in range, plus decimals `I.F`
/// (non-zero fraction, at most six digits) whose whole unit interval `(I, I+1)` lies inside.
/// `None` when nothing is representable.
pub fn number_range(lo: Option<(f64, bool)>, hi: Option<(f64, bool)>) -> Option<String> {
    let int_lo = lo.map(|(v, excl)| {
        if excl && v.fract() == 0.0 {
            v as i64 + 1
        } else {
            v.ceil() as i64
        }
    });
    let int_hi = hi.map(|(v, excl)| {
        if excl && v.fract() == 0.0 {
            v as i64 - 1
        } else {
            v.floor() as i64
        }
    });
    let mut alts = Vec::new();
    if let Some(r) = integer_range(int_lo, int_hi) {
        alts.push(r);
    }
    let frac = format!("\\.[0-9]{{0,{}}}[1-9]", MAX_FRACTION_DIGITS - 1);
    let cap = MAX_MAGNITUDE as f64;
    let (lo_v, hi_v) = (
        lo.map_or(-cap - 1.0, |b| b.0),
        hi.map_or(cap + 1.0, |b| b.0),
    );
    // non-negative integer parts I with lo <= I and I + 1 <= hi
    let i_lo = lo_v.ceil().max(0.0);
    let i_hi = (hi_v.floor() - 1.0).min(cap - 1.0);
    if i_lo <= i_hi {
        for p in nonneg_range(i_lo as u64, i_hi as u64) {
            alts.push(format!("{p}{frac}"));
        }
    }
    // negative numbers -M.F with lo <= -(M+1) and -M <= hi
    let m_lo = (-hi_v).ceil().max(0.0);
    let m_hi = ((-lo_v).floor() - 1.0).min(cap - 1.0);
    if m_lo <= m_hi {
        for p in nonneg_range(m_lo as u64, m_hi as u64) {
            alts.push(format!("-{p}{frac}"));
        }
    }
    if alts.is_empty() {
        None
    } else {
        Some(group(&alts))
    }
}

fn group(alts: &[String]) -> String {
    if alts.len() == 1 {
        format!("(?:{})", alts[0])
    } else {
        format!("(?:{})", alts.join("|"))
    }
}

/// Alternatives matching exactly the decimal numbers in `[a, b]` (no leading zeros).
fn nonneg_range(a: u64, b: u64) -> Vec<String> {
    if a > b {
        return Vec::new();
    }
    let (da, db) = (digits(a), digits(b));
    let mut out = Vec::new();
    if da == db {
        out.extend(same_len(&a.to_string(), &b.to_string()));
        return out;
    }
    out.extend(same_len(&a.to_string(), &"9".repeat(da as usize)));
    for len in da + 1..db {
        out.push(format!("[1-9][0-9]{{{}}}", len - 1));
    }
    out.extend(same_len(
        &format!("1{}", "0".repeat(db as usize - 1)),
        &b.to_string(),
    ));
    out
}

fn digits(x: u64) -> u32 {
    if x == 0 {
        1
    } else {
        x.ilog10() + 1
    }
}

/// Alternatives for the numbers between two digit strings of equal length (inclusive).
fn same_len(a: &str, b: &str) -> Vec<String> {
    let n = a.len();
    if n == 0 {
        return vec![String::new()];
    }
    if a == b {
        return vec![a.to_string()];
    }
    let (a0, b0) = (a.as_bytes()[0] - b'0', b.as_bytes()[0] - b'0');
    let (ar, br) = (&a[1..], &b[1..]);
    if a0 == b0 {
        return same_len(ar, br)
            .into_iter()
            .map(|s| format!("{a0}{s}"))
            .collect();
    }
    let mut out = Vec::new();
    let rest = |k: usize| {
        if k == 0 {
            String::new()
        } else {
            format!("[0-9]{{{k}}}")
        }
    };
    let low_full = ar.bytes().all(|c| c == b'0');
    let high_full = br.bytes().all(|c| c == b'9');
    let mid_lo = if low_full {
        a0
    } else {
        out.extend(
            same_len(ar, &"9".repeat(n - 1))
                .into_iter()
                .map(|s| format!("{a0}{s}")),
        );
        a0 + 1
    };
    let mid_hi = if high_full { b0 } else { b0 - 1 };
    if mid_lo <= mid_hi {
        out.push(format!("{}{}", digit_class(mid_lo, mid_hi), rest(n - 1)));
    }
    if !high_full {
        out.extend(
            same_len(&"0".repeat(n - 1), br)
                .into_iter()
                .map(|s| format!("{b0}{s}")),
        );
    }
    out
}

fn digit_class(lo: u8, hi: u8) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("[{lo}-{hi}]")
    }
}

/// Regex for a JSON Schema `format`, or `None` when we do not know the format.
pub fn format_regex(format: &str) -> Option<&'static str> {
    const DATE: &str = "[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])";
    const TIME: &str =
        "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
    Some(match format {
        "date" => DATE,
        "time" => TIME,
        "date-time" => {
            "[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
        }
        "uuid" => "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        "email" => "[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\\.[A-Za-z0-9-]{1,63})+",
        "ipv4" => "(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
        "hostname" => "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*",
        "uri" | "url" => "[A-Za-z][A-Za-z0-9+.-]*:[^\\s\"\\\\<>{}|^`]+",
        _ => return None,
    })
}

/// A JSON Schema `pattern` (an unanchored search) as a whole-match regex, with `/` escaped.
pub fn anchored_pattern(pattern: &str) -> String {
    let mut p = pattern;
    let start = p.starts_with('^');
    if start {
        p = &p[1..];
    }
    // a trailing `$` that is not escaped
    let end = p.ends_with('$') && !p.ends_with("\\$");
    if end {
        p = &p[..p.len() - 1];
    }
    let body = escape_slashes(p);
    let pre = if start { "" } else { "(?s:.*)" };
    let post = if end { "" } else { "(?s:.*)" };
    format!("{pre}(?:{body}){post}")
}

/// Replace unescaped `/` with `\x2F` so a regex fits inside a Lark `/.../` literal.
pub fn escape_slashes(rx: &str) -> String {
    let mut out = String::with_capacity(rx.len());
    let mut chars = rx.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('/') => out.push_str("\\x2F"),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            },
            '/' => out.push_str("\\x2F"),
            c => out.push(c),
        }
    }
    out
}

/// A regex matching exactly `s` (non-alphanumeric characters as `\x{..}` escapes).
pub fn escape_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            out.push_str(&format!("\\x{{{:X}}}", c as u32));
        }
    }
    out
}

/// A Lark string literal for `s`.
pub fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The JSON-escaped body of `s` (what sits between the quotes of a JSON string).
pub fn json_escape_body(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    quoted[1..quoted.len() - 1].to_string()
}

/// One JSON string character unit: a plain character or an escape (no lone surrogates).
pub const JSON_CHAR: &str = "(?:[^\"\\\\\\x00-\\x1F]|\\\\[\"\\\\\\x2Fbfnrt]|\\\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))";

/// A [`JSON_CHAR`] that is not whitespace, neither raw nor an escape (`\n`, `\t`, `\r`).
pub const JSON_NON_SPACE: &str = "(?:[^\"\\\\\\x00-\\x1F\\s]|\\\\[\"\\\\\\x2Fbf]|\\\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))";

/// `min..=max` units of `unit` whose first and last are `edge` units: a copied value with no
/// leading or trailing whitespace ("the update " is never what a user meant). Matches nothing
/// when `min > max`.
pub fn edged_repeat(unit: &str, edge: &str, min: usize, max: Option<usize>) -> String {
    let mut alternatives = Vec::new();
    if min <= 1 && max.is_none_or(|m| m >= 1) {
        alternatives.push(edge.to_string());
    }
    if max.is_none_or(|m| m >= 2.max(min)) {
        let inner = repeat(min.saturating_sub(2), max.map(|m| m - 2));
        alternatives.push(format!("{edge}{unit}{inner}{edge}"));
    }
    if alternatives.is_empty() {
        return "[^\\s\\S]".into();
    }
    format!("(?:{})", alternatives.join("|"))
}

/// `{min,max}` repetition text (`*`, `+` or a range).
pub fn repeat(min: usize, max: Option<usize>) -> String {
    match (min, max) {
        (0, None) => "*".into(),
        (1, None) => "+".into(),
        (m, None) => format!("{{{m},}}"),
        (m, Some(x)) if m == x => format!("{{{m}}}"),
        (m, Some(x)) => format!("{{{m},{x}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole-string match with derivre (llguidance's own regex engine), so the tests check
    /// the dialect the grammar is compiled with.
    fn matches(rx: &str, s: &str) -> bool {
        llguidance::derivre::Regex::new(rx).unwrap().is_match(s)
    }

    #[test]
    fn integer_ranges_are_exact() {
        let cases: &[(Option<i64>, Option<i64>)] = &[
            (Some(1), Some(100)),
            (Some(-37), Some(215)),
            (Some(-500), Some(-3)),
            (Some(0), Some(0)),
            (Some(7), Some(7)),
            (Some(19), Some(1001)),
            (Some(-9), Some(9)),
        ];
        for &(lo, hi) in cases {
            let rx = integer_range(lo, hi).unwrap();
            for v in -1200..=1200i64 {
                let want = lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h);
                assert_eq!(
                    matches(&rx, &v.to_string()),
                    want,
                    "{lo:?}..{hi:?} {v} via {rx}"
                );
            }
            assert!(!matches(&rx, "-0") && !matches(&rx, "007") && !matches(&rx, "+1"));
        }
        assert!(integer_range(Some(5), Some(4)).is_none());
        let open = integer_range(Some(10), None).unwrap();
        assert!(
            matches(&open, "999999999999999")
                && !matches(&open, "9")
                && !matches(&open, "1000000000000000")
        );
    }

    #[test]
    fn number_ranges_are_inside() {
        let rx = number_range(Some((0.5, false)), Some((10.0, true))).unwrap();
        for s in ["1", "9", "1.5", "9.999", "5.25"] {
            assert!(matches(&rx, s), "{s}");
        }
        for s in ["0", "10", "10.5", "0.7", "-1", "1.50"] {
            assert!(!matches(&rx, s), "{s}");
        }
        let rx = number_range(Some((-2.0, false)), Some((1.0, false))).unwrap();
        for s in ["-2", "-1.5", "-0.25", "0", "0.5", "1"] {
            assert!(matches(&rx, s), "{s}");
        }
        for s in ["-2.5", "1.5", "-0"] {
            assert!(!matches(&rx, s), "{s}");
        }
    }

    #[test]
    fn patterns_and_escapes() {
        assert_eq!(anchored_pattern("^a/b$"), "(?:a\\x2Fb)");
        assert_eq!(anchored_pattern("ab"), "(?s:.*)(?:ab)(?s:.*)");
        assert!(
            matches(JSON_CHAR, "\\u00e9")
                && !matches(JSON_CHAR, "\\ud800")
                && !matches(JSON_CHAR, "\"")
        );
        assert_eq!(json_escape_body("a\"b\n"), "a\\\"b\\n");
    }
}
