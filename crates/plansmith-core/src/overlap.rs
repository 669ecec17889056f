//! Keeping evaluation requests out of training data (decontamination).
//!
//! An evaluation set only measures a planner if no request of it, or a long run of its words,
//! was trained on. [`EvalRequests`] holds the requests of evaluation files (BFCL question files
//! such as `eval/handwritten/`, or trace files) as normalized word sequences; [`EvalRequests::hit`]
//! says whether a training request repeats one of them whole or shares a run of [`NGRAM`] words
//! with one; [`Decontaminator`] applies that to a training run and counts what it took out.
//!
//! Words are lowercased runs of letters and digits, so case, punctuation and spacing do not
//! hide a copy. Eight words, not the 13 of GPT-3's decontamination: requests are short (most
//! hand-written ones have under eight words, which is why a whole-request match counts too),
//! and eight is the window Llama 2's contamination analysis settled on for short texts.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

use crate::trace::TraceError;

/// Words in a run that counts as shared text.
pub const NGRAM: usize = 8;

/// A file that cannot be read as evaluation requests; names the file (and line).
#[derive(Debug, thiserror::Error)]
pub enum OverlapError {
    /// Unreadable file or malformed line: the trace reader's errors, which name both.
    #[error(transparent)]
    File(#[from] TraceError),
    #[error("{path}: no evaluation requests found (expected BFCL question files or traces, one JSON object per line)")]
    Empty { path: PathBuf },
}

/// How a training request overlaps an evaluation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlapKind {
    /// The same words in the same order (case and punctuation aside).
    Whole,
    /// A run of [`NGRAM`] words in common.
    Ngram,
}

/// The evaluation request a training request overlaps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    pub kind: OverlapKind,
    /// `id` of the BFCL item, or `file:line` of a trace.
    pub eval_id: String,
}

/// Lowercased runs of letters and digits.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The requests of evaluation sets, indexed for overlap checks.
#[derive(Debug, Default)]
pub struct EvalRequests {
    whole: HashMap<String, String>,
    grams: HashMap<String, String>,
    len: usize,
}

impl EvalRequests {
    /// Index requests given as `(id, text)`.
    pub fn new<'a>(requests: impl IntoIterator<Item = (String, &'a str)>) -> Self {
        let mut index = Self::default();
        for (id, text) in requests {
            index.add(id, text);
        }
        index
    }

    fn add(&mut self, id: String, text: &str) {
        let w = words(text);
        if w.is_empty() {
            return;
        }
        self.len += 1;
        for gram in w.windows(NGRAM) {
            self.grams
                .entry(gram.join(" "))
                .or_insert_with(|| id.clone());
        }
        self.whole.entry(w.join(" ")).or_insert(id);
    }

    /// Read evaluation files: each path a file, or a directory whose `*.json` / `*.jsonl`
    /// files are read (not its sub-directories: BFCL keeps answers in `possible_answer/`).
    /// A line is a BFCL item (its user turns are the request) or a trace (`request`).
    pub fn load(paths: &[PathBuf]) -> Result<Self, OverlapError> {
        let mut index = Self::default();
        for path in paths {
            let io = |error| TraceError::Io {
                path: path.clone(),
                error,
            };
            let before = index.len;
            if path.is_dir() {
                let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                    .map_err(io)?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.is_file()
                            && matches!(
                                p.extension().and_then(|e| e.to_str()),
                                Some("json" | "jsonl")
                            )
                    })
                    .collect();
                files.sort();
                for file in files {
                    index.load_file(&file)?;
                }
            } else {
                index.load_file(path)?;
            }
            if index.len == before {
                return Err(OverlapError::Empty { path: path.clone() });
            }
        }
        Ok(index)
    }

    fn load_file(&mut self, path: &Path) -> Result<(), OverlapError> {
        let text = std::fs::read_to_string(path).map_err(|error| TraceError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |message: String| TraceError::Line {
                path: path.to_path_buf(),
                line: i + 1,
                message,
            };
            let v: Value = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
            let id = match v.get("id").and_then(Value::as_str) {
                Some(id) => id.to_string(),
                None => format!("{}:{}", path.display(), i + 1),
            };
            let request = request_text(&v).ok_or_else(|| {
                bad("neither a BFCL item (`question`) nor a trace (`request`)".into())
            })?;
            self.add(id, &request);
        }
        Ok(())
    }

    /// Evaluation requests indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The evaluation request `request` repeats whole or shares [`NGRAM`] words with, if any.
    pub fn hit(&self, request: &str) -> Option<Hit> {
        let w = words(request);
        if let Some(id) = self.whole.get(&w.join(" ")) {
            return Some(Hit {
                kind: OverlapKind::Whole,
                eval_id: id.clone(),
            });
        }
        w.windows(NGRAM).find_map(|gram| {
            self.grams.get(&gram.join(" ")).map(|id| Hit {
                kind: OverlapKind::Ngram,
                eval_id: id.clone(),
            })
        })
    }
}

/// The user turns of a BFCL item (`question`: a list of turns, each a list of messages), or a
/// trace's `request`.
fn request_text(v: &Value) -> Option<String> {
    if let Some(r) = v.get("request").and_then(Value::as_str) {
        return Some(r.to_string());
    }
    let turns = v.get("question")?.as_array()?;
    let mut parts = Vec::new();
    for turn in turns {
        let messages = match turn {
            Value::Array(m) => m.iter().collect::<Vec<_>>(),
            other => vec![other],
        };
        for m in messages {
            if m.get("role").and_then(Value::as_str) == Some("user") {
                parts.push(m.get("content").and_then(Value::as_str)?.to_string());
            }
        }
    }
    Some(parts.join("\n"))
}

