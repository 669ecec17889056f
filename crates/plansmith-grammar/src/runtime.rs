//! The decode-time constraint: masks, commits, forced tokens. Never panics: llguidance
//! errors and forbidden tokens turn the constraint [`ConstraintState::Dead`].

use std::sync::Arc;

use llguidance::Matcher;

use crate::copyfilter::CopyFilter;
use crate::error::Dead;
use crate::tokenv::TokEnv;

/// Allowed tokens as a bitset over the model's logits (`model_vocab` bits, 32 per word,
/// bit `id % 32` of word `id / 32`). Ids past the tokenizer's vocabulary are never set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mask {
    words: Vec<u32>,
    len: usize,
}

impl Mask {
    fn empty(len: usize) -> Mask {
        Mask {
            words: vec![0; len.div_ceil(32)],
            len,
        }
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Number of ids covered (the model's vocabulary size).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn is_allowed(&self, id: u32) -> bool {
        let i = id as usize;
        i < self.len && self.words[i / 32] & (1 << (i % 32)) != 0
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The allowed ids, ascending.
    pub fn allowed(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for (wi, &w) in self.words.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                let b = w.trailing_zeros();
                out.push(wi as u32 * 32 + b);
                w &= w - 1;
            }
        }
        out
    }

    /// Set every disallowed logit to `-inf` (logits may be shorter or longer than the mask;
    /// ids past the mask are disallowed).
    pub fn apply(&self, logits: &mut [f32]) {
        for (i, l) in logits.iter_mut().enumerate() {
            if i >= self.len || self.words[i / 32] & (1 << (i % 32)) == 0 {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}

/// Where a constraint stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstraintState {
    /// More tokens are expected (the output may already be complete: see `is_accepting`).
    Running,
    /// The grammar is finished (EOS committed, or nothing more can follow).
    Stopped,
    /// An error: a forbidden token, or an internal llguidance failure.
    Dead { reason: String },
}

/// One request's constraint over a [`TokEnv`].
pub struct Constraint {
    matcher: Matcher,
    /// Copy spans checked beside a shared grammar (DSL), when the grammar does not hold them;
    /// with the ids of the tokens holding `=` (the only ones that can break a copy outside
    /// a copied value).
    filter: Option<(CopyFilter, Arc<Vec<u32>>)>,
    env: TokEnv,
    dead: Option<String>,
    mask: Mask,
    mask_fresh: bool,
    output: Vec<u8>,
    committed: usize,
}

impl Constraint {
    pub(crate) fn new(matcher: Matcher, env: TokEnv) -> Constraint {
        let len = env.model_vocab();
        let dead = matcher.get_error();
        Constraint {
            matcher,
            filter: None,
            env,
            dead,
            mask: Mask::empty(len),
            mask_fresh: false,
            output: Vec::new(),
            committed: 0,
        }
    }

    pub(crate) fn with_copy_filter(
        matcher: Matcher,
        env: TokEnv,
        filter: CopyFilter,
        eq_tokens: Arc<Vec<u32>>,
    ) -> Self {
        let mut c = Constraint::new(matcher, env);
        c.filter = Some((filter, eq_tokens));
        c
    }

    fn die(&mut self, reason: String) -> Dead {
        self.dead = Some(reason.clone());
        Dead { reason }
    }

    fn check(&self) -> Result<(), Dead> {
        match &self.dead {
            Some(reason) => Err(Dead {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The allowed next tokens. Once the grammar is finished only EOS is allowed.
    pub fn mask(&mut self) -> Result<&Mask, Dead> {
        self.check()?;
        if !self.mask_fresh {
            match self.matcher.compute_mask_or_eos() {
                Ok(vob) => {
                    let src = vob.as_slice();
                    let vocab = self.env.vocab_size();
                    let n = self.mask.words.len();
                    self.mask.words[..src.len().min(n)].copy_from_slice(&src[..src.len().min(n)]);
                    for w in &mut self.mask.words[src.len().min(n)..] {
                        *w = 0;
                    }
                    // clear bits past the tokenizer's vocabulary (padding ids)
                    for id in vocab..self.mask.len.min(src.len() * 32) {
                        self.mask.words[id / 32] &= !(1 << (id % 32));
                    }
                    if let Some((f, eq_tokens)) = &self.filter {
                        let trie = self.env.llg_env().tok_trie();
                        let mut fit = vec![0u32; self.mask.words.len()];
                        let in_value = f.value_tokens(trie, &mut |t| {
                            if let Some(w) = fit.get_mut(t as usize / 32) {
                                *w |= 1 << (t % 32);
                            }
                        });
                        if in_value {
                            for (w, m) in self.mask.words.iter_mut().zip(&fit) {
                                *w &= m;
                            }
                        } else {
                            for &t in eq_tokens.iter() {
                                let (wi, bit) = (t as usize / 32, 1 << (t % 32));
                                if self.mask.words.get(wi).is_some_and(|w| w & bit != 0)
                                    && !f.accepts(trie.token(t))
                                {
                                    self.mask.words[wi] &= !bit;
                                }
                            }
                        }
                    }
                    self.mask_fresh = true;
                }
                Err(e) => return Err(self.die(e.to_string())),
            }
        }
        Ok(&self.mask)
    }

    /// Set disallowed logits to `-inf`.
    pub fn apply_mask(&mut self, logits: &mut [f32]) -> Result<(), Dead> {
        self.mask()?.apply(logits);
        Ok(())
    }

    /// Commit one sampled (or forced) token. A token the grammar forbids kills the constraint.
    pub fn commit(&mut self, token: u32) -> Result<(), Dead> {
        self.check()?;
        if token as usize >= self.env.vocab_size() {
            return Err(self.die(format!(
                "token {token} is outside the tokenizer's vocabulary"
            )));
        }
        if self.mask_fresh && !self.mask.is_allowed(token) {
            return Err(self.die(format!("token {token} is not allowed here")));
        }
        if let Some((f, _)) = &mut self.filter {
            if !f.commit(&self.env.token_bytes(token)) {
                let reason =
                    format!("token {token} makes a copied value that is not in the request");
                return Err(self.die(reason));
            }
        }
        if !self.mask_fresh {
            match self.matcher.validate_tokens(&[token]) {
                Ok(1) => {}
                Ok(_) if token == self.env.eos() && self.matcher.is_stopped() => {}
                Ok(_) => return Err(self.die(format!("token {token} is not allowed here"))),
                Err(e) => return Err(self.die(e.to_string())),
            }
        }
        self.mask_fresh = false;
        if self.matcher.is_stopped() && token == self.env.eos() {
            self.committed += 1;
            return Ok(());
        }
        if let Err(e) = self.matcher.consume_token(token) {
            return Err(self.die(e.to_string()));
        }
        if token != self.env.eos() {
            self.output.extend_from_slice(&self.env.token_bytes(token));
        }
        self.committed += 1;
        Ok(())
    }

    /// Commit several tokens (e.g. the forced ones).
    pub fn commit_all(&mut self, tokens: &[u32]) -> Result<(), Dead> {
        tokens.iter().try_for_each(|&t| self.commit(t))
    }

    /// Tokens the grammar forces next (fast-forward: skip the model for them), not yet
    /// committed. Empty when dead, finished, or when nothing is forced. The forced bytes are
    /// tokenized greedily (longest match): always accepted by the grammar, though not
    /// necessarily the split a BPE tokenizer would choose; the last token is held back when a
    /// longer token could take its place.
    pub fn forced_tokens(&mut self) -> Vec<u32> {
        if self.dead.is_some() || self.matcher.is_stopped() {
            return Vec::new();
        }
        let bytes = self.matcher.compute_ff_bytes();
        if let Some(e) = self.matcher.get_error() {
            self.die(e);
            return Vec::new();
        }
        if bytes.is_empty() {
            return Vec::new();
        }
        let trie = self.env.llg_env().tok_trie();
        let mut tokens = trie.greedy_tokenize(&bytes);
        // A vocabulary with no token for some forced byte (a control character in a schema's
        // name or enum, in a vocabulary without byte fallback) gets a tokenization that does
        // not spell the bytes: force only the tokens that spell a prefix of them, and let the
        // mask decide the rest (found by fuzzing).
        let mut at = 0;
        let spelled = tokens
            .iter()
            .take_while(|&&t| {
                let tb = trie.token(t);
                let ok = !tb.is_empty() && bytes[at..].starts_with(tb);
                at += tb.len();
                ok
            })
            .count();
        tokens.truncate(spelled);
        // The forced bytes end where the grammar stops being sure, and a longer token may
        // cover them and what follows (a sub-word vocabulary's `ation.` after a forced
        // `ation`). Forcing the shorter token would put the model on a split it never saw in
        // training — it then tends to end the value there — so the last token is left to the
        // model whenever the vocabulary has a longer one starting with its bytes.
        if let Some(&last) = tokens.last() {
            if trie.has_extensions(trie.token(last)) {
                tokens.pop();
            }
        }
        // the shared grammar may force bytes the copy check rules out (then it is a dead end
        // the next mask reports)
        if let Some((f, _)) = &self.filter {
            let mut probe = f.clone();
            let keep = tokens
                .iter()
                .take_while(|&&t| probe.commit(trie.token(t)))
                .count();
            tokens.truncate(keep);
        }
        tokens
    }

    /// Whether the output so far is a complete plan (EOS would be allowed).
    pub fn is_accepting(&mut self) -> bool {
        self.dead.is_none()
            && (self.matcher.is_stopped() || self.matcher.is_accepting().unwrap_or(false))
    }

    /// Whether decoding must stop (finished or dead).
    pub fn is_stopped(&self) -> bool {
        self.dead.is_some() || self.matcher.is_stopped()
    }

    pub fn state(&self) -> ConstraintState {
        if let Some(reason) = &self.dead {
            ConstraintState::Dead {
                reason: reason.clone(),
            }
        } else if self.matcher.is_stopped() {
            ConstraintState::Stopped
        } else {
            ConstraintState::Running
        }
    }

    /// Whether copied values are checked while decoding (one grammar shared by all requests)
    /// rather than compiled into this request's grammar.
    pub fn checks_copies_while_decoding(&self) -> bool {
        self.filter.is_some()
    }

    /// The text committed so far (EOS excluded).
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    pub fn output_text(&self) -> String {
        String::from_utf8_lossy(&self.output).into_owned()
    }

    /// Number of tokens committed.
    pub fn committed(&self) -> usize {
        self.committed
    }

    pub fn env(&self) -> &TokEnv {
        &self.env
    }
}
