//! How a pretrained model's reply is read under the grammar, shown with a scripted model (a
//! byte vocabulary plus `<tool_call>` and an end token, whose logits favour the next byte of the
//! text it "wants" to write). The `<tool_call>` surface's prose answer ("no call") is open only
//! where the model itself starts in prose: one that declines in words gets its prose as a plan
//! with no call; one about to open a Markdown code fence (as Qwen2.5-Coder-0.5B often is) is
//! steered into a tagged call, not into prose. In both formats a reply makes no more calls than
//! the request has clauses for.

use std::path::Path;

use plansmith_core::{Catalog, Syntax};
use plansmith_grammar::TokEnv;
use plansmith_planner::backend::{DecodeState, ModelBackend, Persisted, Started};
use plansmith_planner::prompt::CatalogText;
use plansmith_planner::{PlanRequest, Planner, PlannerError, PlannerMeta, PlannerSettings};

/// Ids: 0..256 the bytes, 256 `<tool_call>\n`, 257 the end token, 258 `Safari` (a piece the
/// model never writes: it spells its wish byte by byte).
const TAG: u32 = 256;
const END: u32 = 257;
const SAFARI: u32 = 258;
const VOCAB: usize = 259;

struct Scripted {
    /// What the model wants to write after the prompt.
    wish: Vec<u8>,
    /// Logits of the `<tool_call>` tag and of the end token at the start.
    tag: f32,
    end: f32,
}

struct State<'a> {
    wish: &'a [u8],
    pos: usize,
    tag: f32,
    end: f32,
    /// The tag has been written: the wish follows it.
    tagged: bool,
    /// `(pos, tagged)` before each token fed, to rewind.
    fed: Vec<(usize, bool)>,
}

impl State<'_> {
    /// The model's next-token logits: the next byte of its wish (then the end) scores 10; at the
    /// start a prose opening (`H`, as in "Here is…") 7, the `<tool_call>` tag and the end
    /// their own scores (5 and 0 unless a test says; a model barred from its wish would rather
    /// talk than call) and everything else -20; later everything else 0.
    fn logits(&self) -> Vec<f32> {
        // At the start it would write nothing but its wish, prose, the tag or the end (not,
        // say, the tag spelt byte by byte).
        let start = self.pos == 0 && !self.tagged;
        let mut l = vec![if start { -20f32 } else { 0f32 }; VOCAB];
        match self.wish.get(self.pos) {
            Some(&b) => l[b as usize] = 10.0,
            None => l[END as usize] = 10.0,
        }
        if start {
            l[b'H' as usize] = l[b'H' as usize].max(7.0);
            l[TAG as usize] = self.tag;
            l[END as usize] = l[END as usize].max(self.end);
        }
        l
    }
}

impl DecodeState for State<'_> {
    fn feed(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, PlannerError> {
        Ok(ids.iter().map(|&id| self.step(id).unwrap()).collect())
    }

    fn step(&mut self, id: u32) -> Result<Vec<f32>, PlannerError> {
        self.fed.push((self.pos, self.tagged));
        if id == TAG && self.pos == 0 && !self.tagged {
            self.tagged = true;
            return Ok(self.logits());
        }
        // Off its script the model keeps no opinion but the end.
        let on_script = self.wish.get(self.pos) == Some(&(id as u8)) && id < 256;
        self.pos = if on_script {
            self.pos + 1
        } else {
            usize::MAX / 2
        };
        Ok(self.logits())
    }

    fn room(&self) -> usize {
        4096
    }

    fn rewind(&mut self, n: usize) {
        let keep = self.fed.len().saturating_sub(n);
        if let Some(&(pos, tagged)) = self.fed.get(keep) {
            (self.pos, self.tagged) = (pos, tagged);
        }
        self.fed.truncate(keep);
    }
}