/// What a [`Decontaminator`] took out of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Excluded {
    /// Training-side traces dropped because they repeat an evaluation request whole.
    pub whole: usize,
    /// Dropped because they share [`NGRAM`] words with one.
    pub ngram: usize,
    /// The first few, as `(training request, evaluation id)`.
    pub examples: Vec<(String, String)>,
    /// Distinct evaluation requests that some dropped trace overlapped.
    pub eval_requests_hit: usize,
}

impl Excluded {
    pub fn total(&self) -> usize {
        self.whole + self.ngram
    }
}

/// Drops traces that overlap evaluation requests, counting them (safe to share across
/// threads).
#[derive(Debug)]
pub struct Decontaminator {
    eval: EvalRequests,
    excluded: Mutex<(Excluded, HashSet<String>)>,
}

impl Decontaminator {
    const EXAMPLES: usize = 5;

    pub fn new(eval: EvalRequests) -> Self {
        Self {
            eval,
            excluded: Mutex::new(Default::default()),
        }
    }

    /// `false` (and counted) when `request` overlaps an evaluation request.
    pub fn keep(&self, request: &str) -> bool {
        let Some(hit) = self.eval.hit(request) else {
            return true;
        };
        let mut guard = self.excluded.lock().unwrap_or_else(|e| e.into_inner());
        let (excluded, ids) = &mut *guard;
        match hit.kind {
            OverlapKind::Whole => excluded.whole += 1,
            OverlapKind::Ngram => excluded.ngram += 1,
        }
        if excluded.examples.len() < Self::EXAMPLES {
            excluded
                .examples
                .push((request.to_string(), hit.eval_id.clone()));
        }
        ids.insert(hit.eval_id);
        excluded.eval_requests_hit = ids.len();
        false
    }

    /// What has been dropped so far.
    pub fn excluded(&self) -> Excluded {
        self.excluded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// Evaluation requests checked against.
    pub fn eval_requests(&self) -> usize {
        self.eval.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_requests_match_across_case_and_punctuation() {
        let eval = EvalRequests::new([("a".to_string(), "Turn on the kitchen lights!")]);
        let hit = eval.hit("turn ON the kitchen-lights").unwrap();
        assert_eq!(hit.kind, OverlapKind::Whole);
        assert_eq!(hit.eval_id, "a");
        // A request that merely contains a short one is not a copy of it.
        assert_eq!(eval.hit("please turn on the kitchen lights"), None);
    }

    #[test]
    fn eight_shared_words_match_and_seven_do_not() {
        let eval = EvalRequests::new([(
            "b".to_string(),
            "could you please remind me what my gym schedule is on fridays",
        )]);
        let eight = "hey remind me what my gym schedule is on weekends";
        assert_eq!(eval.hit(eight).unwrap().kind, OverlapKind::Ngram);
        let seven = "so remind me what my gym schedule looks like";
        assert_eq!(eval.hit(seven), None);
    }

    #[test]
    fn bfcl_items_and_traces_load_and_bad_lines_are_named() {
        let dir = std::env::temp_dir().join(format!("plansmith-overlap-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("possible_answer")).unwrap();
        std::fs::write(
            dir.join("BFCL_v4_x.json"),
            r#"{"id": "x_0", "question": [[{"role": "system", "content": "be brief"}, {"role": "user", "content": "Find the area of a triangle"}]], "function": []}"#,
        )
        .unwrap();
        std::fs::write(dir.join("possible_answer/BFCL_v4_x.json"), "not json").unwrap();
        std::fs::write(
            dir.join("t.jsonl"),
            "{\"request\": \"open the door\", \"calls\": []}\n\n",
        )
        .unwrap();
        let eval = EvalRequests::load(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(eval.len(), 2);
        assert_eq!(
            eval.hit("find the AREA of a triangle").unwrap().eval_id,
            "x_0"
        );
        assert!(eval
            .hit("Open the door.")
            .unwrap()
            .eval_id
            .ends_with("t.jsonl:1"));
        // The system turn is not part of the request.
        assert_eq!(eval.hit("be brief"), None);

        std::fs::write(dir.join("t.jsonl"), "{\"calls\": []}\n").unwrap();
        let err = EvalRequests::load(std::slice::from_ref(&dir)).unwrap_err();
        assert!(err.to_string().contains("t.jsonl:1"), "{err}");
        let empty = dir.join("possible_answer/none");
        std::fs::create_dir_all(&empty).unwrap();
        let err = EvalRequests::load(&[empty]).unwrap_err();
        assert!(err.to_string().contains("no evaluation requests"), "{err}");
        let err = EvalRequests::load(&[dir.join("missing.json")]).unwrap_err();
        assert!(err.to_string().contains("missing.json"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_decontaminator_counts_what_it_drops() {
        let eval = EvalRequests::new([
            ("p1".to_string(), "send it"),
            (
                "p2".to_string(),
                "hold on until the download finishes and then open the file it made",
            ),
        ]);
        let d = Decontaminator::new(eval);
        assert!(d.keep("send it now"));
        assert!(!d.keep("Send it."));
        assert!(!d.keep("wait: hold on until the download finishes and then open it"));
        assert!(!d.keep("SEND IT"));
        let ex = d.excluded();
        assert_eq!((ex.whole, ex.ngram, ex.total()), (2, 1, 3));
        assert_eq!(ex.eval_requests_hit, 2);
        assert_eq!(ex.examples[0], ("Send it.".to_string(), "p1".to_string()));
        assert_eq!(d.eval_requests(), 2);
    }
}
