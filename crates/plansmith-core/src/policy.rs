//! Decoding and validation policy: which values must be copied verbatim from the request.

use serde::{Deserialize, Serialize};

/// A parameter of a tool, addressed by a dotted path through nested objects
/// (`target.label`); array items are addressed by the array's path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ParamRef {
    pub tool: String,
    pub path: String,
}

/// Which string values must be a span of the request ("copy-fidelity").
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "rule", content = "params")]
pub enum CopyRule {
    /// No copy constraint.
    None,
    /// Every free value: a string with no `enum`, `const`, `pattern` or `format`, and every
    /// integer or number with no `enum` or `const`.
    FreeStrings,
    /// Only the listed parameters.
    Only(Vec<ParamRef>),
}

/// How a copied value must sit in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CopyUnit {
    /// The value starts and ends on word boundaries of the request.
    #[default]
    Words,
    /// Any substring of the request.
    Chars,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Policy {
    pub copy: CopyRule,
    #[serde(default)]
    pub copy_unit: CopyUnit,
}

impl Default for Policy {
    /// No copy constraint: the right default for chat-model syntaxes.
    fn default() -> Self {
        Policy {
            copy: CopyRule::None,
            copy_unit: CopyUnit::Words,
        }
    }
}

impl Policy {
    /// The plan-DSL default: every free string and number is copied, word-aligned.
    pub fn copy_free_strings() -> Self {
        Policy {
            copy: CopyRule::FreeStrings,
            copy_unit: CopyUnit::Words,
        }
    }

    /// Whether the string parameter at `path` of `tool`, whose schema is `schema`,
    /// must be copied from the request.
    pub fn requires_copy(&self, tool: &str, path: &str, schema: &serde_json::Value) -> bool {
        match &self.copy {
            CopyRule::None => false,
            CopyRule::FreeStrings => crate::schema::is_free_value(schema),
            CopyRule::Only(params) => params.iter().any(|p| p.tool == tool && p.path == path),
        }
    }
}

/// Whether `value` occurs in `request` as allowed by `unit`.
pub fn is_copied(value: &str, request: &str, unit: CopyUnit) -> bool {
    if value.is_empty() {
        return false;
    }
    match unit {
        CopyUnit::Chars => request.contains(value),
        CopyUnit::Words => request.match_indices(value).any(|(start, _)| {
            let end = start + value.len();
            let mut before = request[..start].chars().rev();
            let mut after = request[end..].chars();
            let (first, last) = (value.chars().next(), value.chars().next_back());
            let (b1, a1) = (before.next(), after.next());
            let before_ok = (b1.is_none_or(|c| !is_word_char(c))
                || !first.is_some_and(is_word_char))
                && !b1.is_some_and(|c| is_number_separator(before.next(), c, first));
            let after_ok = (a1.is_none_or(|c| !is_word_char(c)) || !last.is_some_and(is_word_char))
                && !a1.is_some_and(|c| is_number_separator(last, c, after.next()));
            before_ok && after_ok
        }),
    }
}

/// The numbers a request states in digits, as values: each word-aligned run of digits with
/// `.` or `,` between digits (one decimal point; commas only as thousands separators, every
/// group after the first of three digits), with a `-` right before it when that starts a
/// word. "3.50" -> 3.5, "1,000" -> 1000, "-4" -> -4; "10.0.0.1" and "3,5" state none.
pub fn stated_numbers(request: &str) -> Vec<f64> {
    let chars: Vec<char> = request.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() || (i > 0 && is_word_char(chars[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || is_number_separator(
                    chars.get(i.wrapping_sub(1)).copied(),
                    chars[i],
                    chars.get(i + 1).copied(),
                ))
        {
            i += 1;
        }
        if chars.get(i).copied().is_some_and(is_word_char) {
            continue;
        }
        let word: String = chars[start..i].iter().collect();
        let negative =
            start > 0 && chars[start - 1] == '-' && (start == 1 || !is_word_char(chars[start - 2]));
        if let Some(v) = number_word_value(&word) {
            out.push(if negative { -v } else { v });
        }
    }
    out
}

/// The value of one number word of digits, `.` and `,` (see [`stated_numbers`]).
fn number_word_value(word: &str) -> Option<f64> {
    let (whole, frac) = match word.split_once('.') {
        Some((w, f)) if !f.contains(['.', ',']) => (w, Some(f)),
        Some(_) => return None,
        None => (word, None),
    };
    let mut groups = whole.split(',');
    let first = groups.next()?;
    let mut digits = first.to_string();
    for g in groups {
        if g.len() != 3 || first.len() > 3 {
            return None;
        }
        digits.push_str(g);
    }
    let text = match frac {
        Some(f) => format!("{digits}.{f}"),
        None => digits,
    };
    text.parse().ok()
}

/// Word characters for word-aligned copying: letters, digits and `_`.
pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A `.` or `,` between two digits ("3.50", "1,000", "10.0.0.1") is part of the number's word:
/// a word-aligned copy may not begin or end at it (`3.50` is never copied as `3`).
pub fn is_number_separator(before: Option<char>, c: char, after: Option<char>) -> bool {
    matches!(c, '.' | ',')
        && before.is_some_and(|b| b.is_ascii_digit())
        && after.is_some_and(|a| a.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_separators_are_one_word() {
        let r = "it cost 3.50 or 1,000 at 10.0.0.1, then 3. Done";
        for whole in ["3.50", "1,000", "10.0.0.1", "3", "cost 3.50"] {
            assert!(is_copied(whole, r, CopyUnit::Words), "{whole}");
        }
        for cut in ["50", "1", "000", "10.0", "0.1", "cost 3"] {
            assert!(!is_copied(cut, r, CopyUnit::Words), "{cut}");
        }
        assert!(is_copied("3", "3, 4 or 5", CopyUnit::Words));
    }

    #[test]
    fn stated_numbers_are_read_as_values() {
        let r = "pay 3.50 or 1,000 to 10.0.0.1 by -4, not x-2 or a3 or 3,5 or 12,3456; 7.";
        assert_eq!(stated_numbers(r), vec![3.5, 1000.0, -4.0, 2.0, 7.0]);
        assert_eq!(
            stated_numbers("1,234,567.25 and 0.10"),
            vec![1234567.25, 0.1]
        );
        assert_eq!(stated_numbers("no numbers, v2 or 3rd"), Vec::<f64>::new());
    }

    #[test]
    fn word_alignment() {
        assert!(is_copied("4242", "refund order 4242 now", CopyUnit::Words));
        assert!(!is_copied("424", "refund order 4242 now", CopyUnit::Words));
        assert!(is_copied("424", "refund order 4242 now", CopyUnit::Chars));
        assert!(!is_copied("4202", "refund order 4242 now", CopyUnit::Chars));
        assert!(is_copied(
            "Save draft",
            "click Save draft.",
            CopyUnit::Words
        ));
        assert!(is_copied("cmd+s", "press cmd+s", CopyUnit::Words));
        assert!(!is_copied("", "x", CopyUnit::Chars));
    }
}
