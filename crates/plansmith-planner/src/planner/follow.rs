//! Scoring a given plan as decoding would have scored it: the plan's text is written under the
//! grammar, then the model reads it in one forward and each step is scored from the row before
//! it, exactly as [`Planner::decode`] scores its own steps.
//!
//! Which tokens write the text is the model's choice wherever the vocabulary spells it more
//! than one way (Qwen's decode copies "Hana" as `H`+`ana`; the longest pieces, `Han`+`a`, are
//! tokens it never writes there and cost it 23 nats). So the text is written speculatively:
//! a draft from the grammar alone (the longest allowed piece at each choice), one forward over
//! it, and at the first choice where the model prefers another piece that also begins what is
//! left, the cache is rewound there and the rest drafted again from the model's piece. A plan
//! the model decodes itself is rewritten with its own tokens, so it scores its decoded
//! confidence; a score costs a forward over the plan plus one per repaired choice, not a step
//! per token.

use std::time::Instant;

use plansmith_core::Syntax;
use plansmith_grammar::{Constraint, Mask, Request, ToolChoice};

use super::{
    calls_the_request_can_ask_for, closed_tool_calls, dead_end, end_with_best_stop,
    left_the_grammar, log_prob, Decoded, PlanRequest, Planner, Tally, LEFT_THE_GRAMMAR,
};
use crate::backend::Started;
use crate::error::PlannerError;
use crate::{pointers, prompt};

/// One token of the followed text, with what decoding needs to score it.
#[derive(Debug, Clone)]
enum Step {
    /// A token the grammar forced (fast-forwarded by planners that fast-forward): scored by
    /// its own log-probability, counted among all tokens only.
    Forced(u32),
    /// A token written at a choice; `may_end` when the grammar allowed the end there too;
    /// `others`: the other allowed tokens that also begin what was left to write.
    Chosen {
        token: u32,
        may_end: bool,
        others: Vec<u32>,
    },
}

impl Step {
    fn token(&self) -> u32 {
        match *self {
            Step::Forced(t) | Step::Chosen { token: t, .. } => t,
        }
    }
}

/// A walk under the grammar stopped short of writing the text: why.
struct Stuck(String);

/// How a written text ends, as decoding would have ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The grammar allowed nothing but the end: not the model's choice, unscored.
    Forced,
    /// The end was one choice among others after the reply's calls.
    Chosen,
    /// A `<tool_call>` reply that ends before any call (the end chosen at its start).
    Declines,
}

impl Planner {
    /// The plan text `target` for `req`, written under the grammar with the model's own
    /// tokens and scored from batched forwards: the [`Decoded`] confidences a decode writing
    /// that text would have had (up to the float rounding of a batched forward against a step
    /// at a time).
    pub(super) fn follow(&self, req: &PlanRequest, target: &str) -> Result<Decoded, PlannerError> {
        if req.deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(dead_end("deadline reached before decoding began".into()));
        }
        let (catalog, hash) = self.catalog_and_hash(req.catalog.as_ref());
        let grammar_catalog = self.grammar_catalog(&catalog);
        let tool_choice = match &req.tool_choice {
            ToolChoice::Named(name) if self.settings.tool_pointers => {
                match catalog.tools.iter().position(|t| &t.name == name) {
                    Some(i) => ToolChoice::Named(pointers::pointer(i)),
                    None => req.tool_choice.clone(),
                }
            }
            other => other.clone(),
        };
        let request_text = prompt::clean_request(&req.text);
        let options = self.decode_options(tool_choice, req.max_calls, &request_text);
        let prepared = self
            .engine
            .prepare_hashed(&hash, &grammar_catalog, &options)?;
        let (mut state, start_logits, prompt_tokens) = match self.lm.start(
            &catalog,
            &hash,
            &request_text,
            prompt::CatalogText::of(&self.settings),
        )? {
            Started::Ready {
                state,
                logits,
                prompt_tokens,
                ..
            } => (state, logits, prompt_tokens),
            Started::Overflow(reason) => return Ok(dead_end(reason)),
        };
        let grammar_request = Request {
            text: request_text.clone(),
            entities: req.entities.clone(),
        };
        let fresh_constraint = || match self.engine.constraint_for(&prepared, &grammar_request) {
            Ok(c) => Ok(Ok(c)),
            Err(e @ plansmith_grammar::GrammarError::NoCallableTool) => Ok(Err(e.to_string())),
            Err(e) => Err(PlannerError::from(e)),
        };
        let mut constraint = match fresh_constraint()? {
            Ok(c) => c,
            Err(reason) => return Ok(dead_end(reason)),
        };
        let max_new = req.max_tokens.map_or(self.lm.max_new_tokens(), |m| {
            m.min(self.lm.max_new_tokens())
        });
        let stuck = |constraint: &Constraint, reason: String| -> Result<Decoded, PlannerError> {
            let mut d = self.check(&catalog, &hash, &request_text, &constraint.output_text())?;
            d.dead = Some(reason);
            Ok(d)
        };

