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

/// The numbers a request states, as values: in digits (each word-aligned run of digits with
/// `.` or `,` between digits: one decimal point, commas only as thousands separators, every
/// group after the first of three digits; a `-` right before it when that starts a word) and
/// in words ("seventy two", "twenty-one", "three hundred", "twice"; see [`number_words`]).
/// "3.50" -> 3.5, "1,000" -> 1000, "-4" -> -4, "six-sided" -> 6; "10.0.0.1" and "3,5" state
/// none. A copied number may be any of them (the grammar offers the ones not written in digits
/// as [`number_literals`]).
pub fn stated_numbers(request: &str) -> Vec<f64> {
    let mut out = digit_numbers(request);
    out.extend(number_words(request));
    out
}

/// The stated numbers a copy of the request's words cannot spell the way JSON and the DSL
/// write a number ("1,000" is written 1000, "three" 3): each value's canonical text (an
/// integer without a fraction, else the shortest decimal), deduplicated, in request order.
pub fn number_literals(request: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in stated_numbers(request) {
        let text = if v.fract() == 0.0 && v.abs() < 9.0e15 {
            format!("{}", v as i64)
        } else {
            format!("{v}")
        };
        if !out.contains(&text) && !is_copied(&text, request, CopyUnit::Words) {
            out.push(text);
        }
    }
    out
}