impl ModelBackend for Scripted {
    fn tok_env(&self) -> Result<TokEnv, PlannerError> {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"<tool_call>\n".to_vec());
        tokens.push(Vec::new());
        assert_eq!(tokens.len(), SAFARI as usize);
        tokens.push(b"Safari".to_vec());
        Ok(TokEnv::from_token_bytes(tokens, END, &[], None).unwrap())
    }
    fn grammar_eos(&self) -> u32 {
        END
    }
    fn can_spell(&self, _: &str) -> bool {
        true
    }
    fn max_new_tokens(&self) -> usize {
        600
    }
    fn fast_forward(&self) -> bool {
        true
    }
    fn count_tokens(&self, text: &str) -> usize {
        text.len()
    }
    fn start(
        &self,
        _: &Catalog,
        _: &str,
        _: &str,
        _: CatalogText,
    ) -> Result<Started<'_>, PlannerError> {
        let state = State {
            wish: &self.wish,
            pos: 0,
            tag: self.tag,
            end: self.end,
            tagged: false,
            fed: Vec::new(),
        };
        let logits = state.logits();
        Ok(Started::Ready {
            state: Box::new(state),
            logits,
            prefix_hit: None,
            prompt_tokens: 0,
        })
    }
    fn check_catalog(&self, _: &Catalog, _: &str, _: CatalogText) -> Result<(), PlannerError> {
        Ok(())
    }
    fn free_stop(&self, id: u32) -> bool {
        id == END
    }
    fn detokenize(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().filter(|&&i| i < 256).map(|&i| i as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
    fn tokenize_completion(&self, text: &str) -> Vec<u32> {
        text.bytes().map(u32::from).chain([END]).collect()
    }
    fn persisted(&self) -> Persisted<'_> {
        Persisted::Pretrained {
            base: Path::new("scripted"),
            adapter: None,
        }
    }
}

fn planner(wish: &str) -> Planner {
    scripted(wish, 5.0, 0.0)
}

fn scripted(wish: &str, tag: f32, end: f32) -> Planner {
    scripted_as(Syntax::ToolCall, wish, tag, end)
}

fn scripted_as(syntax: Syntax, wish: &str, tag: f32, end: f32) -> Planner {
    let catalog = Catalog::from_json_str(
        r#"[{"name":"open","description":"Open an app","parameters":{"type":"object",
            "properties":{"app":{"type":"string"}},"required":["app"]}}]"#,
    )
    .unwrap();
    let mut settings = PlannerSettings::chat();
    settings.syntax = syntax;
    let lm = Scripted {
        wish: wish.as_bytes().to_vec(),
        tag,
        end,
    };
    Planner::with_lm(Box::new(lm), catalog, settings, PlannerMeta::default()).unwrap()
}

#[test]
fn a_model_that_declines_in_words_answers_no_call() {
    let p = planner("I'm sorry, I cannot check the weather.");
    let d = p.decode(&PlanRequest::new("what's the weather?")).unwrap();
    assert_eq!(d.text, "I'm sorry, I cannot check the weather.");
    let plan = d.plan.expect("prose parses");
    assert!(plan.calls.is_empty());
    assert_eq!(
        plan.spoken_text.as_deref(),
        Some("I'm sorry, I cannot check the weather.")
    );
}

#[test]
fn a_model_about_to_open_a_code_fence_is_steered_into_a_call() {
    let p = planner("```json\n{\"name\": \"open\", \"arguments\": {\"app\": \"Safari\"}}\n```");
    let d = p.decode(&PlanRequest::new("open safari")).unwrap();
    assert!(d.text.starts_with("<tool_call>\n"), "{:?}", d.text);
    assert_eq!(d.plan.expect("a tagged call parses").calls[0].name, "open");
}

