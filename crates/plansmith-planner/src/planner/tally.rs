//! The running sums a reply's confidence is read from.
//!
//! Decoding, scoring a given plan (`follow`), sampling and a remote engine's logprobs all
//! score a reply step by step; each confidence mode (`ConfidenceMode`) then reads the steps
//! its own way. Keeping the sums in one place keeps the four readings the same: a plan scored
//! by `follow` must get exactly the confidence decoding gave it.

use super::Decoded;

/// The log-probabilities of a reply's steps so far: every step, the chosen ones, the lowest.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    sum_all: f64,
    n_all: usize,
    sum_chosen: f64,
    n_chosen: usize,
    /// The lowest step's log-probability; 0 (certainty) before any step.
    weakest: f32,
}

impl Tally {
    /// A step the grammar forced: it counts among all steps and in the weakest, not among the
    /// chosen ones (the model had no choice there).
    pub(crate) fn forced(&mut self, lp: f32) {
        self.sum_all += lp as f64;
        self.n_all += 1;
        self.weakest = self.weakest.min(lp);
    }

    /// A step the model chose (a token, or the choice to end or go on): it counts everywhere.
    pub(crate) fn chosen(&mut self, lp: f32) {
        self.forced(lp);
        self.sum_chosen += lp as f64;
        self.n_chosen += 1;
    }

    /// Writes the three confidences and the step counts into `decoded`. A reply of no steps
    /// has confidence 0 in every mode.
    pub(crate) fn write_into(&self, decoded: &mut Decoded) {
        let mean = |s: f64, n: usize| if n == 0 { 0.0 } else { (s / n as f64) as f32 };
        decoded.conf_all = mean(self.sum_all, self.n_all);
        decoded.conf_chosen = mean(self.sum_chosen, self.n_chosen);
        decoded.conf_weakest = if self.n_all == 0 { 0.0 } else { self.weakest };
        decoded.forced_tokens = self.n_all - self.n_chosen;
        decoded.chosen_tokens = self.n_chosen;
    }
}

#[cfg(test)]
mod tests {
    use super::super::dead_end;
    use super::*;

    #[test]
    fn forced_steps_count_among_all_but_not_among_the_chosen() {
        let mut t = Tally::default();
        t.forced(-1.0);
        t.chosen(-0.5);
        t.chosen(-0.25);
        let mut d = dead_end(String::new());
        t.write_into(&mut d);
        assert!((d.conf_all - (-1.75 / 3.0)).abs() < 1e-6);
        assert!((d.conf_chosen - (-0.375)).abs() < 1e-6);
        assert_eq!(d.conf_weakest, -1.0);
        assert_eq!((d.forced_tokens, d.chosen_tokens), (1, 2));
    }

    #[test]
    fn no_steps_is_confidence_zero_in_every_mode() {
        let mut d = dead_end(String::new());
        Tally::default().write_into(&mut d);
        assert_eq!((d.conf_all, d.conf_chosen, d.conf_weakest), (0.0, 0.0, 0.0));
        assert_eq!((d.forced_tokens, d.chosen_tokens), (0, 0));
    }
}
