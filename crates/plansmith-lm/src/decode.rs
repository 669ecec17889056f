//! Incremental decoding on top of the KV cache: sessions, prefix snapshots, sampling, scoring.
//!
//! A constrained decoder drives a [`Session`] token by token: read [`Session::logits`], apply its
//! own token mask, pick a token, [`Session::push`] it. A prefix shared by many requests (system
//! text, tool catalog) is fed once, [`Session::snapshot`]ed, and every later request starts from
//! [`Session::restore`] — no recomputation, no tensor copies.

use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::codec::Codec;
use crate::error::{LmError, Result};
use crate::tiny_gpt::{KvCache, TinyGpt};

/// A frozen decode state: the KV cache of a prefix and the next-token logits after it.
#[derive(Clone, Debug)]
pub struct Snapshot {
    cache: KvCache,
    tokens: Vec<u32>,
    logits: Option<Vec<f32>>,
}

impl Snapshot {
    /// Number of tokens in the prefix.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }
    /// True for the empty prefix.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
    /// The prefix tokens.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }
}

/// One decoding stream over a model: KV cache, fed tokens, and the current next-token logits.
pub struct Session<'m> {
    model: &'m TinyGpt,
    cache: KvCache,
    tokens: Vec<u32>,
    logits: Option<Vec<f32>>,
}

impl<'m> Session<'m> {
    /// An empty session.
    pub fn new(model: &'m TinyGpt) -> Self {
        Self {
            model,
            cache: KvCache::new(),
            tokens: Vec::new(),
            logits: None,
        }
    }

    /// A session starting from a snapshot (of a session over the same model).
    pub fn from_snapshot(model: &'m TinyGpt, snap: &Snapshot) -> Self {
        let mut s = Self::new(model);
        s.restore(snap);
        s
    }

    /// The model.
    pub fn model(&self) -> &'m TinyGpt {
        self.model
    }

    /// Feed tokens (a prompt, or forced tokens); afterwards [`Self::logits`] is the distribution
    /// after the last of them. Errors leave the session unchanged (e.g. block overflow).
    pub fn feed(&mut self, tokens: &[u32]) -> Result<&[f32]> {
        let logits = self.model.forward_step(tokens, &mut self.cache)?;
        self.tokens.extend_from_slice(tokens);
        self.logits = Some(logits);
        Ok(self.logits.as_deref().expect("just set"))
    }

    /// Feed one token.
    pub fn push(&mut self, token: u32) -> Result<&[f32]> {
        self.feed(&[token])
    }

    /// Next-token logits after everything fed so far (`None` before the first feed).
    pub fn logits(&self) -> Option<&[f32]> {
        self.logits.as_deref()
    }

    /// Next-token logits; errors if nothing has been fed yet.
    pub fn logits_for_next(&self) -> Result<&[f32]> {
        self.logits
            .as_deref()
            .ok_or_else(|| LmError::Data("no logits yet: feed a prompt first".into()))
    }

    /// Tokens fed so far.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }
    /// Number of positions used.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }
    /// True when nothing was fed.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
    /// Positions left before the block size is reached.
    pub fn remaining(&self) -> usize {
        self.model.config().block - self.tokens.len()
    }

    /// Cheap copy of the current state (tensors are shared, not copied).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            cache: self.cache.snapshot(),
            tokens: self.tokens.clone(),
            logits: self.logits.clone(),
        }
    }

    /// Go back to a snapshot.
    pub fn restore(&mut self, snap: &Snapshot) {
        self.cache.restore(&snap.cache);
        self.tokens.clone_from(&snap.tokens);
        self.logits.clone_from(&snap.logits);
    }

    /// Forget everything.
    pub fn reset(&mut self) {
        self.cache.clear();
        self.tokens.clear();
        self.logits = None;
    }
}

/// Log-softmax of a logit vector (numerically stable).
pub fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max + logits.iter().map(|&x| (x - max).exp()).sum::<f32>().ln();
    logits.iter().map(|&x| x - lse).collect()
}

/// Index of the largest logit (lowest index on ties; NaN never wins).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut bv = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > bv {
            bv = v;
            best = i;
        }
    }
    best as u32
}

/// Greedy or temperature sampling with a seeded generator.
#[derive(Debug, Clone)]
pub struct Sampler {
    temperature: f32,
    rng: StdRng,
}

impl Sampler {
    /// `temperature <= 0` means greedy.
    pub fn new(temperature: f32, seed: u64) -> Self {
        Self {
            temperature,
            rng: StdRng::seed_from_u64(seed),
        }
    }
    /// Greedy sampler.
    pub fn greedy() -> Self {
        Self::new(0.0, 0)
    }

    /// Pick a token. Logits of `-inf` (masked tokens) are never picked unless all are.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.temperature <= 0.0 {
            return argmax(logits);
        }
        let t = self.temperature;
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if !max.is_finite() {
            return argmax(logits);
        }
        let w: Vec<f64> = logits
            .iter()
            .map(|&x| (((x - max) / t) as f64).exp())
            .collect();
        let total: f64 = w.iter().sum();
        let mut u = self.rng.random::<f64>() * total;
        for (i, &wi) in w.iter().enumerate() {
            if u < wi {
                return i as u32;
            }
            u -= wi;
        }
        // rounding: the last token with non-zero weight
        w.iter().rposition(|&x| x > 0.0).unwrap_or(0) as u32
    }
}

/// Generation settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerateConfig {
    /// Maximum new tokens.
    pub max_new: usize,
    /// `<= 0`: greedy.
    pub temperature: f32,
    pub seed: u64,
    /// Stop after emitting this token (included in the output).
    pub stop: Option<u32>,
}