/// Where the reply may end or open a call, the model ends it only when ending outweighs all
/// else it would write. Its tag's own logit may be meaningless: Qwen2.5-Coder-0.5B's
/// `<tool_call>` embedding is an untrained row, and its LoRA-tuned planner, asked the tag
/// against the end token, ended every reply at once. Here the tag scores -5 and the end 3, but
/// the model would write its call (10): it calls, and the step counts as the probability of
/// going on, not the tag's. A model that would end (12) still answers no call.
#[test]
fn the_end_of_a_reply_is_weighed_against_all_the_model_would_write_not_the_tag_alone() {
    let call = "{\"name\":\"open\",\"arguments\":{\"app\":\"Safari\"}}";
    let p = scripted(call, -5.0, 3.0);
    let d = p.decode(&PlanRequest::new("open safari")).unwrap();
    assert!(d.text.starts_with("<tool_call>\n{"), "{:?}", d.text);
    let plan = d.plan.as_ref().expect("a tagged call parses");
    assert_eq!(plan.calls.len(), 1, "{:?}", d.text);
    assert_eq!(plan.calls[0].arguments["app"], "Safari", "{:?}", d.text);
    // the tag step counts ln(1 - p(end)), about -e^-7, not the tag's ln p of about -15 (which
    // would put the mean over the few chosen steps below -1)
    assert!(d.conf_chosen > -0.1, "mean chosen step {}", d.conf_chosen);
    let d = scripted(call, -5.0, 12.0)
        .decode(&PlanRequest::new("open safari"))
        .unwrap();
    assert_eq!(d.text, "");
    assert!(d.plan.expect("the empty reply parses").calls.is_empty());
    // declining is scored by the end's probability (12 against the wish's 10 and the
    // prose opening's 7: about 0.88), not left at the mean of no steps (0, over any floor)
    assert!(
        d.conf_chosen < -0.05 && d.conf_chosen > -0.3,
        "no call at {}",
        d.conf_chosen
    );
    assert_eq!(d.conf_all, d.conf_chosen);
    assert_eq!(d.conf_weakest, d.conf_chosen);
    assert_eq!(d.chosen_tokens, 1);
}

/// After a call, the reply goes on to another only where the model would rather go on than
/// end, and only as far as the request has clauses for: "open safari and mail" gets both calls
/// the model writes; "open safari", with nothing joining a second request to it, gets one (an
/// untrained model goes on after its call with talk, and the grammar would turn it into calls).
#[test]
fn a_second_call_needs_the_model_to_go_on_and_the_request_to_ask_for_it() {
    let one = "{\"name\": \"open\", \"arguments\": {\"app\": \"Safari\"}}";
    let two = "{\"name\": \"open\", \"arguments\": {\"app\": \"Mail\"}}";
    let wish = format!("{one}\n</tool_call>\n<tool_call>\n{two}");
    let p = scripted(&wish, 5.0, 0.0);
    let d = p.decode(&PlanRequest::new("open safari and mail")).unwrap();
    let plan = d.plan.as_ref().expect("two tagged calls parse");
    let apps: Vec<_> = plan
        .calls
        .iter()
        .map(|c| c.arguments["app"].clone())
        .collect();
    assert_eq!(apps, ["Safari", "Mail"], "{:?}", d.text);
    let d = p.decode(&PlanRequest::new("open safari")).unwrap();
    let plan = d.plan.as_ref().expect("one tagged call parses");
    assert_eq!(plan.calls.len(), 1, "{:?}", d.text);
    assert_eq!(plan.calls[0].arguments["app"], "Safari", "{:?}", d.text);
}

/// Scoring a `<tool_call>` plan walks the decode's own steps: the decision to open a call
/// counts as ln(1 - p(end)), not the tag's logit, so a plan the planner writes scores what
/// decoding it gave (its floor's number), and "no call" scores the end's probability. The plan
/// is written with the model's own pieces: the grammar alone would write `Safari` as one token
/// (e^-10 to this model, which spells it byte by byte), and the score would fall far below the
/// decode's.
#[test]
fn a_tool_call_plan_scores_what_decoding_it_gave() {
    let call = "{\"name\": \"open\", \"arguments\": {\"app\": \"Safari\"}}";
    let p = scripted(call, -5.0, 3.0);
    let d = p.decode(&PlanRequest::new("open safari")).unwrap();
    let plan = d.plan.clone().expect("a tagged call parses");
    let score = p.score("open safari", &plan).unwrap();
    let decoded = d.confidence(p.settings.confidence);
    assert!(
        (score - decoded).abs() < 1e-6,
        "score {score}, decoded {decoded}"
    );
    let p = scripted(call, -5.0, 12.0);
    let d = p.decode(&PlanRequest::new("open safari")).unwrap();
    let none = d.plan.clone().expect("the empty reply parses");
    assert!(none.calls.is_empty());
    let score = p.score("open safari", &none).unwrap();
    assert!(
        (score - d.conf_chosen).abs() < 1e-6,
        "score {score}, decoded {}",
        d.conf_chosen
    );
    // the call it would not make scores as going on against a likely end: lower
    let going_on = p.score("open safari", &plan).unwrap();
    assert!(going_on < score, "calling {going_on}, declining {score}");
}