        let mut steps = Vec::new();
        let mut ending = match self.walk(&mut constraint, &mut steps, req, target, max_new, None) {
            Ok(ending) => ending,
            Err(Stuck(reason)) => return stuck(&constraint, reason),
        };
        // Whether the end after the last call is scored, as decoding scores it: where the
        // planner's floor counts it, and the model chose it (decoding also ends unasked once a
        // `<tool_call>` reply has as many calls as the request has clauses for).
        let deciding_syntax = self.settings.syntax == Syntax::ToolCall;
        // The target and the request do not change while the plan is rescored, so whether the
        // end comes unasked is counted once, not on every pass.
        let ends_unasked = deciding_syntax
            && closed_tool_calls(target) >= calls_the_request_can_ask_for(&request_text);
        let end_is_scored =
            |ending: Ending| ending == Ending::Chosen && self.settings.end_scored && !ends_unasked;
        // `rows[i]`: the logits after step i's token. The last token's row is needed only where
        // the end that follows it is scored.
        let mut rows: Vec<Vec<f32>> = Vec::new();
        // Steps before this one are checked: each is the model's own piece.
        let mut checked = 0;
        loop {
            let tokens: Vec<u32> = steps.iter().map(Step::token).collect();
            let wanted = if end_is_scored(ending) {
                tokens.len()
            } else {
                tokens.len().saturating_sub(1)
            };
            if wanted > rows.len() {
                if wanted - rows.len() > state.room() {
                    return stuck(
                        &constraint,
                        format!(
                            "ran out of context: the prompt left {} tokens for the reply (fewer \
                             tools or a shorter request leave more)",
                            state.room()
                        ),
                    );
                }
                rows.extend(state.feed(&tokens[rows.len()..wanted])?);
            }
            let repair = (checked..steps.len()).find_map(|i| match &steps[i] {
                Step::Chosen { token, others, .. } if !others.is_empty() => {
                    let before = if i == 0 { &start_logits } else { &rows[i - 1] };
                    let best = others.iter().fold(*token, |best, &t| {
                        if before[t as usize] > before[best as usize] {
                            t
                        } else {
                            best
                        }
                    });
                    (best != *token).then_some((i, best))
                }
                _ => None,
            });
            let Some((i, preferred)) = repair else { break };
            if req.deadline.is_some_and(|d| Instant::now() >= d) {
                return stuck(
                    &constraint,
                    format!("deadline reached after {i} reply tokens"),
                );
            }
            // Back to step i: the cache, the rows and the grammar; the model's piece there, and
            // a new draft after it.
            state.rewind(rows.len() - i);
            rows.truncate(i);
            steps.truncate(i);
            constraint = match fresh_constraint()? {
                Ok(c) => c,
                Err(reason) => return Ok(dead_end(reason)),
            };
            if let Err(d) = constraint.commit_all(&tokens[..i]) {
                return stuck(&constraint, d.reason);
            }
            ending = match self.walk(
                &mut constraint,
                &mut steps,
                req,
                target,
                max_new,
                Some(preferred),
            ) {
                Ok(ending) => ending,
                Err(Stuck(reason)) => return stuck(&constraint, reason),
            };
            checked = i + 1;
        }

        let mut tally = Tally::default();
        let mut before = start_logits;
        let last_row_fed = rows.len() == steps.len();
        let mut rows = rows.into_iter();
        if ending == Ending::Declines {
            end_with_best_stop(&mut before, self.eos, &self.other_ends);
            tally.chosen(log_prob(&before, self.eos));
        }
        for step in &steps {
            match *step {
                Step::Forced(t) => tally.forced(log_prob(&before, t)),
                Step::Chosen { token, may_end, .. } => {
                    if may_end {
                        end_with_best_stop(&mut before, self.eos, &self.other_ends);
                    }
                    // Where a `<tool_call>` reply could have ended, the step is the choice to
                    // go on: ln(1 - p(end)), as decoding weighs it.
                    tally.chosen(if may_end && deciding_syntax {
                        (-log_prob(&before, self.eos).exp()).ln_1p().max(f32::MIN)
                    } else {
                        log_prob(&before, token)
                    });
                }
            }
            match rows.next() {
                Some(row) => before = row,
                None => break,
            }
        }
        if end_is_scored(ending) && last_row_fed && !steps.is_empty() {
            end_with_best_stop(&mut before, self.eos, &self.other_ends);
            tally.chosen(log_prob(&before, self.eos));
        }

