//! Name-prior correction for the first tool a plan calls ("surface form competition",
//! Holtzman et al. 2021; contextual calibration, Zhao et al. 2021).
//!
//! A small planner learns how often each tool is called as well as when. A tool it never saw
//! starts with a name the model finds unlikely whatever the request says, so a familiar tool
//! wins. The correction ranks the first call's name tokens by how much the request raises
//! them: `log p(t | request) - weight * log p(t | empty request)`, the second term read from
//! the same catalog with no request. Only the choice changes; confidence stays the model's own
//! log-probability, so the calibrated floor keeps its meaning.

use plansmith_core::Syntax;

use crate::backend::DecodeState;
use crate::error::PlannerError;

/// How far below the request's best next token (in nats) a token may be and still be chosen
/// by the correction: e^-5 is about 1/150.
pub(crate) const PLAUSIBLE: f32 = 5.0;

/// The empty-request decoding state that runs beside a request's, through the first name.
pub(crate) struct NamePrior<'a> {
    state: Box<dyn DecodeState + 'a>,
    /// Log-probabilities of the next token given the empty request.
    prior: Vec<f32>,
    weight: f32,
}

impl<'a> NamePrior<'a> {
    pub(crate) fn new(state: Box<dyn DecodeState + 'a>, logits: Vec<f32>, weight: f32) -> Self {
        NamePrior {
            state,
            prior: log_softmax(&logits),
            weight,
        }
    }

    /// The request's next-token scores with the empty request's prior taken out.
    #[cfg(test)]
    pub(crate) fn adjusted(&self, logits: &[f32]) -> Vec<f32> {
        log_softmax(logits)
            .iter()
            .zip(&self.prior)
            .map(|(r, p)| r - self.weight * p)
            .collect()
    }

    /// The next token: the allowed one with the best corrected score (`log p(t | request) -
    /// weight * log p(t | empty request)`) among those the
    /// request itself finds plausible (within [`PLAUSIBLE`] nats of its best allowed token).
    /// Without that bound the correction favours odd spellings of a name: a rare token piece
    /// is unlikely with and without the request, and their difference can still be large.
    pub(crate) fn choose(&self, logits: &[f32], allowed: impl Fn(u32) -> bool) -> Option<u32> {
        let own = log_softmax(logits);
        let best = (0..own.len() as u32)
            .filter(|&id| allowed(id))
            .map(|id| own[id as usize])
            .fold(f32::NEG_INFINITY, f32::max);
        if best == f32::NEG_INFINITY {
            return None;
        }
        (0..own.len() as u32)
            .filter(|&id| allowed(id) && own[id as usize] >= best - PLAUSIBLE)
            .map(|id| (id, own[id as usize] - self.weight * self.prior[id as usize]))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(id, _)| id)
    }

    /// Follow the request's decode by `ids`. Returns false when the empty request's context is
    /// full (the correction then stops).
    pub(crate) fn advance(&mut self, ids: &[u32]) -> Result<bool, PlannerError> {
        if ids.is_empty() {
            return Ok(true);
        }
        if ids.len() > self.state.room() {
            return Ok(false);
        }
        let rows = self.state.feed(ids)?;
        if let Some(last) = rows.last() {
            self.prior = log_softmax(last);
        }
        Ok(true)
    }
}

/// Move a running correction past `ids`; it ends with the first name (or the context). The
/// reply text is read only while the correction runs: decoding without one pays nothing.
pub(crate) fn follow(
    prior: &mut Option<NamePrior<'_>>,
    syntax: Syntax,
    ids: &[u32],
    reply: impl FnOnce() -> String,
) -> Result<(), PlannerError> {
    if let Some(p) = prior {
        if !in_first_name(syntax, &reply()) || !p.advance(ids)? {
            *prior = None;
        }
    }
    Ok(())
}

/// Whether a reply so far has not finished its first tool name: in the DSL no `(` yet; in the
/// JSON array and `<tool_call>` replies no closing quote after the first `"name"` key's value
/// has opened (the grammar puts `name` first).
pub(crate) fn in_first_name(syntax: Syntax, reply: &str) -> bool {
    match syntax {
        Syntax::JsonArray | Syntax::ToolCall => {
            let Some(key) = reply.find("\"name\"") else {
                return true;
            };
            let after = &reply[key + "\"name\"".len()..];
            match after.find('"') {
                // the value's opening quote; the name ends at the next quote
                Some(open) => !after[open + 1..].contains('"'),
                None => true,
            }
        }
        _ => !reply.contains('('),
    }
}

fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    let norm = max + sum.ln();
    logits.iter().map(|l| l - norm).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_name_ends_where_each_syntax_says() {
        for (syntax, inside, past) in [
            (Syntax::Dsl, "take_scr", "take_screenshot("),
            (
                Syntax::JsonArray,
                "[{\"name\":\"take_scr",
                "[{\"name\":\"take_screenshot\"",
            ),
            (Syntax::JsonArray, "[{\"name\": ", "[{\"name\": \"t\","),
            (
                Syntax::ToolCall,
                "<tool_call>\n{\"name\": \"take",
                "<tool_call>\n{\"name\": \"take\", \"arguments\"",
            ),
        ] {
            assert!(in_first_name(syntax, inside), "{syntax:?} {inside}");
            assert!(!in_first_name(syntax, past), "{syntax:?} {past}");
        }
        assert!(in_first_name(Syntax::JsonArray, "["));
    }

    struct Fixed(Vec<f32>);

    impl DecodeState for Fixed {
        fn feed(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, PlannerError> {
            Ok(ids.iter().map(|_| self.0.clone()).collect())
        }
        fn step(&mut self, _id: u32) -> Result<Vec<f32>, PlannerError> {
            Ok(self.0.clone())
        }
        fn room(&self) -> usize {
            4
        }
        fn rewind(&mut self, _n: usize) {}
    }

    fn argmax(v: &[f32]) -> usize {
        (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
    }

    #[test]
    fn a_tool_the_request_raises_beats_one_that_is_merely_common() {
        // Token 0: a common tool, likely with or without the request (0.95 a priori, 0.73
        // given it). Token 1: a rare one the request makes almost six times likelier.
        let prior = vec![3.0, 0.0];
        let request = vec![3.0, 2.0];
        let np = NamePrior::new(Box::new(Fixed(prior.clone())), prior, 1.0);
        assert_eq!(argmax(&request), 0, "uncorrected, the common tool wins");
        assert_eq!(argmax(&np.adjusted(&request)), 1);
        // Weight 0 is the model's own ranking.
        let off = NamePrior::new(Box::new(Fixed(vec![0.0, 0.0])), vec![9.0, 0.0], 0.0);
        assert_eq!(argmax(&off.adjusted(&request)), 0);
    }

    #[test]
    fn only_tokens_the_request_finds_plausible_are_reranked() {
        // Token 0: the request's choice. Token 1: raised by the request, plausible. Token 2: an
        // odd piece, far less likely with the request (-8 nats) and still less without it:
        // its difference is the largest, but it is not a candidate.
        let prior = vec![4.0, 0.0, -12.0];
        let request = vec![4.0, 3.0, -4.0];
        let np = NamePrior::new(Box::new(Fixed(prior.clone())), prior, 1.0);
        assert_eq!(argmax(&np.adjusted(&request)), 2);
        assert_eq!(np.choose(&request, |_| true), Some(1));
        assert_eq!(np.choose(&request, |id| id != 1), Some(0));
        assert_eq!(np.choose(&request, |_| false), None);
    }

    #[test]
    fn advancing_past_the_context_stops_the_correction() {
        let mut np = NamePrior::new(Box::new(Fixed(vec![1.0, 0.0])), vec![0.0, 0.0], 1.0);
        assert!(np.advance(&[1, 2]).unwrap());
        assert_eq!(np.prior, log_softmax(&[1.0, 0.0]));
        assert!(!np.advance(&[1, 2, 3, 4, 5]).unwrap());
    }

    #[test]
    fn the_first_name_ends_at_its_parenthesis() {
        assert!(in_first_name(Syntax::Dsl, ""));
        assert!(in_first_name(Syntax::Dsl, "wa"));
        assert!(!in_first_name(Syntax::Dsl, "wait("));
        assert!(!in_first_name(Syntax::Dsl, "wait(condition=x) | se"));
    }
}
