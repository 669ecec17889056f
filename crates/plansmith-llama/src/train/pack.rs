//! A batch of training examples laid out as one flat sequence of rows (padding-free packing),
//! with the prompt prefix several examples share stored once.
//!
//! Every example is `prefix ++ suffix`. A group of examples with a common prefix becomes one
//! *root* segment (the prefix, at positions `0..p`) followed by one segment per example (its
//! suffix, at positions `p..`), each of which attends to the whole root and causally to itself.
//! Attention never crosses examples, so the loss and every gradient equal those of the examples
//! run one by one; the shared prefix's forward runs once and its backward once, with the sum of
//! the gradients every suffix sends it.

/// One training example: `tokens[prompt_len..]` is the reply that carries loss.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    pub tokens: Vec<u32>,
    pub prompt_len: usize,
}

/// A contiguous run of rows of the pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    /// First row in the pack.
    pub start: usize,
    pub len: usize,
    /// RoPE position of the first row.
    pub pos0: usize,
    /// Rows of the shared prefix this segment sees in full (a root segment has none).
    pub parent: Option<(usize, usize)>,
}

/// The flat rows of a batch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pack {
    pub tokens: Vec<u32>,
    /// RoPE position of every row.
    pub pos: Vec<usize>,
    pub segments: Vec<Segment>,
    /// `(row, next token)`: rows whose prediction carries loss.
    pub targets: Vec<(usize, u32)>,
    /// Rows the same examples would cost without sharing (their total length).
    pub unshared_rows: usize,
}

impl Pack {
    pub fn rows(&self) -> usize {
        self.tokens.len()
    }

    fn push_segment(
        &mut self,
        tokens: &[u32],
        pos0: usize,
        parent: Option<(usize, usize)>,
    ) -> usize {
        let start = self.tokens.len();
        self.tokens.extend_from_slice(tokens);
        self.pos.extend(pos0..pos0 + tokens.len());
        self.segments.push(Segment {
            start,
            len: tokens.len(),
            pos0,
            parent,
        });
        start
    }

    /// Add one example whose first `shared` tokens are already rows `parent` of this pack.
    fn push_example(&mut self, ex: &Example, shared: usize, parent: Option<(usize, usize)>) {
        self.unshared_rows += ex.tokens.len();
        let start = self.push_segment(&ex.tokens[shared..], shared, parent);
        // Row of token i predicts token i + 1; the reply starts at `prompt_len`.
        for i in ex.prompt_len..ex.tokens.len() {
            self.targets.push((start + (i - 1 - shared), ex.tokens[i]));
        }
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Lay out `examples` (each with `1 <= prompt_len < tokens.len()`, checked by the caller).
///
/// With `min_shared = None` every example is its own root segment. With `Some(m)`, examples are
/// grouped greedily in order: an example joins the group whose prefix it shares most of, if that
/// is at least `m` tokens, and the group's prefix shrinks to what all members share. A prefix
/// never reaches the last prompt token, so every loss row belongs to one example's suffix.
pub(crate) fn pack(examples: &[&Example], min_shared: Option<usize>) -> Pack {
    let mut out = Pack::default();
    let Some(min) = min_shared else {
        for ex in examples {
            out.push_example(ex, 0, None);
        }
        return out;
    };
    // (prefix tokens, member indices)
    let mut groups: Vec<(Vec<u32>, Vec<usize>)> = Vec::new();
    for (i, ex) in examples.iter().enumerate() {
        let own = &ex.tokens[..ex.prompt_len - 1];
        let best = groups
            .iter()
            .enumerate()
            .map(|(g, (p, _))| (g, common_prefix(p, own)))
            .max_by_key(|&(g, n)| (n, std::cmp::Reverse(g)));
        match best {
            Some((g, n)) if n >= min.max(1) => {
                groups[g].0.truncate(n);
                groups[g].1.push(i);
            }
            _ => groups.push((own.to_vec(), vec![i])),
        }
    }
    for (prefix, members) in groups {
        if members.len() == 1 {
            out.push_example(examples[members[0]], 0, None);
            continue;
        }
        let root = out.push_segment(&prefix, 0, None);
        let parent = Some((root, prefix.len()));
        for m in members {
            out.push_example(examples[m], prefix.len(), parent);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(tokens: &[u32], prompt_len: usize) -> Example {
        Example {
            tokens: tokens.to_vec(),
            prompt_len,
        }
    }

    #[test]
    fn shared_prefix_is_stored_once_and_targets_stay_in_suffixes() {
        let a = ex(&[1, 2, 3, 4, 5, 9, 9], 5);
        let b = ex(&[1, 2, 3, 7, 8, 6], 5);
        let c = ex(&[4, 4, 4, 4], 2);
        let p = pack(&[&a, &b, &c], Some(2));
        // root [1,2,3] then suffixes [4,5,9,9] and [7,8,6], then c alone.
        assert_eq!(p.tokens, vec![1, 2, 3, 4, 5, 9, 9, 7, 8, 6, 4, 4, 4, 4]);
        assert_eq!(p.pos, vec![0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 0, 1, 2, 3]);
        assert_eq!(p.segments.len(), 4);
        assert_eq!(p.segments[1].parent, Some((0, 3)));
        assert_eq!(p.segments[3].parent, None);
        // a's targets: tokens 5, 6 (9, 9) predicted from rows of tokens 4 and 5.
        assert_eq!(&p.targets[..2], &[(4, 9), (5, 9)]);
        assert_eq!(p.targets[2], (8, 6));
        assert_eq!(&p.targets[3..], &[(11, 4), (12, 4)]);
        assert_eq!(p.unshared_rows, 7 + 6 + 4);
        let flat = pack(&[&a, &b, &c], None);
        assert_eq!(flat.rows(), 17);
        assert_eq!(flat.targets.len(), p.targets.len());
    }
}
