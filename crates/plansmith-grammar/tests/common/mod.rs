//! Shared test helpers: vocabularies, a seeded RNG, a random-logit "model".
#![allow(dead_code)]

use plansmith_grammar::{Constraint, Dead, TokEnv};

/// xorshift64*: deterministic, dependency-free.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() % 1_000_000) as f64 / 1_000_000.0 < p
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// One token per printable ASCII character, plus newline and EOS (the char codec's shape).
pub fn char_env() -> TokEnv {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    toks.push(b"\n".to_vec());
    toks.push(b"<eos>".to_vec());
    let eos = toks.len() as u32 - 1;
    TokEnv::from_token_bytes(toks, eos, &[], Some(128)).unwrap()
}

/// A small byte-level BPE-like vocabulary: every byte, plus multi-byte pieces that cut
/// across JSON structure (so masks must handle tokens spanning lexemes).
pub fn small_bpe_env() -> TokEnv {
    let pieces = [
        "{\"",
        "\":",
        "\": ",
        "\", \"",
        "\",\"",
        "\"}",
        "\"}}",
        "}}",
        "}]",
        "[{",
        ", ",
        ": ",
        "\"verb\"",
        "\"args\"",
        "args",
        "verb",
        "name",
        "arguments",
        "\"name\": \"",
        "true",
        "false",
        "null",
        "12",
        "42",
        "00",
        "-1",
        ".5",
        "alpha",
        "beta",
        "gamma",
        " the",
        " to",
        "open",
        "set",
        "label",
        "type",
        "\":{\"",
        "\" ",
        "=\"",
        " |",
        "; ",
        "spoken_text",
        "function",
        "tool_calls",
        "content",
    ];
    bytes_plus(&pieces, Some(7))
}

/// Every byte, then `pieces`, then EOS; `spare` unused logit ids past the vocabulary.
pub fn bytes_plus(pieces: &[&str], spare: Option<usize>) -> TokEnv {
    let mut toks: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
    toks.extend(pieces.iter().map(|s| s.as_bytes().to_vec()));
    toks.push(b"<eos>".to_vec());
    let eos = toks.len() as u32 - 1;
    let width = spare.map(|n| toks.len() + n);
    TokEnv::from_token_bytes(toks, eos, &[], width).unwrap()
}

/// Outcome of one random decode.
pub enum Decode {
    Done(String),
    /// Ran out of steps (the random model kept writing a free string).
    Unfinished,
    /// The mask was empty while the grammar was not finished, or the constraint died.
    Stuck(String),
}

/// Decode with a random "model": a uniformly random allowed token, with a bias towards
/// tokens containing structural characters so outputs finish; forced tokens are honoured.
pub fn random_decode(
    c: &mut Constraint,
    env: &TokEnv,
    rng: &mut Rng,
    max_steps: usize,
) -> Result<Decode, Dead> {
    let closers: Vec<bool> = (0..env.vocab_size() as u32)
        .map(|t| {
            let b = env.token_bytes(t);
            t == env.eos() || b.iter().any(|c| b"\"}])\n;|,".contains(c))
        })
        .collect();
    for _ in 0..max_steps {
        let forced = c.forced_tokens();
        c.commit_all(&forced)?;
        if c.is_stopped() {
            return Ok(Decode::Done(c.output_text()));
        }
        let allowed = c.mask()?.allowed();
        if allowed.is_empty() {
            return Ok(Decode::Stuck(format!(
                "empty mask after {:?}",
                c.output_text()
            )));
        }
        let closing: Vec<u32> = allowed
            .iter()
            .copied()
            .filter(|&t| closers[t as usize])
            .collect();
        let t = if !closing.is_empty() && rng.chance(0.3) {
            *rng.pick(&closing)
        } else {
            *rng.pick(&allowed)
        };
        c.commit(t)?;
        if t == env.eos() {
            return Ok(Decode::Done(c.output_text()));
        }
    }
    Ok(Decode::Unfinished)
}