impl Default for GenerateConfig {
    fn default() -> Self {
        Self {
            max_new: 160,
            temperature: 0.0,
            seed: 0,
            stop: None,
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The stop token was produced.
    Stop,
    /// `max_new` tokens were produced.
    Length,
    /// The context reached the block size.
    ContextFull,
}

/// Generated tokens and why generation ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// New tokens only (the stop token included when produced).
    pub tokens: Vec<u32>,
    pub finish: FinishReason,
    /// Natural log-probability of each generated token under the (untempered) model.
    pub logprobs: Vec<f32>,
}

impl Generation {
    /// Mean per-token log-probability (`-inf` when nothing was generated).
    pub fn mean_logprob(&self) -> f32 {
        if self.logprobs.is_empty() {
            f32::NEG_INFINITY
        } else {
            self.logprobs.iter().sum::<f32>() / self.logprobs.len() as f32
        }
    }
}

/// Continue a session (already fed with a prompt) until stop / budget / block end.
pub fn generate_from(session: &mut Session<'_>, cfg: &GenerateConfig) -> Result<Generation> {
    let mut sampler = Sampler::new(cfg.temperature, cfg.seed);
    let mut out = Vec::new();
    let mut lps = Vec::new();
    let mut finish = FinishReason::Length;
    for _ in 0..cfg.max_new {
        let logits = session.logits_for_next()?;
        let tok = sampler.sample(logits);
        lps.push(log_softmax(logits)[tok as usize]);
        out.push(tok);
        if cfg.stop == Some(tok) {
            finish = FinishReason::Stop;
            break;
        }
        if out.len() == cfg.max_new {
            break;
        }
        if session.remaining() == 0 {
            finish = FinishReason::ContextFull;
            break;
        }
        session.push(tok)?;
    }
    Ok(Generation {
        tokens: out,
        finish,
        logprobs: lps,
    })
}

/// Generate after `prompt` with a fresh session.
pub fn generate(model: &TinyGpt, prompt: &[u32], cfg: &GenerateConfig) -> Result<Generation> {
    if prompt.is_empty() {
        return Err(LmError::Data("generate needs a non-empty prompt".into()));
    }
    let mut s = Session::new(model);
    s.feed(prompt)?;
    generate_from(&mut s, cfg)
}

/// Text in, text out: encode the prompt, generate until the codec's end-of-completion token
/// (`\n`, included in the returned text) or the budget.
pub fn generate_text(
    model: &TinyGpt,
    codec: &dyn Codec,
    prompt: &str,
    cfg: &GenerateConfig,
) -> Result<(String, Generation)> {
    let mut cfg = cfg.clone();
    cfg.stop = Some(codec.eos_id());
    let g = generate(model, &codec.encode(prompt), &cfg)?;
    Ok((codec.decode(&g.tokens), g))
}

/// Teacher-forced score of a completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionScore {
    /// Natural log-probability of each completion token given everything before it.
    pub token_logprobs: Vec<f32>,
    /// Mean of `token_logprobs` (`-inf` for an empty completion) — mixle's `score_plan` metric.
    pub mean: f32,
}

/// Log-probability of `completion` after `prompt` (token ids), in one cached forward pass.
pub fn score_tokens(
    model: &TinyGpt,
    prompt: &[u32],
    completion: &[u32],
) -> Result<CompletionScore> {
    if prompt.is_empty() {
        return Err(LmError::Data("score needs a non-empty prompt".into()));
    }
    if completion.is_empty() {
        return Ok(CompletionScore {
            token_logprobs: vec![],
            mean: f32::NEG_INFINITY,
        });
    }
    let mut seq = prompt.to_vec();
    seq.extend_from_slice(&completion[..completion.len() - 1]);
    let needed = seq.len();
    if needed > model.config().block {
        return Err(LmError::ContextOverflow {
            needed,
            block: model.config().block,
        });
    }
    if let Some(&id) = completion
        .iter()
        .find(|&&i| i as usize >= model.config().vocab)
    {
        return Err(LmError::TokenOutOfRange {
            place: "score (completion)",
            id,
            vocab: model.config().vocab,
        });
    }
    let logits = model.forward(&seq)?; // (len, vocab)
    let rows = logits
        .narrow(0, prompt.len() - 1, completion.len())?
        .to_vec2::<f32>()?;
    let lps: Vec<f32> = rows
        .iter()
        .zip(completion)
        .map(|(row, &c)| log_softmax(row)[c as usize])
        .collect();
    let mean = lps.iter().sum::<f32>() / lps.len() as f32;
    Ok(CompletionScore {
        token_logprobs: lps,
        mean,
    })
}

/// Log-probability of a text completion after a text prompt.
pub fn score_completion(
    model: &TinyGpt,
    codec: &dyn Codec,
    prompt: &str,
    completion: &str,
) -> Result<CompletionScore> {
    score_tokens(model, &codec.encode(prompt), &codec.encode(completion))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_greedy_and_seeded() {
        let l = [0.0f32, 2.0, 1.0, f32::NEG_INFINITY];
        assert_eq!(Sampler::greedy().sample(&l), 1);
        let mut a = Sampler::new(1.0, 7);
        let mut b = Sampler::new(1.0, 7);
        let xs: Vec<u32> = (0..50).map(|_| a.sample(&l)).collect();
        let ys: Vec<u32> = (0..50).map(|_| b.sample(&l)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|&x| x < 3));
        assert!(xs.contains(&0) && xs.contains(&2));
    }

    #[test]
    fn log_softmax_normalizes() {
        let lp = log_softmax(&[1.0, 2.0, 3.0]);
        let s: f32 = lp.iter().map(|x| x.exp()).sum();
        assert!((s - 1.0).abs() < 1e-6);
    }
}