        let mut decoded = self.check(&catalog, &hash, &request_text, target)?;
        tally.write_into(&mut decoded);
        decoded.prompt_tokens = prompt_tokens;
        Ok(decoded)
    }

    /// Writes the rest of `target` under the grammar without the model, appending to `steps`
    /// (the steps `constraint` has committed): forced runs as decoding fast-forwards them, and
    /// at each choice `first` (once) or the longest allowed piece that begins what is left, or
    /// the end once all is written. `Ok(ending)`: written, and how it ends.
    fn walk(
        &self,
        constraint: &mut Constraint,
        steps: &mut Vec<Step>,
        req: &PlanRequest,
        target: &str,
        max_new: usize,
        mut first: Option<u32>,
    ) -> Result<Ending, Stuck> {
        loop {
            if constraint.is_stopped() {
                break;
            }
            if req.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Stuck(format!(
                    "deadline reached after {} reply tokens",
                    steps.len()
                )));
            }
            let forced: Vec<u32> = (if self.lm.fast_forward() {
                constraint.forced_tokens()
            } else {
                Vec::new()
            })
            .into_iter()
            .take_while(|&t| t != self.eos)
            .collect();
            if !forced.is_empty() {
                constraint
                    .commit_all(&forced)
                    .map_err(|d| Stuck(d.reason))?;
                steps.extend(forced.into_iter().map(Step::Forced));
                let written = constraint.output_text();
                if !target.starts_with(&written) {
                    return Err(Stuck(left_the_grammar(target, &written)));
                }
                continue;
            }
            let written = constraint.output_text();
            let mask = constraint.mask().map_err(|d| Stuck(d.reason))?;
            let may_end = mask.is_allowed(self.eos);
            match mask.count() {
                0 => return Err(Stuck("no token is allowed".into())),
                1 if may_end => break,
                _ => {}
            }
            let (token, others) = match target.strip_prefix(written.as_str()) {
                Some("") if may_end => {
                    let declines = self.settings.syntax == Syntax::ToolCall && steps.is_empty();
                    return Ok(if declines {
                        Ending::Declines
                    } else {
                        Ending::Chosen
                    });
                }
                Some("") => {
                    return Err(Stuck(format!(
                        "{LEFT_THE_GRAMMAR}: it ends where the grammar goes on"
                    )))
                }
                Some(rest) => {
                    let mut pieces = self.allowed_pieces(mask, rest.as_bytes());
                    let token = match first.take() {
                        Some(t) => t,
                        None => match pieces.iter().max_by_key(|(_, len)| *len) {
                            Some(&(t, _)) => t,
                            None => return Err(Stuck(left_the_grammar(target, &written))),
                        },
                    };
                    pieces.retain(|&(t, _)| t != token);
                    (token, pieces.into_iter().map(|(t, _)| t).collect())
                }
                None => return Err(Stuck(left_the_grammar(target, &written))),
            };
            constraint.commit(token).map_err(|d| Stuck(d.reason))?;
            steps.push(Step::Chosen {
                token,
                may_end,
                others,
            });
            if steps.len() >= 2 * max_new {
                return Err(Stuck(format!(
                    "token budget of {max_new} reached, and the reply could not close within {} tokens",
                    2 * max_new
                )));
            }
        }
        let text = constraint.output_text();
        if text != target {
            return Err(Stuck(format!(
                "{LEFT_THE_GRAMMAR}: the grammar ends after byte {} of its {}",
                text.len(),
                target.len()
            )));
        }
        Ok(Ending::Forced)
    }

    /// The tokens the mask allows whose bytes begin `rest`, with their lengths: the ways the
    /// vocabulary can write the next piece of a given text.
    fn allowed_pieces(&self, mask: &Mask, rest: &[u8]) -> Vec<(u32, usize)> {
        let env = self.engine.env();
        let mut pieces = Vec::new();
        for (w, &word) in mask.words().iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let id = (w * 32) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                if id == self.eos {
                    continue;
                }
                let bytes = env.token_slice(id);
                if !bytes.is_empty() && rest.starts_with(bytes) {
                    pieces.push((id, bytes.len()));
                }
            }
        }
        pieces
    }
}