/// The end after a call is the model's choice where the request could have asked for more:
/// it counts in the confidence (one step more, its log-probability) for a planner whose floor
/// was fitted with it, and scoring the plan counts it the same way. Where the request has no
/// clause for another call the end is the planner's, not the model's, and stays unscored; a
/// planner calibrated before the end was scored keeps its old confidences.
#[test]
fn the_end_after_a_call_counts_where_the_model_chose_it() {
    let call = "{\"name\": \"open\", \"arguments\": {\"app\": \"Safari\"}}";
    let scored = scripted(call, 5.0, 0.0);
    assert!(scored.settings.end_scored, "new planners score the end");
    let mut unscored = scripted(call, 5.0, 0.0);
    unscored.settings.end_scored = false;
    let asks_for_two = "open safari and mail";
    let d = scored.decode(&PlanRequest::new(asks_for_two)).unwrap();
    let old = unscored.decode(&PlanRequest::new(asks_for_two)).unwrap();
    assert_eq!(d.text, old.text);
    assert_eq!(d.plan.as_ref().expect("one tagged call").calls.len(), 1);
    assert_eq!(d.chosen_tokens, old.chosen_tokens + 1, "{:?}", d.text);
    // the end's step: the end at 10 against 258 other tokens at 0, ln p about -0.012
    let n = d.chosen_tokens as f32;
    let end_step = d.conf_chosen * n - old.conf_chosen * (n - 1.0);
    assert!(end_step < -0.005 && end_step > -0.02, "end step {end_step}");
    for (p, d) in [(&scored, &d), (&unscored, &old)] {
        let plan = d.plan.clone().unwrap();
        let score = p.score(asks_for_two, &plan).unwrap();
        let decoded = d.confidence(p.settings.confidence);
        assert!(
            (score - decoded).abs() < 1e-6,
            "end scored {}: score {score}, decoded {decoded}",
            p.settings.end_scored
        );
    }
    // one clause: the planner ends the reply, and nothing is added
    let d = scored.decode(&PlanRequest::new("open safari")).unwrap();
    let old = unscored.decode(&PlanRequest::new("open safari")).unwrap();
    assert_eq!(d.chosen_tokens, old.chosen_tokens);
    assert_eq!(d.conf_chosen, old.conf_chosen);
}

/// A JSON array holds as many calls as the request has clauses for, no more: the grammar closes
/// the array where a model that goes on after its call (SmolLM2 repeats an item until the token
/// budget closes it) would otherwise have it turned into more calls.
#[test]
fn a_json_array_holds_no_more_calls_than_the_request_asks_for() {
    let wish = r#"[{"name":"open","arguments":{"app":"Safari"}},{"name":"open","arguments":{"app":"Mail"}}]"#;
    let p = scripted_as(Syntax::JsonArray, wish, 5.0, 0.0);
    let apps = |request: &str| -> Vec<serde_json::Value> {
        let d = p.decode(&PlanRequest::new(request)).unwrap();
        let plan = d.plan.as_ref().expect("a JSON array parses");
        plan.calls
            .iter()
            .map(|c| c.arguments["app"].clone())
            .collect()
    };
    assert_eq!(apps("open safari and mail"), ["Safari", "Mail"]);
    assert_eq!(apps("open safari"), ["Safari"]);
    // a request's own bound is never raised by its clauses
    let d = p
        .decode(&PlanRequest {
            max_calls: Some(1),
            ..PlanRequest::new("open safari and mail")
        })
        .unwrap();
    assert_eq!(d.plan.expect("a JSON array parses").calls.len(), 1);
}
