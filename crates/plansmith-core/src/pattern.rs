//! What JSON Schema `pattern`s must be: ECMA-262 regular expressions (JSON Schema 2020-12,
//! §6.3.3). The validator's regex engine and the grammar's (Rust `regex-syntax`) both accept
//! some strings ECMA-262 rejects, and they read them differently: `[A-Z]{3}{3}{3}` is 27
//! letters to the grammar and matches nothing in the validator, so the grammar wrote values
//! the validator refused (found by fuzzing). A pattern with a quantifier that has nothing to
//! repeat is a syntax error in ECMA-262; it is refused at import, naming where.

/// Why `pattern` is not an ECMA-262 regex, if a quantifier has nothing to repeat: `None` when
/// every quantifier follows an atom. Only this class of error is checked here; the rest of the
/// syntax is left to the validator's regex compiler.
pub fn nothing_to_repeat(pattern: &str) -> Option<String> {
    let cs: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    // Whether the previous token is an atom a quantifier may follow.
    let mut atom = false;
    while i < cs.len() {
        match cs[i] {
            '\\' => {
                i += 2;
                atom = true;
            }
            '[' => {
                // A class ends at the first unescaped `]` (in ECMA-262 `[]` is the empty class).
                i += 1;
                while i < cs.len() && cs[i] != ']' {
                    i += if cs[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                atom = true;
            }
            '(' => {
                i += 1;
                if cs.get(i) == Some(&'?') {
                    // `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?<name>`: the group's content starts
                    // after the marker; nothing inside may repeat the marker.
                    i += 1;
                    match cs.get(i) {
                        Some(':' | '=' | '!') => i += 1,
                        Some('<') if matches!(cs.get(i + 1), Some('=' | '!')) => i += 2,
                        Some('<') => {
                            while i < cs.len() && cs[i] != '>' {
                                i += 1;
                            }
                            i += 1;
                        }
                        _ => {}
                    }
                }
                atom = false;
            }
            '|' | '^' => {
                i += 1;
                atom = false;
            }
            '*' | '+' | '?' => {
                if !atom {
                    return Some(format!(
                        "`{}` at character {i} has nothing to repeat",
                        cs[i]
                    ));
                }
                i += 1;
                i += usize::from(cs.get(i) == Some(&'?'));
                atom = false;
            }
            '{' => match brace_quantifier_len(&cs[i..]) {
                Some(len) => {
                    if !atom {
                        let q: String = cs[i..i + len].iter().collect();
                        return Some(format!("`{q}` at character {i} has nothing to repeat"));
                    }
                    i += len;
                    i += usize::from(cs.get(i) == Some(&'?'));
                    atom = false;
                }
                // Not a quantifier: a literal `{` (Annex B).
                None => {
                    i += 1;
                    atom = true;
                }
            },
            _ => {
                i += 1;
                atom = true;
            }
        }
    }
    None
}

/// Length of `{n}`, `{n,}` or `{n,m}` at the start of `cs`, if it is one.
fn brace_quantifier_len(cs: &[char]) -> Option<usize> {
    let mut i = 1;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < cs.len() && cs[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return None;
    }
    if cs.get(i) == Some(&',') {
        i += 1;
        digits(&mut i);
    }
    (cs.get(i) == Some(&'}')).then_some(i + 1)
}

#[cfg(test)]
mod tests {
    use super::nothing_to_repeat;
    use proptest::prelude::*;

    #[test]
    fn quantifiers_after_atoms_pass() {
        for p in [
            r"^\d{3}-\d{4}$",
            "^[A-Z]{3}$",
            "a{2,}?b+?c*?d??",
            "(?:ab){2}",
            "(?<year>[0-9]{4})-(?=x)x*",
            "[*+?{]+",
            r"\*\{3}",
            "a{,3}",
            "x{",
            "[]]*",
            "(a)|b*",
        ] {
            assert_eq!(nothing_to_repeat(p), None, "{p}");
        }
    }

    #[test]
    fn quantifiers_with_nothing_to_repeat_are_named() {
        for (p, at) in [
            ("^[A-Z]{3}{3}{3}$", "`{3}` at character 9"),
            ("a**", "`*` at character 2"),
            ("a+*", "`*` at character 2"),
            ("*a", "`*` at character 0"),
            ("(?:+)", "`+` at character 3"),
            ("a|?", "`?` at character 2"),
            ("^*", "`*` at character 1"),
            ("a{2}?{3}", "`{3}` at character 5"),
        ] {
            let e = nothing_to_repeat(p).unwrap_or_else(|| panic!("{p} passed"));
            assert!(e.starts_with(at), "{p}: {e}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = nothing_to_repeat(&s);
        }

        #[test]
        fn never_panics_on_regex_characters(s in "[\\\\\\[\\](){}?*+|^$a0-9,<>=!:]{0,30}") {
            let _ = nothing_to_repeat(&s);
        }
    }
}