fn digit_numbers(request: &str) -> Vec<f64> {
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

/// Numbers spelt in English words: each longest run of number words (joined by spaces or
/// hyphens, "and" allowed after "hundred") read as one value below a million ("seventy two"
/// -> 72, "one hundred and five" -> 105, "two thousand" -> 2000, "a hundred" -> 100), and the
/// counts "once", "twice", "thrice" and "a dozen". Case-insensitive.
pub fn number_words(request: &str) -> Vec<f64> {
    let words: Vec<String> = request
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        match words[i].as_str() {
            "once" => out.push(1.0),
            "twice" => out.push(2.0),
            "thrice" => out.push(3.0),
            "dozen" if i > 0 && words[i - 1] == "a" => out.push(12.0),
            _ => {}
        }
        // "a hundred", "a thousand": the article stands for one.
        let article = words[i] == "a"
            && words
                .get(i + 1)
                .is_some_and(|w| w == "hundred" || w == "thousand");
        let mut reader = NumberReader::default();
        let mut j = i;
        if article {
            reader.small = 1;
            reader.last = 1;
            reader.any = true;
            j += 1;
        }
        while j < words.len() && reader.take(&words[j], words.get(j + 1).map(String::as_str)) {
            j += 1;
        }
        match reader.value() {
            Some(v) if j > i => {
                out.push(v as f64);
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

const UNIT_WORDS: [&str; 10] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
];
const TEEN_WORDS: [&str; 10] = [
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS_WORDS: [&str; 8] = [
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// `n` in English words, as people say it ("seventy two", "three hundred and five"): the
/// form [`number_words`] reads back. `None` from a million on.
pub fn number_in_words(n: u32) -> Option<String> {
    fn unit(n: u32) -> &'static str {
        match n {
            0..=9 => UNIT_WORDS[n as usize],
            _ => TEEN_WORDS[(n - 10) as usize],
        }
    }
    fn below_hundred(n: u32) -> String {
        match n {
            0..=19 => unit(n).to_string(),
            _ if n.is_multiple_of(10) => TENS_WORDS[(n / 10 - 2) as usize].to_string(),
            _ => format!("{} {}", TENS_WORDS[(n / 10 - 2) as usize], unit(n % 10)),
        }
    }
    fn below_thousand(n: u32) -> String {
        match (n / 100, n % 100) {
            (0, r) => below_hundred(r),
            (h, 0) => format!("{} hundred", unit(h)),
            (h, r) => format!("{} hundred and {}", unit(h), below_hundred(r)),
        }
    }
    match (n / 1000, n % 1000) {
        (0, r) => Some(below_thousand(r)),
        (t, 0) if t < 1000 => Some(format!("{} thousand", below_thousand(t))),
        (t, r) if t < 1000 => Some(format!(
            "{} thousand {}",
            below_thousand(t),
            below_thousand(r)
        )),
        _ => None,
    }
}

/// Reads one number from English words, left to right.
#[derive(Default)]
struct NumberReader {
    /// Value below a thousand being read ("seventy two", "three hundred and five").
    small: u32,
    /// Thousands already read.
    thousands: u32,
    /// The last word: 0 none, 1 a unit, 2 a teen, 3 a tens word, 4 "hundred", 5 "thousand",
    /// 6 "and" after "hundred".
    last: u8,
    any: bool,
}

impl NumberReader {
    /// Take `word` if it continues the number (`next` decides whether an "and" does).
    fn take(&mut self, word: &str, next: Option<&str>) -> bool {
        let below_hundred = self.small % 100;
        // A unit, teen or tens word may follow nothing, "hundred", "thousand" or "and"; a unit
        // may also follow a tens word ("seventy two").
        let fresh = matches!(self.last, 0 | 4 | 5 | 6) && below_hundred == 0;
        if let Some(u) = UNIT_WORDS.iter().position(|&w| w == word) {
            if fresh || (self.last == 3 && u > 0) {
                if u == 0 && self.any {
                    return false;
                }
                self.small += u as u32;
                self.last = 1;
                self.any = true;
                return true;
            }
            return false;
        }
        if let Some(t) = TEEN_WORDS.iter().position(|&w| w == word) {
            if fresh {
                self.small += 10 + t as u32;
                self.last = 2;
                self.any = true;
                return true;
            }
            return false;
        }
        if let Some(t) = TENS_WORDS.iter().position(|&w| w == word) {
            if fresh {
                self.small += 20 + 10 * t as u32;
                self.last = 3;
                self.any = true;
                return true;
            }
            return false;
        }
        match word {
            "hundred"
                if self.any
                    && matches!(self.last, 1)
                    && self.small % 100 < 10
                    && self.small < 10 =>
            {
                self.small *= 100;
                self.last = 4;
                true
            }
            "thousand" if self.any && self.thousands == 0 && self.last != 5 && self.small > 0 => {
                self.thousands = self.small;
                self.small = 0;
                self.last = 5;
                true
            }
            "and"
                if self.last == 4
                    && next.is_some_and(|n| {
                        UNIT_WORDS[1..].contains(&n)
                            || TEEN_WORDS.contains(&n)
                            || TENS_WORDS.contains(&n)
                    }) =>
            {
                self.last = 6;
                true
            }
            _ => false,
        }
    }

    fn value(&self) -> Option<u32> {
        (self.any && self.last != 6).then_some(self.thousands * 1000 + self.small)
    }
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
    fn numbers_in_words_are_read_as_values() {
        let read = |r: &str| number_words(r);
        assert_eq!(read("set the thermostat to seventy two"), vec![72.0]);
        assert_eq!(
            read("scroll down three times, then twice more"),
            vec![3.0, 2.0]
        );
        assert_eq!(read("roll 2 six-sided dice"), vec![6.0]);
        assert_eq!(
            read("twenty-one guns and one hundred and five balloons"),
            vec![21.0, 105.0]
        );
        assert_eq!(
            read("Two Thousand Five Hundred steps, a hundred more"),
            vec![2500.0, 100.0]
        );
        assert_eq!(
            read("a dozen eggs and nineteen eighty"),
            vec![12.0, 19.0, 80.0]
        );
        assert_eq!(read("open the one on the left and the other"), vec![1.0]);
        assert_eq!(read("hundred and thousand alone, a cat, zero"), vec![0.0]);
        assert_eq!(read("twelve hundred"), vec![12.0]);
        assert_eq!(
            number_literals("pay 1,000 and 3.50 for three, not 7"),
            vec!["1000".to_string(), "3.5".to_string(), "3".to_string()]
        );
    }

    #[test]
    fn every_number_in_words_reads_back() {
        for n in (0..2000).chain([21_000, 999_999, 100_100]) {
            let words = number_in_words(n).unwrap();
            assert_eq!(number_words(&words), vec![n as f64], "{words}");
        }
        assert_eq!(number_in_words(1_000_000), None);
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
